package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// A profile's fio `rw: write` step whose target was an existing file on
// the lab host (a text file here; /etc/passwd as root) ran and overwrote
// it. Against the real server, sshd, the probe and fio: the run request is
// refused with 422 naming the host's places; steps the server cannot judge
// (a read that would lay the file out, a write through a symbolic link
// inside the scratch folder, a write to a file inside the scratch folder
// that the probe did not create, a file larger than the free space) reach
// the host, where the probe refuses them; the files survive byte for byte
// and nothing is laid out.
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

	// Refused when the run is requested.
	status, out := b.requestRun(t, b.fioProfile(t, "overwrite", victim, "write"), hostID)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", out)
	fields, _ := out["fields"].(map[string]any)
	require.Contains(t, fields["host"], "step step writes (rw write) to "+victim+", which is not a place where lab-1 lets tests write ("+b.work+")")

	// Inside the scratch folder, a file the probe did not create (someone's
	// dataset), 16 MiB so that reading it would lay nothing out.
	dataset := filepath.Join(b.work, "dataset.bin")
	datasetBytes := bytes.Repeat([]byte("the customer's dataset\n"), (16<<20)/23+1)
	require.NoError(t, os.WriteFile(dataset, datasetBytes, 0o644))
	// A new file larger than the scratch folder's file system has free.
	huge := filepath.Join(b.work, "huge.dat")

	// Refused again by the probe on the host.
	for _, c := range []struct {
		name, target, rw string
		size             acceptance.ByteSize
		reason           string
	}{
		{"lay out", victim, "randread", 16 << 20, "refusing to extend (lay out) " + victim + ": it is outside the places this host lets tests write (" + b.work + ")"},
		{"through a link", link, "randwrite", 16 << 20, "refusing to write to " + link + ": it is outside the places"},
		{"not the probe's own", dataset, "randwrite", 16 << 20, "refusing to write to " + dataset + ": the file existed before and was not created by Accord's probe; declare the file itself among the host's places to let tests write it"},
		{"no room", huge, "randread", acceptance.MaxFioSize, "refusing to lay out 1048576.0 GiB of fio's file in " + b.work + ": only "},
	} {
		status, out := b.requestRun(t, b.fioProfileOfSize(t, c.name, c.target, c.rw, c.size), hostID)
		require.Equal(t, http.StatusCreated, status, "%s: the server cannot tell: %v", c.name, out)
		require.Contains(t, b.runFailure(t, c.name, out["id"]), c.reason, c.name)
	}

	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, sha256.Sum256(original), sha256.Sum256(got), "the file survives untouched")
	fi, err = os.Stat(victim)
	require.NoError(t, err)
	require.Equal(t, mtime, fi.ModTime())
	require.EqualValues(t, len(original), fi.Size())
	got, err = os.ReadFile(dataset)
	require.NoError(t, err)
	require.Equal(t, sha256.Sum256(datasetBytes), sha256.Sum256(got), "the dataset in the scratch folder survives untouched")
	require.NoFileExists(t, huge, "nothing was laid out")
}

// fioProfile saves a profile of one fio step on a 16 MiB file and returns
// its version's id.
func (b *submitBundle) fioProfile(t *testing.T, name, target, rw string) int64 {
	t.Helper()
	return b.fioProfileOfSize(t, name, target, rw, 16<<20)
}

// fioProfileOfSize is fioProfile on a file of the given size.
func (b *submitBundle) fioProfileOfSize(t *testing.T, name, target, rw string, size acceptance.ByteSize) int64 {
	t.Helper()
	p := acceptance.ProfileSpec{
		Name: name, Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe}, Repetitions: 1,
		Steps: []acceptance.StepSpec{{Name: "step", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: rw, BlockSize: 4 << 10, IODepth: 1, NumJobs: 1,
			Size: size, Runtime: acceptance.Duration(time.Second), IOEngine: "psync", Target: target}}},
	}.Normalized()
	b.saveProfile(t, p)
	return b.versionID[name]
}

// requestRun asks for a run of the profile version on the host through
// the API, as the engineer, and returns the answer.
func (b *submitBundle) requestRun(t *testing.T, versionID, hostID int64) (int, map[string]any) {
	t.Helper()
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

// runFailure waits for the run to fail and returns its reason.
func (b *submitBundle) runFailure(t *testing.T, what string, id any) string {
	t.Helper()
	runID := strconv.FormatFloat(id.(float64), 'f', -1, 64)
	require.Eventually(t, func() bool { return b.runState(t, runID) == "failed" }, 90*time.Second, 200*time.Millisecond, "%s: run %s fails", what, runID)
	var reason string
	require.NoError(t, b.store.Pool.QueryRow(context.Background(), `SELECT reason FROM runs WHERE id = $1`, id).Scan(&reason))
	return reason
}

// Any engineer of either side could declare /etc/passwd (or
// /proc/1/root/etc/passwd) among the lab host's write places and then
// overwrite it with a fio write step. Against the real server, sshd, the
// probe and fio: the engineer's declaration is refused (403 on the host's
// form, 422 when registering a host with places), their write step is
// refused when the run is requested; an owner's declaration of a system
// location is refused (422 naming it); and a scratch folder that is a link
// into /etc, which the server cannot see, is refused by the probe on the
// host once it resolved the link. The victim survives byte for byte and
// nothing appears in /etc.
func TestAttackEngineerWidensWritePlacesToOverwriteSystemFiles(t *testing.T) {
	t.Parallel()
	b := setupSubmit(t)
	ctx := context.Background()
	var hostID, vendorID, customerID int64
	require.NoError(t, b.store.Pool.QueryRow(ctx, `SELECT id FROM hosts WHERE name = 'lab-1'`).Scan(&hostID))
	require.NoError(t, b.store.Pool.QueryRow(ctx, `SELECT id FROM organizations WHERE kind = 'vendor'`).Scan(&vendorID))
	require.NoError(t, b.store.Pool.QueryRow(ctx, `SELECT id FROM organizations WHERE kind = 'customer'`).Scan(&customerID))
	member := func(email string, org int64, role store.Role) *http.Client {
		id, password := userWithPassword(t, b.store, email, &org, false)
		_, err := b.store.SetMember(ctx, b.programID, id, role)
		require.NoError(t, err)
		return signInAt(t, b.base, email, password)
	}
	engineers := map[string]*http.Client{
		"vendor engineer":   member("attacker@vendor.example", vendorID, store.RoleEngineer),
		"customer engineer": member("attacker@customer.example", customerID, store.RoleEngineer),
	}
	owner := member("owner@customer.example", customerID, store.RoleOwner)
	victim := filepath.Join(t.TempDir(), "passwd")
	original := []byte("root:x:0:0:root:/root:/bin/bash\n")
	require.NoError(t, os.WriteFile(victim, original, 0o644))
	places := func() []string {
		var p []string
		require.NoError(t, b.store.Pool.QueryRow(ctx, `SELECT write_places FROM hosts WHERE id = $1`, hostID).Scan(&p))
		return p
	}
	hostURL := fmt.Sprintf("%s/programs/%d/hosts/%d", b.base, b.programID, hostID)
	post := func(c *http.Client, target string, form url.Values) (int, string) {
		resp, err := c.PostForm(target, form)
		return answer(t, resp, err)
	}

	// The engineer's declaration, on the host's form and with a new host
	// at the same address.
	for who, c := range engineers {
		status, _ := post(c, hostURL+"/write-places", url.Values{"write_places": {victim + "\n/proc/1/root/etc/passwd"}, "allow_destructive": {"1"}})
		require.Equal(t, http.StatusForbidden, status, who)
		status, page := post(c, fmt.Sprintf("%s/programs/%d/hosts", b.base, b.programID), url.Values{"name": {"lab-1-again"}, "address": {"127.0.0.1"},
			"port": {"22"}, "username": {"root"}, "auth_method": {"key"}, "write_places": {victim}})
		require.Equal(t, http.StatusUnprocessableEntity, status, who)
		require.Contains(t, page, "Only the program&#39;s owners declare where tests may write", who)
	}
	require.Equal(t, []string{b.work}, places(), "the engineers' declarations changed nothing")

	// Their write step is refused when the run is requested.
	status, out := b.requestRun(t, b.fioProfile(t, "overwrite", victim, "write"), hostID)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", out)
	fields, _ := out["fields"].(map[string]any)
	require.Contains(t, fields["host"], "which is not a place where lab-1 lets tests write ("+b.work+")")
	status, out = b.requestRun(t, b.fioProfile(t, "overwrite via proc", "/proc/1/root/etc/passwd", "write"), hostID)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", out)
	fields, _ = out["fields"].(map[string]any)
	require.Contains(t, fields["host"], "writes (rw write) to /proc/1/root/etc/passwd: /proc/1/root/etc/passwd is under /proc, a system location, where tests never write")

	// An owner cannot declare a system location either.
	for place, want := range map[string]string{
		"/etc":                    "/etc is a system location",
		"/etc/passwd":             "/etc/passwd is under /etc, a system location",
		"/proc/1/root/etc/passwd": "/proc/1/root/etc/passwd is under /proc, a system location",
		"/usr":                    "/usr is a system location",
		"/bin":                    "/bin is a system location",
		"/boot":                   "/boot is a system location",
		"/sys/block":              "/sys/block is under /sys, a system location",
		"/dev/shm":                "/dev/shm is a system location",
		"/":                       "too broad",
	} {
		status, page := post(owner, hostURL+"/write-places", url.Values{"write_places": {b.work + "\n" + place}})
		require.Equal(t, http.StatusUnprocessableEntity, status, place)
		require.Contains(t, page, want, place)
	}
	require.Equal(t, []string{b.work}, places())

	// A scratch folder (declared by the owner) holding a link into /etc:
	// the server cannot see the link, the probe resolves it and refuses.
	status, _ = post(owner, hostURL+"/write-places", url.Values{"write_places": {b.work}})
	require.Equal(t, http.StatusSeeOther, status)
	require.NoError(t, os.Symlink("/etc", filepath.Join(b.work, "etc-link")))
	name := "accord-attack-" + filepath.Base(b.work) + ".dat"
	t.Cleanup(func() { _ = os.Remove(filepath.Join("/etc", name)) })
	target := filepath.Join(b.work, "etc-link", name)
	status, out = b.requestRun(t, b.fioProfile(t, "write through a linked folder", target, "write"), hostID)
	require.Equal(t, http.StatusCreated, status, "the server cannot tell: %v", out)
	require.Contains(t, b.runFailure(t, "linked folder", out["id"]),
		"refusing to write to "+target+" (/etc/"+name+" once its links are resolved): /etc/"+name+" is under /etc, a system location, where tests never write, whatever the host declares")
	require.NoFileExists(t, filepath.Join("/etc", name))

	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, original, got, "the file survives untouched")
}
