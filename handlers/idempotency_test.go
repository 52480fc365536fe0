package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// A pipeline that sends its run request again under the same
// Idempotency-Key (the first answer was lost) gets the run it started,
// never a second one; the key used for another request is refused.
func TestRunRequestIdempotencyKey(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	host, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	require.NoError(t, pb.store.PinHostKeys(ctx, pb.programID, host, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly", "SHA256:fake", nil))
	pv := pb.profileVersionID(t)
	path := fmt.Sprintf("/api/v1/programs/%d/runs", pb.programID)
	post := func(key string, req map[string]any) (int, map[string]any, http.Header) {
		t.Helper()
		raw, _ := json.Marshal(req)
		r, _ := http.NewRequest(http.MethodPost, pb.ts.URL+path, bytes.NewReader(raw))
		r.Header.Set("Authorization", "Bearer "+pb.engToken)
		r.Header.Set("Content-Type", "application/json")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		res, err := http.DefaultClient.Do(r)
		require.NoError(t, err)
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out, res.Header
	}
	runs := func() int {
		var n int
		require.NoError(t, pb.pool.QueryRow(ctx, `SELECT count(*) FROM runs WHERE program_id = $1`, pb.programID).Scan(&n))
		return n
	}
	req := map[string]any{"profile_version_id": pv, "host_id": host, "label": "nightly 2026-11-30"}

	status, first, hdr := post("ci-4711-attempt", req)
	require.Equal(t, http.StatusCreated, status, "%v", first)
	require.Empty(t, hdr.Get("Idempotent-Replayed"))
	status, again, hdr := post("ci-4711-attempt", req)
	require.Equal(t, http.StatusOK, status, "%v", again)
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))
	require.Equal(t, first["id"], again["id"])
	require.Equal(t, 1, runs())

	// The key names one request: another one under it is refused.
	other := map[string]any{"profile_version_id": pv, "host_id": host, "label": "another"}
	status, refused, _ := post("ci-4711-attempt", other)
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, refused["error"], fmt.Sprintf("this Idempotency-Key started run %v with a different request", first["id"]))
	require.Equal(t, 1, runs())

	// Without a key, or with a new one, each request is a new run.
	status, _, _ = post("", req)
	require.Equal(t, http.StatusCreated, status)
	status, _, _ = post("ci-4712-attempt", req)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, 3, runs())

	for _, bad := range []string{strings.Repeat("k", 201), "two words", "naïve"} {
		status, out, _ := post(bad, req)
		require.Equal(t, http.StatusUnprocessableEntity, status, bad)
		require.Contains(t, out["error"], "Idempotency-Key")
	}

	// The same request sent many times at once starts one run.
	var wg sync.WaitGroup
	ids := make([]any, 8)
	codes := make([]int, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out map[string]any
			codes[i], out, _ = post("ci-4713-attempt", req)
			ids[i] = out["id"]
		}()
	}
	wg.Wait()
	created := 0
	for i := range ids {
		require.Contains(t, []int{http.StatusCreated, http.StatusOK}, codes[i])
		require.Equal(t, ids[0], ids[i])
		if codes[i] == http.StatusCreated {
			created++
		}
	}
	require.Equal(t, 1, created)
	require.Equal(t, 4, runs())

	// A profile whose storage is emulated labels its runs emulated, on any
	// host; the KV-cache profile on this host does not.
	require.Equal(t, false, first["emulated"])
	tmpl, ok := acceptance.LookupProfileTemplate("inference-ttft-sweep")
	require.True(t, ok)
	require.Equal(t, acceptance.TransportEmulated, tmpl.Spec.Storage.Transport)
	_, nv, _, err := prepareSpec(profileOps, tmpl.Spec)
	require.NoError(t, err)
	_, emulatedPV, err := pb.store.CreateSpec(ctx, store.KindProfile, pb.programID, nv)
	require.NoError(t, err)
	status, emu, _ := post("", map[string]any{"profile_version_id": emulatedPV.ID, "host_id": host, "confirm_readiness": true})
	require.Equal(t, http.StatusCreated, status, "%v", emu)
	require.Equal(t, true, emu["emulated"])
}
