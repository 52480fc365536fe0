package handlers

import (
	"context"
	"net/http"
	"os"
	"strconv"
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
	var runID int64
	require.NoError(t, pb.pool.QueryRow(context.Background(), `SELECT id FROM runs WHERE kind = 'imported'`).Scan(&runID))
	ms, err := pb.store.MeasurementSummaries(context.Background(), runID)
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
	var runID int64
	require.NoError(t, pb.pool.QueryRow(context.Background(), `SELECT id FROM runs WHERE kind = 'imported'`).Scan(&runID))
	arts, err := pb.store.RunArtifacts(context.Background(), runID)
	require.NoError(t, err)
	require.NotEmpty(t, arts, "the verified raw outputs are kept")
}
