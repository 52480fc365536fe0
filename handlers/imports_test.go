package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/store"
)

func (pb *programBundle) profileVersionID(t *testing.T) int64 {
	t.Helper()
	tmpl := kvTemplate(t)
	_, nv, _, err := prepareSpec(profileOps, tmpl)
	require.NoError(t, err)
	_, pv, err := pb.store.CreateSpec(context.Background(), store.KindProfile, pb.programID, nv)
	require.NoError(t, err)
	return pv.ID
}

// importedRunID is the id of the program's one imported run.
func (pb *programBundle) importedRunID(t *testing.T) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pb.pool.QueryRow(context.Background(), `SELECT id FROM runs WHERE kind = 'imported'`).Scan(&id))
	return id
}

func (pb *programBundle) countRuns(t *testing.T) int {
	var n int
	require.NoError(t, pb.pool.QueryRow(context.Background(), `SELECT count(*) FROM runs WHERE kind = 'imported'`).Scan(&n))
	return n
}

// A tool's result file becomes an imported run with its measurements; a
// file that cannot be read stores nothing.
func TestImportResultFile(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	pv := strconv.FormatInt(pb.profileVersionID(t), 10)
	good, err := os.ReadFile("../runners/parse/testdata/vllm-bench-serve-detailed.json")
	require.NoError(t, err)

	res, page := pb.postMultipart(t, pb.engineer, pb.url("/runs/import/result"), map[string]string{"profile_version": pv, "step": "serve"},
		map[string][]byte{"file": []byte(`{"truncated": `)})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "not recognised")
	require.Zero(t, pb.countRuns(t))

	res, _ = pb.postMultipart(t, pb.engineer, pb.url("/runs/import/result"), map[string]string{"profile_version": pv, "step": "serve", "label": "vendor lab"},
		map[string][]byte{"file": good})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, 1, pb.countRuns(t))
	runID := pb.importedRunID(t)
	ms, err := pb.store.RunMeasurementSummaries(context.Background(), runID)
	require.NoError(t, err)
	metrics := map[string]bool{}
	for _, m := range ms {
		metrics[m.Metric] = true
		require.Equal(t, "serve", m.Step)
	}
	require.True(t, metrics["ttft"], "per-request TTFTs imported")
	arts, err := pb.store.RunArtifacts(context.Background(), runID)
	require.NoError(t, err)
	require.Len(t, arts, 2, "the file and the import's report")
	_, page = pb.get(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(runID, 10))
	require.Contains(t, page, "imported from")
	require.Contains(t, page, "from vllm-bench", "the tool the values came from is named")
	require.Contains(t, page, "Accord&#39;s probe measures to the first content token", "and how its TTFT differs from the probe's")
	// The one ingest: an imported run has its chart aggregates, as a lab
	// run has, and its page draws them.
	docs, err := pb.store.RunCharts(context.Background(), runID)
	require.NoError(t, err)
	agg, ok, err := chartdata.Decode(docs)
	require.NoError(t, err)
	require.True(t, ok, "the imported run has chart aggregates")
	require.Equal(t, "serve", agg.Meta.Steps[0].Name)
	require.Contains(t, agg.CDF[chartdata.KeyCDF("serve", "")], acceptance.MetricTTFT)
	require.Contains(t, page, `<script id="chart-cdf-0" type="application/json">`)

	// vLLM's summary alone (no per-request arrays): no percentile of
	// Accord's is shown as 0; the tool's own figures are.
	summary, err := os.ReadFile("../runners/parse/testdata/vllm-bench-serve-summary.json")
	require.NoError(t, err)
	res, _ = pb.postMultipart(t, pb.engineer, pb.url("/runs/import/result"), map[string]string{"profile_version": pv, "step": "serve"},
		map[string][]byte{"file": summary})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	var summaryRun int64
	require.NoError(t, pb.pool.QueryRow(context.Background(), `SELECT max(id) FROM runs WHERE kind = 'imported'`).Scan(&summaryRun))
	_, page = pb.get(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(summaryRun, 10))
	require.Contains(t, page, "no samples were imported: only the tool's own figures")
}

// Another installation's signed report imports only against the key the
// user pins.
func TestImportSignedReport(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	run := pb.signedRun(t)
	bundle := pb.download(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(run, 10)+"/report.tar.gz")
	pv := strconv.FormatInt(pb.profileVersionID(t), 10)

	other, err := attest.OpenKeyring(t.TempDir(), attest.KeyringOptions{})
	require.NoError(t, err)
	otherKeys, err := other.PublicKeys()
	require.NoError(t, err)
	res, page := pb.postMultipart(t, pb.engineer, pb.url("/runs/import/report"),
		map[string]string{"profile_version": pv, "key": string(attest.MarshalAllowedSigners(otherKeys))}, map[string][]byte{"bundle": bundle})
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "did not verify against the key you pinned")
	require.Zero(t, pb.countRuns(t))

	keys, err := pb.keyring.PublicKeys()
	require.NoError(t, err)
	res, _ = pb.postMultipart(t, pb.engineer, pb.url("/runs/import/report"),
		map[string]string{"profile_version": pv, "key": string(attest.MarshalAllowedSigners(keys))}, map[string][]byte{"bundle": bundle})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, 1, pb.countRuns(t))
	runID := pb.importedRunID(t)
	arts, err := pb.store.RunArtifacts(context.Background(), runID)
	require.NoError(t, err)
	require.NotEmpty(t, arts, "the verified raw outputs are kept")
}

// import/report answered every multipart error with 413 ("too large"):
// a malformed upload is a 400 that says what was expected, and only a
// body past the route's limit, or form fields past what multipart keeps
// in memory, is a 413. The same for the result import (page and API) and
// the Verify page. Nothing is kept.
func TestUploadsAre400WhenMalformedAnd413OnlyWhenTooLarge(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	send := func(path, contentType string, body io.Reader, api bool) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, pb.ts.URL+path, body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		c := pb.engineer
		if api {
			req.Header.Set("Authorization", "Bearer "+pb.engToken)
			c = http.DefaultClient
		}
		res, err := c.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	const boundary = "accord-test-boundary"
	truncated := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"b.tar.gz\"\r\n\r\nhalf a bundle, and no closing boundary"
	// A field other than a file is kept in memory: past 1 MiB + 10 MiB,
	// multipart refuses the message as too large.
	var big bytes.Buffer
	mw := multipart.NewWriter(&big)
	require.NoError(t, mw.WriteField("key", strings.Repeat("k", 12<<20)))
	require.NoError(t, mw.Close())

	routes := []struct {
		path string
		api  bool
		// malformed and tooLarge are what each answer says.
		malformed, tooLarge string
	}{
		{pb.url("/runs/import/report"), false, "The upload is not a well-formed multipart form", "The upload is too large: at most 1024 MiB"},
		{pb.url("/runs/import/result"), false, "The upload is not a well-formed multipart form", "The file is too large (at most 64 MiB)."},
		{"/api/v1" + pb.url("/runs/import"), true, "the body must be a well-formed multipart form", "the body is larger than 64 MiB"},
		{"/verify", false, "The upload is not a well-formed multipart form", "The bundle is larger than 1024 MiB"},
	}
	for _, r := range routes {
		for _, c := range []struct {
			what, contentType string
			body              io.Reader
		}{
			{"not multipart", "application/x-www-form-urlencoded", strings.NewReader("bundle=x")},
			{"no boundary", "multipart/form-data", strings.NewReader(truncated)},
			{"truncated", "multipart/form-data; boundary=" + boundary, strings.NewReader(truncated)},
		} {
			status, page := send(r.path, c.contentType, c.body, r.api)
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", r.path, c.what)
			require.Contains(t, html.UnescapeString(page), r.malformed, "%s: %s", r.path, c.what)
		}
		status, page := send(r.path, mw.FormDataContentType(), bytes.NewReader(big.Bytes()), r.api)
		require.Equal(t, http.StatusRequestEntityTooLarge, status, "%s: a 12 MiB field", r.path)
		require.Contains(t, html.UnescapeString(page), r.tooLarge, r.path)
	}

	// Past the body's limit (the result import's 64 MiB and 1 MiB of form),
	// streamed: a 66 MiB file.
	head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"huge.json\"\r\nContent-Type: application/json\r\n\r\n"
	body := io.MultiReader(strings.NewReader(head), io.LimitReader(zeros{}, 66<<20), strings.NewReader("\r\n--"+boundary+"--\r\n"))
	status, page := send(pb.url("/runs/import/result"), "multipart/form-data; boundary="+boundary, body, false)
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Contains(t, page, "The file is too large (at most 64 MiB).")
	require.Zero(t, pb.countRuns(t))
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A result file bigger than what the spool keeps in memory (AIPerf's
// per-request records, streamed by their importer) is imported whole from
// its temporary file: every record is read, and the artifact kept is the
// file uploaded, byte for byte. Its format is detected from its first
// line, as a run's outputs are read.
func TestImportOfABigRecordsFileIsStreamedFromItsSpool(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	pv := strconv.FormatInt(pb.profileVersionID(t), 10)
	records, err := os.ReadFile("../runners/parse/testdata/aiperf-0.8-profile_export.jsonl")
	require.NoError(t, err)
	records = append(bytes.TrimRight(records, "\n"), '\n')
	// Half of the recording's requests timed out: only the others have a
	// time to first token.
	perCopy := bytes.Count(records, []byte(`"time_to_first_token"`))
	copies := importSpoolMemory/len(records) + 2
	big := bytes.Repeat(records, copies)
	require.Greater(t, len(big), importSpoolMemory)

	res, page := pb.postMultipart(t, pb.engineer, pb.url("/runs/import/result"), map[string]string{"profile_version": pv, "step": "chat"},
		map[string][]byte{"file": big})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	runID := pb.importedRunID(t)
	arts, err := pb.store.RunArtifacts(context.Background(), runID)
	require.NoError(t, err)
	sum := sha256.Sum256(big)
	var kept bool
	for _, a := range arts {
		if strings.HasPrefix(a.Path, "imported/") && a.Path != ImportReportArtifact {
			kept = true
			require.Equal(t, hex.EncodeToString(sum[:]), a.SHA256)
			require.EqualValues(t, len(big), a.Size)
		}
	}
	require.True(t, kept, "the uploaded file is an artifact: %+v", arts)
	ms, err := pb.store.RunMeasurementSummaries(context.Background(), runID)
	require.NoError(t, err)
	var ttft *store.MeasurementRow
	for i := range ms {
		if ms[i].Metric == acceptance.MetricTTFT {
			ttft = &ms[i]
		}
	}
	require.NotNil(t, ttft, "TTFT imported")
	require.EqualValues(t, perCopy*copies, ttft.Summary.N, "every answered request of every copy read")
}

// An upload named like the import's own report is kept beside it, under
// another name, byte for byte; a format that is not one Accord reads is
// refused by name, and nothing is kept.
func TestImportKeepsAnUploadNamedLikeItsReport(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	pv := strconv.FormatInt(pb.profileVersionID(t), 10)
	good, err := os.ReadFile("../runners/parse/testdata/vllm-bench-serve-detailed.json")
	require.NoError(t, err)

	res, page := pb.postMultipartNamed(t, pb.engineer, pb.url("/runs/import/result"), map[string]string{"profile_version": pv, "format": "spreadsheet"},
		"file", "result.json", good)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, html.UnescapeString(page), `Unknown format "spreadsheet"`)
	require.Zero(t, pb.countRuns(t))

	res, page = pb.postMultipartNamed(t, pb.engineer, pb.url("/runs/import/result"), map[string]string{"profile_version": pv, "step": "serve"},
		"file", "import-report.json", good)
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	runID := pb.importedRunID(t)
	arts, err := pb.store.RunArtifacts(context.Background(), runID)
	require.NoError(t, err)
	sum := sha256.Sum256(good)
	paths := map[string]string{}
	for _, a := range arts {
		paths[a.Path] = a.SHA256
	}
	require.Equal(t, hex.EncodeToString(sum[:]), paths["imported/uploaded-import-report.json"], "the upload, under its own name: %v", paths)
	require.Contains(t, paths, ImportReportArtifact, "and the import's report")
	require.NotEqual(t, paths[ImportReportArtifact], paths["imported/uploaded-import-report.json"])
}
