package handlers

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/attesttest"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
	"github.com/accordlab/accord/web/htmltest"
)

// signedRun makes a finished run with two artifacts and signs it.
func (pb *programBundle) signedRun(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	pid := pb.programID
	tmpl := kvTemplate(t)
	_, nv, errs, err := prepareSpec(profileOps, tmpl)
	require.NoError(t, err)
	require.Empty(t, errs)
	_, pv, err := pb.store.CreateSpec(ctx, store.KindProfile, pid, nv)
	require.NoError(t, err)
	host, err := pb.store.CreateHost(ctx, pid, store.NewHost{Name: "lab", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	gt, _ := acceptance.LookupGateSetTemplate("mlperf-llama2-70b-server")
	_, gnv, errs, err := prepareSpec(gateSetOps, gt.Spec)
	require.NoError(t, err)
	require.Empty(t, errs)
	_, gv, err := pb.store.CreateSpec(ctx, store.KindGateSet, pid, gnv)
	require.NoError(t, err)
	requester, err := pb.store.UserByEmail(ctx, "eng@vendor.example")
	require.NoError(t, err)
	run, err := pb.store.CreateRun(ctx, store.NewRun{ProgramID: pid, ProfileVersionID: pv.ID, HostID: host, GateSetVersionID: &gv.ID, CreatedBy: requester.ID})
	require.NoError(t, err)
	for path, body := range map[string]string{"events.jsonl": `{"seq":1}` + "\n", "facts.json": `{"schema_version":1}`} {
		addRunFile(t, pb.store, run, path, body)
	}
	require.NoError(t, pb.store.SetRunState(ctx, run, store.RunDone, "fixture"))
	require.NoError(t, pb.store.SetRunVerdict(ctx, run, "PASS"))
	_, err = report.Signer{Store: pb.store, Keyring: pb.keyring, Render: web.RenderReport}.Sign(ctx, run)
	require.NoError(t, err)
	return run
}

func (pb *programBundle) download(t *testing.T, c *http.Client, path string) []byte {
	t.Helper()
	res, err := c.Get(pb.ts.URL + path)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, path)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return b
}

// fileOf reads one file out of a bundle.
func fileOf(t *testing.T, bundle []byte, suffix string) []byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(bundle))
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		require.NoError(t, err, "no %s in the bundle", suffix)
		if strings.HasSuffix(h.Name, suffix) {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			return b
		}
	}
}

func (pb *programBundle) postMultipart(t *testing.T, c *http.Client, path string, fields map[string]string, files map[string][]byte) (*http.Response, string) {
	t.Helper()
	return pb.postMultipartFiles(t, c, path, fields, files, func(field string) string { return field + ".bin" })
}

// postMultipartNamed posts one file under the file name given.
func (pb *programBundle) postMultipartNamed(t *testing.T, c *http.Client, path string, fields map[string]string, field, filename string, data []byte) (*http.Response, string) {
	t.Helper()
	return pb.postMultipartFiles(t, c, path, fields, map[string][]byte{field: data}, func(string) string { return filename })
}

func (pb *programBundle) postMultipartFiles(t *testing.T, c *http.Client, path string, fields map[string]string, files map[string][]byte, filename func(field string) string) (*http.Response, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		require.NoError(t, mw.WriteField(k, v))
	}
	for k, v := range files {
		fw, err := mw.CreateFormFile(k, filename(k))
		require.NoError(t, err)
		_, _ = fw.Write(v)
	}
	require.NoError(t, mw.Close())
	req, _ := http.NewRequest(http.MethodPost, pb.ts.URL+path, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := c.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b)
}

// The report downloads as the same signed bytes, and the verify page
// checks bundles (co-signing: TestCoSignaturesClaimNobodyElse).
func TestReportDownloadAndVerify(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	run := pb.signedRun(t)
	base := pb.url("/runs/") + itoa64(run)

	// The API says the run's report can be downloaded (and not before).
	status, apiRun := pb.api(t, http.MethodGet, "/api/v1"+base, "", nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, true, apiRun["has_report"])
	unsigned, err := pb.store.CreateRun(context.Background(), store.NewRun{ProgramID: pb.programID, ProfileVersionID: pb.profileVersionID(t)})
	require.NoError(t, err)
	_, apiRun = pb.api(t, http.MethodGet, "/api/v1"+pb.url("/runs/")+itoa64(unsigned), "", nil)
	require.Equal(t, false, apiRun["has_report"])

	first := pb.download(t, pb.viewer, base+"/report.tar.gz")
	second := pb.download(t, pb.viewer, base+"/report.tar.gz")
	require.Equal(t, first, second, "every download is the same signed bytes")
	keys, err := pb.keyring.KeySet()
	require.NoError(t, err)
	_, err = attest.VerifyBundle(context.Background(), bytes.NewReader(first), keys)
	require.NoError(t, err)

	// The verify page.
	res, page := pb.postMultipart(t, pb.viewer, "/verify", nil, map[string][]byte{"bundle": first})
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "VERIFIED")
	tampered := append([]byte(nil), first...)
	tampered[len(tampered)/2] ^= 0xff
	res, page = pb.postMultipart(t, pb.viewer, "/verify", nil, map[string][]byte{"bundle": tampered})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "NOT VERIFIED")

	// The published keys verify it with ssh-keygen's allowed_signers.
	allowedSigners := pb.download(t, pb.client(t), "/.well-known/accord/allowed_signers")
	require.Contains(t, string(allowedSigners), "accord-signer")
	keysJSON := pb.download(t, pb.client(t), "/.well-known/accord/keys.json")
	require.Contains(t, string(keysJSON), pb.keyringActiveID(t))
}

func (pb *programBundle) keyringActiveID(t *testing.T) string {
	s, err := pb.keyring.Active()
	require.NoError(t, err)
	return s.KeyID()
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// elementText is the raw text (line breaks kept) of the element with the
// id in an HTML page, as a browser has it in its DOM.
func elementText(t *testing.T, page, id string) string {
	t.Helper()
	n := htmltest.ByID(htmltest.Parse(t, page), id)
	require.NotNil(t, n, "the page has no #%s", id)
	return htmltest.RawText(n)
}

// The report page's "Check it without Accord" box gives one command a line
// (unpack, cd into the folder, check the manifest is the one this
// installation signed and VERIFY.md the one it lists, every check of
// VERIFY.md), and those lines, typed into bash where the bundle was saved,
// verify it. A bundle whose VERIFY.md was removed, or rewritten to check
// nothing, fails them: the checks run are the ones that were signed.
func TestReportPageCheckCommandsRunAsShown(t *testing.T) {
	t.Parallel()
	attesttest.RequireTools(t, "bash", "tar", "sha256sum", "ssh-keygen", "openssl")
	pb := setupProgram(t)
	run := pb.signedRun(t)
	base := pb.url("/runs/") + itoa64(run)
	_, page := pb.get(t, pb.viewer, base+"/report")
	lines := strings.Split(elementText(t, page, "verify-commands"), "\n")
	file := "accord-run-" + itoa64(run) + "-report-v1.tar.gz"
	rep, err := pb.store.RunLatestReport(context.Background(), run)
	require.NoError(t, err)
	require.Equal(t, attest.CheckCommands(file, itoa64(run), rep.ManifestSHA256), lines)
	require.Equal(t, []string{"tar xzf " + file, "cd accord-run-" + itoa64(run)}, lines[:2])
	require.Contains(t, lines[2], rep.ManifestSHA256+"  MANIFEST.sha256", "the manifest is pinned to the one signed here")
	require.Equal(t, attest.RunAllCommand, lines[len(lines)-1])

	bundle := pb.download(t, pb.viewer, base+"/report.tar.gz")
	runShown := func(t *testing.T, tarball []byte) (string, error) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), tarball, 0o644))
		cmd := exec.Command("bash", "-e", "-c", strings.Join(lines, "\n"))
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := runShown(t, bundle)
	require.NoError(t, err, out)
	require.True(t, strings.HasSuffix(out, "All checks passed.\n"), out)

	for name, tamper := range map[string]func(dir string) error{
		"VERIFY.md removed": func(dir string) error { return os.Remove(filepath.Join(dir, attest.FileVerifyMD)) },
		"VERIFY.md checks nothing": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, attest.FileVerifyMD), []byte("# Verifying\n\n```sh\ntrue\n```\n"), 0o644)
		},
	} {
		dir := attesttest.Extract(t, bundle)
		require.NoError(t, tamper(dir))
		out, err := runShown(t, attesttest.Pack(t, dir))
		require.Error(t, err, "%s: the page's commands passed: %s", name, out)
		require.NotContains(t, out, "All checks passed.", name)
	}
}

// The verify result names the run once: "Run 7: <profile> v1 on lab",
// not "Run 7: Run #7: …" (the bundle's title does not repeat the run).
func TestVerifyResultNamesTheRunOnce(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	run := pb.signedRun(t)
	r, err := pb.store.GetRun(context.Background(), pb.programID, run)
	require.NoError(t, err)
	bundle := pb.download(t, pb.viewer, pb.url("/runs/")+itoa64(run)+"/report.tar.gz")

	res, page := pb.postMultipart(t, pb.viewer, "/verify", nil, map[string][]byte{"bundle": bundle})
	require.Equal(t, http.StatusOK, res.StatusCode)
	text := htmltest.RawText(htmltest.ByID(htmltest.Parse(t, page), "verify-text"))
	first, _, _ := strings.Cut(text, "\n")
	want := "Run " + itoa64(run) + ": " + r.ProfileName + " v1 on lab (bundle created "
	require.True(t, strings.HasPrefix(first, want), "%q begins %q", first, want)
	require.NotContains(t, text, "Run #")
	require.Equal(t, 1, strings.Count(text, "Run "+itoa64(run)), "the run is named once")

	// The bundle's own title, as accord verify reads it.
	keys, err := pb.keyring.KeySet()
	require.NoError(t, err)
	checked, err := attest.VerifyBundle(context.Background(), bytes.NewReader(bundle), keys)
	require.NoError(t, err)
	require.Equal(t, r.ProfileName+" v1 on lab", checked.Title)
}

// A run without a gate set is signed as it is, with web's report: the
// report says nothing judged it, the bundle downloads from the report
// page's link and verifies, with the profile and without a gate set.
func TestUngatedRunReportDownloadsAndVerifies(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	pv := pb.profileVersionID(t)
	host, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	requester, err := pb.store.UserByEmail(ctx, "eng@vendor.example")
	require.NoError(t, err)
	run, err := pb.store.CreateRun(ctx, store.NewRun{ProgramID: pb.programID, ProfileVersionID: pv, HostID: host, CreatedBy: requester.ID})
	require.NoError(t, err)
	for path, body := range map[string]string{"events.jsonl": `{"seq":1}` + "\n", "facts.json": `{"schema_version":1}`} {
		addRunFile(t, pb.store, run, path, body)
	}
	require.NoError(t, pb.store.SetRunState(ctx, run, store.RunDone, "no gate set: results stored without a verdict"))
	_, err = report.Signer{Store: pb.store, Keyring: pb.keyring, Render: web.RenderReport}.Sign(ctx, run)
	require.NoError(t, err)

	bundle := pb.download(t, pb.viewer, pb.url("/runs/")+itoa64(run)+"/report.tar.gz")
	keys, err := pb.keyring.KeySet()
	require.NoError(t, err)
	checked, err := attest.VerifyBundle(ctx, bytes.NewReader(bundle), keys)
	require.NoError(t, err)
	require.Equal(t, []string{attest.FileProfile}, checked.Documents)
	html := string(fileOf(t, bundle, "/report.html"))
	require.Contains(t, html, `id="report-no-gate-set">None: the run had no gate set, so nothing judged it.`)
	_, page := pb.get(t, pb.viewer, pb.url("/runs/")+itoa64(run)+"/report")
	require.Contains(t, page, "report.tar.gz")
}
