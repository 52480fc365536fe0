package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/store"
)

// importBundle waits for run's verdict and signed report, downloads the
// bundle and imports it through the import page against this
// installation's keys, as profile version pv, judged by the gate set; it
// returns the imported run.
func (cb *chartsBundle) importBundle(t *testing.T, run, pv int64) int64 {
	t.Helper()
	ctx := context.Background()
	cb.evaluate(t, run)
	require.Eventually(t, func() bool {
		_, err := cb.store.RunLatestReport(ctx, run)
		return err == nil
	}, time.Minute, 50*time.Millisecond, "run %d is signed", run)
	bundle := cb.download(t, cb.viewer, cb.url("/runs/")+itoa64(run)+"/report.tar.gz")
	keys, err := cb.keyring.PublicKeys()
	require.NoError(t, err)
	res, page := cb.postMultipart(t, cb.engineer, cb.url("/runs/import/report"),
		map[string]string{"profile_version": itoa64(pv), "gate_set_version": itoa64(cb.gateVersion), "key": string(attest.MarshalAllowedSigners(keys))},
		map[string][]byte{"bundle": bundle})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, page)
	var imported int64
	require.NoError(t, cb.pool.QueryRow(ctx, `SELECT max(id) FROM runs WHERE kind = 'imported'`).Scan(&imported))
	return imported
}

// importReportsOf reads the reports a bundle import keeps with the run.
func (pb *programBundle) importReportsOf(t *testing.T, run int64) []parse.Report {
	t.Helper()
	ctx := context.Background()
	arts, err := pb.store.RunArtifacts(ctx, run)
	require.NoError(t, err)
	for _, a := range arts {
		if a.Path != bundleImportReportArtifact(itoa64(run)) {
			continue
		}
		f, err := pb.store.Artifacts().Open(ctx, a.SHA256)
		require.NoError(t, err)
		defer f.Close()
		var reps []parse.Report
		require.NoError(t, json.NewDecoder(f).Decode(&reps))
		return reps
	}
	require.Fail(t, "no import reports", "run %d keeps no %s", run, bundleImportReportArtifact(itoa64(run)))
	return nil
}

func metricSet(t *testing.T, s *store.Store, run int64) map[string]int {
	t.Helper()
	rows, err := s.RunMeasurementSummaries(context.Background(), run)
	require.NoError(t, err)
	out := map[string]int{}
	for _, r := range rows {
		out[r.Step+" "+r.Level+" "+r.Metric]++
	}
	return out
}

// A signed bundle imported from another installation says what its
// reading read and ignored, file by file, as a result file's import does:
// kept with the run's files, on the run page, in a note. A bundle of a run
// that was itself imported from a bundle carries that run's reports, and
// the new import keeps its own beside them.
func TestBundleImportReportsWhatItRead(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	ctx := context.Background()
	lab := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, recorded: "local-1", gates: true})

	first := cb.importBundle(t, lab, cb.fastVersion)
	reps := cb.importReportsOf(t, first)
	inputs := map[string]parse.Report{}
	for _, r := range reps {
		inputs[r.Input] = r
		require.NotEmpty(t, r.Read, "%s: nothing read", r.Input)
		require.NotNil(t, r.Ignored)
	}
	for _, want := range []string{"out/01-chat/rep-1/c=1/requests.jsonl", "out/01-chat/rep-1/c=4/requests.jsonl",
		"out/02-kv-read/rep-1/fio.json", "out/01-chat/rep-1/c=1/telemetry.jsonl", "out/02-kv-read/rep-1/telemetry.jsonl"} {
		require.Contains(t, inputs, want, "every tool output of the bundle has its report")
	}
	fio := inputs["out/02-kv-read/rep-1/fio.json"]
	require.Equal(t, parse.FormatFio, fio.Format)
	require.Equal(t, "kv-read", fio.Step)
	require.NotEmpty(t, fio.Ignored, "fio's fields Accord does not import are listed with their reasons")
	for _, ig := range fio.Ignored {
		require.NotEmpty(t, ig.Reason, ig.Field)
	}
	require.Equal(t, metricSet(t, cb.store, lab), metricSet(t, cb.store, first), "the bundle's outputs read again give the lab run's measurements")

	_, page := cb.get(t, cb.viewer, cb.url("/runs/")+itoa64(first))
	require.Contains(t, page, `id="import-reports"`)
	require.Contains(t, page, "What the import read from out/02-kv-read/rep-1/fio.json (fio fio-")
	require.Contains(t, page, "the import read "+strconv.Itoa(len(reps))+" files of the bundle")
	require.Contains(t, page, bundleImportReportArtifact(itoa64(first)))

	// The imported run signed and imported again: its bundle carries the
	// first import's reports, the second keeps its own.
	second := cb.importBundle(t, first, cb.fastVersion)
	require.Len(t, cb.importReportsOf(t, second), len(reps))
	arts, err := cb.store.RunArtifacts(ctx, second)
	require.NoError(t, err)
	paths := map[string]bool{}
	for _, a := range arts {
		paths[a.Path] = true
	}
	require.True(t, paths[bundleImportReportArtifact(itoa64(first))], "the first import's reports came with the bundle")
	require.Equal(t, metricSet(t, cb.store, lab), metricSet(t, cb.store, second))
}

// A bundle of a run imported from a result file has no step results: its
// imported tool output is read again, as the step it was imported as, and
// the run page shows this import's reading, not the other installation's.
func TestBundleOfAnImportedResultIsReadAgain(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	pv := cb.fastVersion
	data, err := os.ReadFile("../runners/parse/testdata/vllm-bench-serve-detailed.json")
	require.NoError(t, err)
	res, _ := cb.postMultipart(t, cb.engineer, cb.url("/runs/import/result"),
		map[string]string{"profile_version": itoa64(pv), "gate_set_version": itoa64(cb.gateVersion), "step": "serve"},
		map[string][]byte{"file": data})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	var imported int64
	require.NoError(t, cb.pool.QueryRow(context.Background(), `SELECT id FROM runs WHERE kind = 'imported'`).Scan(&imported))

	again := cb.importBundle(t, imported, pv)
	want := metricSet(t, cb.store, imported)
	require.Contains(t, want, "serve  "+acceptance.MetricTTFT)
	require.Equal(t, want, metricSet(t, cb.store, again), "the imported file read again, as step serve")
	reps := cb.importReportsOf(t, again)
	require.Len(t, reps, 1)
	require.Equal(t, "imported/file.bin", reps[0].Input, "postMultipart names its files file.bin")
	require.Equal(t, parse.FormatVLLMBench, reps[0].Format)
	_, page := cb.get(t, cb.viewer, cb.url("/runs/")+itoa64(again))
	require.Contains(t, page, "What the import read from imported/file.bin", "this import's reading, by the path it read")
	require.NotContains(t, page, "What the import read from file.bin", "not the other installation's")
}
