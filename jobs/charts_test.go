package jobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/runners/probe/emulator"
	"github.com/accordlab/accord/runners/probe/emulator/emulatortest"
	"github.com/accordlab/accord/store"
)

// startEmulatorInProcess serves the emulator on 127.0.0.1 for the test.
func startEmulatorInProcess(t *testing.T) string {
	t.Helper()
	return emulatortest.Serve(t, emulator.Config{ITL: 2 * time.Millisecond, PrefillPerToken: 10 * time.Microsecond, BlockTokens: 16, BlockBytes: 64 << 10,
		CacheBlocks: 64, DefaultMaxTokens: 8, Seed: 1}, nil)
}

// A real run through SSH stores its chart aggregates in the ingest
// transaction: the distributions, TTFT over the run from the raw records,
// throughput and telemetry per second, histograms and host facts.
func TestRunChartsPrecomputedAtIngest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	endpoint := startEmulatorInProcess(t)
	p := b.quickProfile(100 * time.Millisecond)
	p.Steps = append(p.Steps, acceptance.StepSpec{Name: "chat", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
		Endpoint: endpoint, Model: "emulated", API: "chat",
		PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 32}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 8},
		Load: acceptance.Load{Mode: "concurrency", Concurrency: 2}, Duration: acceptance.Duration(1500 * time.Millisecond),
	}})
	p = p.Normalized()
	runID := b.submit(t, b.river, b.saveProfile(t, p), nil, nil)
	run := b.waitFor(t, runID, 90*time.Second, "settle", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)

	docs, err := b.store.RunCharts(ctx, runID)
	require.NoError(t, err)
	var meta chartdata.Meta
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyMeta], &meta))
	require.Equal(t, chartdata.Version, meta.Version)
	require.Empty(t, meta.Notes)
	require.Equal(t, []chartdata.Step{{Name: "settle", Kind: "pause", Levels: []string{""}}, {Name: "read", Kind: "fio", Levels: []string{""}},
		{Name: "chat", Kind: "inference", Levels: []string{"c=2"}}}, meta.Steps)
	require.Positive(t, meta.Requests)

	var summary []chartdata.SeriesStats
	require.NoError(t, json.Unmarshal(docs[chartdata.KeySummary], &summary))
	ms, err := b.store.RunMeasurementSummaries(ctx, runID)
	require.NoError(t, err)
	var ttftN int64
	for _, m := range ms {
		if m.Metric == acceptance.MetricTTFT {
			ttftN += m.Summary.N
			found := false
			for _, s := range summary {
				if s.Metric == m.Metric && s.Step == m.Step && s.Level == m.Level {
					found = true
					require.Equal(t, m.Summary.P99, s.P99, "one repetition: the pooled p99 is the repetition's")
				}
			}
			require.True(t, found)
		}
	}
	require.Positive(t, ttftN)

	var cdf map[string]chartdata.CDFCurve
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyCDF("chat", "c=2")], &cdf))
	require.Equal(t, ttftN, cdf[acceptance.MetricTTFT].N)
	require.Contains(t, cdf, acceptance.MetricE2EL)

	var or chartdata.OverRun
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyOverRun("chat")], &or))
	require.Equal(t, ttftN, or.Requests, "a dot per measured request")
	require.Positive(t, or.Points[0][0], "the inference step ran after the fio step: its time is on the run's clock")

	var ts []chartdata.TimeSeries
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyTimeSeries], &ts))
	groups := map[string]int{}
	for _, s := range ts {
		groups[s.Group]++
	}
	require.Equal(t, 2, groups["throughput"])
	require.GreaterOrEqual(t, groups["telemetry"], 4)

	var hists []chartdata.LogHistogram
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyHist], &hists))
	metrics := map[string]bool{}
	for _, h := range hists {
		metrics[h.Metric] = true
	}
	require.True(t, metrics[acceptance.MetricTTFT] && metrics[acceptance.MetricReadCLat] && metrics[acceptance.MetricITL])
	var facts map[string]string
	require.NoError(t, json.Unmarshal(docs[chartdata.KeyFacts], &facts))
	require.NotEmpty(t, facts["kernel"])
}
