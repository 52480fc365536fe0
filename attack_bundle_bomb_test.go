package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
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
	// BestSpeed: zeros compress about 800 times at it (1.3 MB a GiB),
	// in a third of BestCompression's 1.9 CPU-seconds a GiB.
	gz, err := gzip.NewWriterLevel(&out, gzip.BestSpeed)
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
// gzip'd tar of about 1 MiB holding sixteen 64 MiB attestations/*.dsse.json entries,
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
	at := bundleTargets(t, srv)
	outsider, engineer, importURL, pv, pinned := at.outsider, at.engineer, at.importURL, at.profileVersion, at.pinned

	var names []string
	for i := range 16 {
		names = append(names, fmt.Sprintf("attestations/a%02d.dsse.json", i))
	}
	bomb := zeroBomb(t, names, 64<<20)
	t.Logf("the bomb: %s compressed, 16 × 64 MiB expanded", mib(int64(len(bomb))))
	require.Less(t, len(bomb), 2<<20)
	ratioBomb := zeroBomb(t, []string{"artifacts/zeros.bin"}, 1<<30)

	post := func(c *http.Client, target string, fields map[string]string, bundle []byte) (int, string) {
		return postBundle(t, c, target, fields, bundle)
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
		{"import, sixteen 64 MiB attestations", engineer, importURL, map[string]string{"profile_version": strconv.FormatInt(pv, 10), "key": pinned}, bomb, "larger than 16 MiB (limit on the file size)"},
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

// bundleTarget is what the bundle attacks aim at: a program with a
// profile, an engineer of it, a signed-in user of no program, and a key to
// pin on the import.
type bundleTarget struct {
	programID      int64
	profileVersion int64
	outsider       *http.Client
	engineer       *http.Client
	importURL      string
	pinned         string
}

func bundleTargets(t *testing.T, srv *serverProcess) bundleTarget {
	t.Helper()
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
	return bundleTarget{
		programID: programID, profileVersion: pv.ID,
		outsider: srv.signIn(t, "outsider@attack.test", outsiderPassword), engineer: srv.signIn(t, "engineer@attack.test", engineerPassword),
		importURL: fmt.Sprintf("%s/programs/%d/runs/import/report", srv.base, programID), pinned: string(attest.MarshalAllowedSigners(pub)),
	}
}

// postBundle sends a bundle in a multipart form and returns the answer.
func postBundle(t *testing.T, c *http.Client, target string, fields map[string]string, bundle []byte) (int, string) {
	t.Helper()
	body, ctype := multipartBody(t, fields, "bundle", bundle)
	req, err := http.NewRequest(http.MethodPost, target, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", ctype)
	resp, err := c.Do(req)
	return answer(t, resp, err)
}

// spillBomb is a gzip'd tar of n attestations/*.dsse.json entries of size
// bytes each, under the per-file budget, that compress about 37 times (a
// kilobyte of one letter and 24 random ones, over and over): inside the
// compression ratio budget, so that they are read and held, in memory
// until 8 MiB and then in the spill file. It returns the bundle and its
// expanded size.
func spillBomb(t *testing.T, n int, size int64) ([]byte, int64) {
	t.Helper()
	var out bytes.Buffer
	gz, err := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	require.NoError(t, err)
	tw := tar.NewWriter(gz)
	rng := rand.New(rand.NewPCG(1, 2))
	block := bytes.Repeat([]byte{'x'}, 1024)
	var expanded int64
	for i := range n {
		require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("accord-run-1/attestations/a%02d.dsse.json", i), Size: size,
			Mode: 0o644, ModTime: time.Unix(0, 0)}))
		for left := size; left > 0; left -= int64(len(block)) {
			for j := 1000; j < len(block); j++ {
				block[j] = byte(33 + rng.IntN(94))
			}
			_, err := tw.Write(block[:min(left, int64(len(block)))])
			require.NoError(t, err)
		}
		expanded += size
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return out.Bytes(), expanded
}

// A variant of the bomb that passes the per-file check: seventeen
// attestations just under 16 MiB each, compressing about 37 times (inside
// the ratio budget), 272 MiB expanded from about 7 MiB. Each is read and
// held: 8 MiB in memory, the rest in the unlinked spill file, until the
// spill budget (256 MiB) is passed. Sent to /verify by a user of no
// program and to a program's report import: the server's peak RSS stays
// within 100 MiB of where it was, the answer (413) names the temporary
// space budget, and nothing stays in the server's temporary folder (the
// upload's own temporary file stayed after every upload past 1 MiB, the
// Verify page's and the imports', until the handlers removed it: net/http
// removes it only for the request it made, not the timeout's copy).
func TestAttackSpillBombThroughVerifyAndImport(t *testing.T) {
	t.Parallel()
	srv := startServerProcess(t)
	ctx := context.Background()
	at := bundleTargets(t, srv)
	const each = 16<<20 - 4<<10
	bomb, expanded := spillBomb(t, 17, each)
	ratio := float64(expanded) / float64(len(bomb))
	t.Logf("the spill bomb: %s compressed, 17 × %s = %s expanded (%.1f times)", mib(int64(len(bomb))), mib(each), mib(expanded), ratio)
	require.Less(t, ratio, float64(attest.DefaultLimits.Ratio), "inside the ratio budget")
	require.Less(t, int64(each), attest.DefaultLimits.File, "inside the per-file budget")
	require.Greater(t, expanded, attest.DefaultLimits.Spill, "past the spill budget")

	for range 3 {
		status, _ := postBundle(t, at.outsider, srv.base+"/verify", nil, []byte("not a bundle"))
		require.Equal(t, http.StatusUnprocessableEntity, status)
	}
	time.Sleep(500 * time.Millisecond)
	for _, attack := range []struct {
		name   string
		client *http.Client
		target string
		fields map[string]string
	}{
		{"verify", at.outsider, srv.base + "/verify", nil},
		{"import", at.engineer, at.importURL, map[string]string{"profile_version": strconv.FormatInt(at.profileVersion, 10), "key": at.pinned}},
	} {
		before, _ := srv.memory(t)
		srv.resetPeak(t)
		status, page := postBundle(t, attack.client, attack.target, attack.fields, bomb)
		after, peak := srv.memory(t)
		t.Logf("%s: RSS before %s, peak during %s (growth %s), after %s; answer %d", attack.name, mib(before), mib(peak), mib(peak-before), mib(after), status)
		require.Equal(t, http.StatusRequestEntityTooLarge, status, attack.name)
		require.Contains(t, page, "its metadata files need more than 256 MiB of temporary space (limit on the temporary space)", attack.name)
		require.Less(t, peak-before, int64(100<<20), "%s: the server's peak RSS grew by %s", attack.name, mib(peak-before))
		// net/http removes the upload once the answer is sent.
		require.Eventually(t, func() bool { left, err := os.ReadDir(srv.tmp); return err == nil && len(left) == 0 }, 10*time.Second, 50*time.Millisecond,
			"%s: the upload and the spill file are gone", attack.name)
	}
	var runs int
	require.NoError(t, srv.pool.QueryRow(ctx, `SELECT count(*) FROM runs`).Scan(&runs))
	require.Zero(t, runs)
}

// stalledUpload starts a bundle upload as the client's session and stops
// sending halfway through, holding the connection; close ends it.
func stalledUpload(t *testing.T, base, path string, c *http.Client) net.Conn {
	t.Helper()
	u, err := url.Parse(base + path)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	var cookies []string
	for _, ck := range c.Jar.Cookies(u) {
		cookies = append(cookies, ck.Name+"="+ck.Value)
	}
	head := "--stall\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"b.tar.gz\"\r\n\r\n"
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\nContent-Type: multipart/form-data; boundary=stall\r\nContent-Length: %d\r\n\r\n%s",
		u.Path, u.Host, strings.Join(cookies, "; "), 10<<20, head)
	require.NoError(t, err)
	_, err = conn.Write(bytes.Repeat([]byte{0x1f}, 1<<10))
	require.NoError(t, err)
	return conn
}

// waitBundleReads waits until the server at base is reading n bundles, by
// its /metrics.
func waitBundleReads(t *testing.T, base string, n int) {
	t.Helper()
	want := fmt.Sprintf("\naccord_bundle_reads_in_progress %d\n", n)
	require.Eventually(t, func() bool {
		res, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return strings.Contains(string(body), want)
	}, 30*time.Second, 50*time.Millisecond, "the server reads %d bundles", n)
}

// Every bundle read costs the server its upload on disk, memory and
// temporary space while it lasts; they were not bounded in number. Now a
// user has one read at a time (a second one is 429 with Retry-After), the
// installation four (a fifth is 503 with Retry-After), refused before the
// body is read; an upload that stalls gives its slot back at the request's
// time limit. Against the real server, with uploads that stop halfway.
func TestAttackBundleReadsFloodTheServer(t *testing.T) {
	t.Parallel()
	srv := startServerProcess(t, "ACCORD_REQUEST_TIMEOUT=15s")
	at := bundleTargets(t, srv)
	ctx := context.Background()
	org, err := srv.store.CreateOrganization(ctx, "Elsewhere", "customer")
	require.NoError(t, err)
	var users []*http.Client
	for i := range 4 {
		email := fmt.Sprintf("flood%d@attack.test", i)
		_, password := srv.user(t, email, &org, false)
		users = append(users, srv.signIn(t, email, password))
	}
	verify := func(c *http.Client) (int, string, string) {
		body, ctype := multipartBody(t, nil, "bundle", []byte("not a bundle"))
		req, err := http.NewRequest(http.MethodPost, srv.base+"/verify", body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", ctype)
		resp, err := c.Do(req)
		require.NoError(t, err)
		retry := resp.Header.Get("Retry-After")
		status, page := answer(t, resp, err)
		return status, page, retry
	}

	// One stalled upload of the engineer's: their second read, verify or
	// import, is 429; others still read. Each stall is waited for until
	// the server holds it (its gauge of reads in progress): a read sent
	// meanwhile could otherwise take the slot first and leave the stall
	// refused (seen on a loaded machine).
	first := stalledUpload(t, srv.base, "/verify", at.engineer)
	waitBundleReads(t, srv.base, 1)
	status, page, retry := verify(at.engineer)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "10", retry)
	require.Contains(t, page, "You are having a bundle checked already")
	status, page = postBundle(t, at.engineer, at.importURL, map[string]string{"profile_version": strconv.FormatInt(at.profileVersion, 10), "key": at.pinned}, []byte("x"))
	require.Equal(t, http.StatusTooManyRequests, status, page)
	status, _, _ = verify(at.outsider)
	require.Equal(t, http.StatusUnprocessableEntity, status, "another user's read goes through")

	// Three more users stall theirs: the installation is at four, and a
	// fifth user's read is 503.
	for i, c := range users[:3] {
		stalledUpload(t, srv.base, "/verify", c)
		waitBundleReads(t, srv.base, 2+i)
	}
	status, _, _ = verify(at.outsider)
	require.Equal(t, http.StatusServiceUnavailable, status)
	status, page, retry = verify(users[3])
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "10", retry)
	require.Contains(t, page, "Accord is checking as many bundles as it does at once (4)")

	// A client that gives up frees its slot at once.
	require.NoError(t, first.Close())
	require.Eventually(t, func() bool { s, _, _ := verify(users[3]); return s == http.StatusUnprocessableEntity }, 30*time.Second, 50*time.Millisecond)
	// The three left stalling are cut off at the request's time limit
	// (15 s here): every user reads again.
	require.Eventually(t, func() bool {
		for _, c := range users[:3] {
			if s, _, _ := verify(c); s != http.StatusUnprocessableEntity {
				return false
			}
		}
		return true
	}, 90*time.Second, 500*time.Millisecond, "stalled uploads give their slots back")
}
