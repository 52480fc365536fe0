package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

// A profile's fio `rw: write` step whose target was an existing file on
// the lab host (a text file here; /etc/passwd as root) ran and overwrote
// it. Against the real server, sshd, the probe and fio: the run request is
// refused with 422 naming the host's places; steps the server cannot judge
// (a read that would lay the file out, a write through a symbolic link
// inside the scratch folder) reach the host, where the probe refuses them;
// the file survives byte for byte.
func TestAttackFioWriteOverwritesAFileOnTheLabHost(t *testing.T) {
	t.Parallel()
	b := setupSubmit(t)
	ctx := context.Background()
	victim := filepath.Join(t.TempDir(), "passwd")
	original := []byte("root:x:0:0:root:/root:/bin/bash\nengineer:x:1000:1000::/home/engineer:/bin/bash\n")
	require.NoError(t, os.WriteFile(victim, original, 0o644))
	fi, err := os.Stat(victim)
	require.NoError(t, err)
	mtime := fi.ModTime()
	link := filepath.Join(b.work, "innocent.dat")
	require.NoError(t, os.Symlink(victim, link))

	var hostID int64
	require.NoError(t, b.store.Pool.QueryRow(ctx, `SELECT id FROM hosts WHERE name = 'lab-1'`).Scan(&hostID))
	fioProfile := func(name, target, rw string) int64 {
		p := acceptance.ProfileSpec{
			Name: name, Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe}, Repetitions: 1,
			Steps: []acceptance.StepSpec{{Name: "step", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: rw, BlockSize: 4 << 10, IODepth: 1, NumJobs: 1,
				Size: 16 << 20, Runtime: acceptance.Duration(time.Second), IOEngine: "psync", Target: target}}},
		}.Normalized()
		b.saveProfile(t, p)
		return b.versionID[name]
	}
	requestRun := func(versionID int64) (int, map[string]any) {
		// The lab host has no NVMe controller: its readiness is confirmed away.
		body, err := json.Marshal(map[string]any{"profile_version_id": versionID, "host_id": hostID, "confirm_readiness": true})
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/v1/programs/%d/runs", b.base, b.programID), bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+b.token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
		return res.StatusCode, out
	}

	// Refused when the run is requested.
	status, out := requestRun(fioProfile("overwrite", victim, "write"))
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", out)
	fields, _ := out["fields"].(map[string]any)
	require.Contains(t, fields["host"], "step step writes (rw write) to "+victim+", which is not a place where lab-1 lets tests write ("+b.work+")")

	// Refused again by the probe on the host.
	for _, c := range []struct{ name, target, rw, reason string }{
		{"lay out", victim, "randread", "refusing to extend (lay out) " + victim + ": it is outside the places this host lets tests write (" + b.work + ")"},
		{"through a link", link, "randwrite", "refusing to write to " + link + ": it is outside the places"},
	} {
		status, out := requestRun(fioProfile(c.name, c.target, c.rw))
		require.Equal(t, http.StatusCreated, status, "%s: the server cannot tell: %v", c.name, out)
		runID := strconv.FormatFloat(out["id"].(float64), 'f', -1, 64)
		require.Eventually(t, func() bool { return b.runState(t, runID) == "failed" }, 90*time.Second, 200*time.Millisecond, "%s: run %s fails", c.name, runID)
		var reason string
		require.NoError(t, b.store.Pool.QueryRow(ctx, `SELECT reason FROM runs WHERE id = $1`, out["id"]).Scan(&reason))
		require.Contains(t, reason, c.reason, c.name)
	}

	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, sha256.Sum256(original), sha256.Sum256(got), "the file survives untouched")
	fi, err = os.Stat(victim)
	require.NoError(t, err)
	require.Equal(t, mtime, fi.ModTime())
	require.EqualValues(t, len(original), fi.Size())
}
