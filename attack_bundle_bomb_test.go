package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/store"
)

// zeroBomb is a gzip'd tar whose entries are runs of zero bytes: it is
// tiny compressed and huge expanded.
func zeroBomb(t *testing.T, names []string, size int64) []byte {
	t.Helper()
	var out bytes.Buffer
	gz, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	require.NoError(t, err)
	tw := tar.NewWriter(gz)
	zeros := make([]byte, 1<<20)
	for _, name := range names {
		require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "accord-run-1/" + name, Size: size, Mode: 0o644, ModTime: time.Unix(0, 0)}))
		for left := size; left > 0; left -= int64(len(zeros)) {
			_, err := tw.Write(zeros[:min(left, int64(len(zeros)))])
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return out.Bytes()
}

// multipartBody is a form with fields and one file.
func multipartBody(t *testing.T, fields map[string]string, fileField string, file []byte) (*bytes.Buffer, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		require.NoError(t, mw.WriteField(k, v))
	}
	fw, err := mw.CreateFormFile(fileField, "bundle.tar.gz")
	require.NoError(t, err)
	_, err = fw.Write(file)
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	return &body, mw.FormDataContentType()
}

// TestAttackBundleBombThroughVerifyAndImport sends the attacker's bomb (a
// 1 MiB gzip'd tar of sixteen 64 MiB attestations/*.dsse.json entries,
// which raised the server's RSS from 113 MB to 1.59 GB) to /verify as a
// user in no program and to a program's report import, and a ratio bomb
// (one 1 GiB artifact of zeros) to /verify. The server runs as its own
// process; its peak resident set (VmHWM, reset before each request) stays
// within 100 MiB of its resident set before, and each answer names the
// limit the bundle broke.
func TestAttackBundleBombThroughVerifyAndImport(t *testing.T) {
	t.Parallel()
	srv := startServerProcess(t)
	ctx := context.Background()

	vendor, err := srv.store.CreateOrganization(ctx, "Vendor", "vendor")
	require.NoError(t, err)
	customer, err := srv.store.CreateOrganization(ctx, "Customer", "customer")
	require.NoError(t, err)
	programID, err := srv.store.CreateProgram(ctx, "Program", "", vendor, customer, nil)
	require.NoError(t, err)
	_, outsiderPassword := srv.user(t, "outsider@attack.test", &customer, false)
	engineerID, engineerPassword := srv.user(t, "engineer@attack.test", &vendor, false)
	_, err = srv.store.SetMember(ctx, programID, engineerID, store.RoleEngineer)
	require.NoError(t, err)
	profile := acceptance.ProfileSpec{Name: "read", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe},
		Repetitions: 1, Steps: []acceptance.StepSpec{{Name: "settle", Kind: acceptance.StepPause, Pause: &acceptance.PauseStep{Duration: acceptance.Duration(time.Second)}}}}.Normalized()
	require.Empty(t, acceptance.ValidateProfile(profile))
	canon, err := acceptance.ProfileCanonicalJSON(profile)
	require.NoError(t, err)
	digest, err := acceptance.ProfileDigest(profile)
	require.NoError(t, err)
	_, pv, err := srv.store.CreateSpec(ctx, store.KindProfile, programID, store.NewSpecVersion{Name: profile.Name, Spec: canon, Digest: digest})
	require.NoError(t, err)
	kr, err := attest.OpenKeyring(t.TempDir(), attest.KeyringOptions{})
	require.NoError(t, err)
	pub, err := kr.PublicKeys()
	require.NoError(t, err)
	pinned := string(attest.MarshalAllowedSigners(pub))

	var names []string
	for i := range 16 {
		names = append(names, fmt.Sprintf("attestations/a%02d.dsse.json", i))
	}
	bomb := zeroBomb(t, names, 64<<20)
	t.Logf("the bomb: %s compressed, 16 × 64 MiB expanded", mib(int64(len(bomb))))
	require.Less(t, len(bomb), 2<<20)
	ratioBomb := zeroBomb(t, []string{"artifacts/zeros.bin"}, 1<<30)

	outsider := srv.signIn(t, "outsider@attack.test", outsiderPassword)
	engineer := srv.signIn(t, "engineer@attack.test", engineerPassword)
	importURL := fmt.Sprintf("%s/programs/%d/runs/import/report", srv.base, programID)
	post := func(c *http.Client, target string, fields map[string]string, bundle []byte) (int, string) {
		body, ctype := multipartBody(t, fields, "bundle", bundle)
		req, err := http.NewRequest(http.MethodPost, target, body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", ctype)
		resp, err := c.Do(req)
		return answer(t, resp, err)
	}
	// Warm up: the pages and a refused small bundle, so that the reading
	// below is the server at rest, not its first request.
	for range 3 {
		status, _ := post(outsider, srv.base+"/verify", nil, []byte("not a bundle"))
		require.Equal(t, http.StatusUnprocessableEntity, status)
	}
	time.Sleep(500 * time.Millisecond)

	for _, attack := range []struct {
		name   string
		client *http.Client
		target string
		fields map[string]string
		bundle []byte
		limit  string
	}{
		{"verify, sixteen 64 MiB attestations", outsider, srv.base + "/verify", nil, bomb, "attestations/a00.dsse.json is larger than 16 MiB (limit on the file size)"},
		{"import, sixteen 64 MiB attestations", engineer, importURL, map[string]string{"profile_version": strconv.FormatInt(pv.ID, 10), "key": pinned}, bomb, "larger than 16 MiB (limit on the file size)"},
		{"verify, one 1 GiB artifact of zeros", outsider, srv.base + "/verify", nil, ratioBomb, "expands more than 100 times its compressed size (limit on the compression ratio)"},
	} {
		before, _ := srv.memory(t)
		srv.resetPeak(t)
		status, page := post(attack.client, attack.target, attack.fields, attack.bundle)
		after, peak := srv.memory(t)
		t.Logf("%s: RSS before %s, peak during %s (growth %s), after %s; answer %d", attack.name, mib(before), mib(peak), mib(peak-before), mib(after), status)
		require.Equal(t, http.StatusRequestEntityTooLarge, status, attack.name)
		require.Contains(t, page, attack.limit, attack.name)
		require.Less(t, peak-before, int64(100<<20), "%s: the server's peak RSS grew by %s", attack.name, mib(peak-before))
	}

	// The refused import kept nothing.
	var runs int
	require.NoError(t, srv.pool.QueryRow(ctx, `SELECT count(*) FROM runs`).Scan(&runs))
	require.Zero(t, runs)
}
