package handlers

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// A level where the load generator was late is flagged on the run page and
// in the signed report, from the run's stored self-check measurements.
func TestClientFlagOnRunPageAndReport(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	run := pb.signedRun(t)
	src := acceptance.Source{Tool: "accord-probe"}
	require.NoError(t, pb.store.SaveMeasurements(ctx, run, []acceptance.Measurement{
		{Metric: acceptance.MetricTTFT, Step: "decode", Level: "r=8", Repetition: 1, Values: []float64{120, 130, 140}, Source: src},
		{Metric: acceptance.MetricClientLateness, Step: "decode", Level: "r=8", Repetition: 1, Values: []float64{3, 1736}, Counts: []int64{90, 10}, Source: src},
		{Metric: acceptance.MetricClientTickDelay, Step: "decode", Level: "r=8", Repetition: 1, Values: []float64{1, 1758}, Counts: []int64{90, 10}, Source: src},
		{Metric: acceptance.MetricClientCPU, Step: "decode", Level: "r=8", Repetition: 1, Values: []float64{2}, Source: src},
		{Metric: acceptance.MetricClientLateness, Step: "decode", Level: "r=2", Repetition: 1, Values: []float64{3}, Counts: []int64{100}, Source: src},
	}))
	_, page := pb.get(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(run, 10))
	require.Contains(t, page, `id="client-flags"`)
	require.Contains(t, page, "The load generator did not keep up on 1 load level(s)")
	// The limits are half the level's TTFT (p50 130 ms, p99 140 ms), lower
	// than the absolute 100 and 150 ms.
	require.Contains(t, page, "step decode r=8 repetition 1: late: the load generator sent requests p99 1736 ms after their intended times (limit 65 ms, half the level&#39;s TTFT p50 of 130 ms); starved: a 10 ms ticker in the probe woke p99 1758 ms late (limit 70 ms, half the level&#39;s TTFT p99 of 140 ms)")
	require.NotContains(t, page, "r=2 repetition", "a level that kept up is not flagged")

	_, err := report.Signer{Store: pb.store, Keyring: pb.keyring, Render: web.RenderReport}.Sign(ctx, run)
	require.NoError(t, err)
	bundle := pb.download(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(run, 10)+"/report.tar.gz")
	html := string(fileOf(t, bundle, "/"+attest.FileReportHTML))
	require.Contains(t, html, "The load generator did not keep up on 1 load level(s)")
}

// criterionSeries returns the verdict and reason of one criterion's series
// at a level of the run's latest evaluation.
func criterionSeries(t *testing.T, st *store.Store, run int64, criterion, level string) (acceptance.Verdict, string, string) {
	t.Helper()
	stored, err := st.RunLatestEvaluation(context.Background(), run)
	require.NoError(t, err)
	var ev acceptance.Evaluation
	require.NoError(t, json.Unmarshal(stored.Result, &ev))
	for _, c := range ev.Criteria {
		if c.Name != criterion {
			continue
		}
		for _, s := range c.Series {
			if s.Level == level {
				return s.Verdict, s.Reason, s.Explanation
			}
		}
	}
	t.Fatalf("no series of %s at %s in %+v", criterion, level, ev.Criteria)
	return "", "", ""
}

// From a recorded probe run folder to the verdict and the run page: the
// self-check a starved probe wrote into its result.json (recorded,
// testdata/labruns/selfcheck-starved.json, spliced into a recorded run at
// c=4) becomes the client_* measurements, the import's warning, the flag
// on the run page and an INCONCLUSIVE criterion at that level, while the
// level that kept up is judged.
func TestRecordedStarvedLevelIsFlaggedAndNotJudged(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	starved, err := os.ReadFile(filepath.Join("testdata", "labruns", "selfcheck-starved.json"))
	require.NoError(t, err)
	run := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, gates: true, recorded: "local-1", editFolder: func(dir string) {
		path := filepath.Join(dir, "out", "01-chat", "rep-1", "c=4", "result.json")
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var res map[string]any
		require.NoError(t, json.Unmarshal(raw, &res))
		var sc map[string]any
		require.NoError(t, json.Unmarshal(starved, &sc))
		res["inference"].(map[string]any)["self_check"] = sc
		raw, err = json.Marshal(res)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, raw, 0o644))
	}})

	verdict, reason, explanation := criterionSeries(t, cb.store, run, "ttft-p99", "c=4")
	require.Equal(t, acceptance.Inconclusive, verdict)
	require.Equal(t, "client-limited", reason)
	require.Contains(t, explanation, "accept_client_limited: true")
	_, reason, _ = criterionSeries(t, cb.store, run, "ttft-p99", "c=1")
	require.NotEqual(t, "client-limited", reason, "recorded local-1 kept up at c=1")

	_, page := cb.get(t, cb.viewer, cb.url("/runs/")+strconv.FormatInt(run, 10))
	require.Contains(t, page, `id="client-flags"`)
	require.Contains(t, page, "The load generator did not keep up on 1 load level(s)")
	require.Regexp(t, `step chat c=4 repetition 1: late: the load generator sent requests p99 9\d\d ms after their intended times`, page)
	require.Contains(t, page, "the load generator flagged this level", "the probe's own flag, as the import read it")
	require.NotContains(t, page, "step chat c=1 repetition", "the level that kept up is not flagged")
}

// A recorded run whose own self-check shows the probe's delays set the
// tail: local-2 at c=4 had a TTFT p99 of 25 ms while its ticker woke
// 28 ms late at p99 on a host at 93 % CPU pressure. Nothing is spliced:
// the limits relative to the level's TTFT flag it, and its criterion at
// that level waits.
func TestRecordedRunWhoseClientSetTheTailIsFlagged(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	run := cb.labRun(t, labRunOpts{profileVersion: cb.fastVersion, gates: true, recorded: "local-2"})
	verdict, reason, _ := criterionSeries(t, cb.store, run, "ttft-p99", "c=4")
	require.Equal(t, acceptance.Inconclusive, verdict)
	require.Equal(t, "client-limited", reason)
	_, page := cb.get(t, cb.viewer, cb.url("/runs/")+strconv.FormatInt(run, 10))
	require.Regexp(t, `step chat c=4 repetition 1: starved: a 10 ms ticker in the probe woke p99 2\d ms late \(limit [0-9.]+ ms, a quarter of the level&#39;s TTFT p99 of 2\d ms on a saturated host: CPU pressure 9\d %\)`, page)
	require.NotContains(t, page, "step chat c=1 repetition", "at c=1 its ticker's 2 ms is under the 5 ms floor")
}
