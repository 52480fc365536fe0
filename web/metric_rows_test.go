package web

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/store"
)

// The percentile table reads in the catalog's order with a metric's
// repetitions together, and host telemetry is set apart.
func TestMetricRowsFollowTheCatalog(t *testing.T) {
	in := []store.MeasurementRow{
		{Metric: acceptance.MetricTPOT, Step: "ttft", Repetition: 2},
		{Metric: acceptance.MetricCPUUtil, Step: "ttft", Repetition: 1},
		{Metric: acceptance.MetricTTFT, Step: "ttft", Repetition: 2},
		{Metric: acceptance.MetricTPOT, Step: "ttft", Repetition: 1},
		{Metric: acceptance.MetricTTFT, Step: "ttft", Repetition: 1},
		{Metric: "made_up_metric", Step: "ttft", Repetition: 1},
	}
	rows := MetricRowsFrom(in)
	var got []string
	var first []bool
	for _, r := range rows {
		got = append(got, r.Metric)
		first = append(first, r.First)
	}
	require.Equal(t, []string{acceptance.MetricTTFT, acceptance.MetricTTFT, acceptance.MetricTPOT, acceptance.MetricTPOT, acceptance.MetricCPUUtil, "made_up_metric"}, got)
	require.Equal(t, []bool{true, false, true, false, true, true}, first)
	require.Equal(t, 1, rows[0].Repetition)
	require.Equal(t, "Time to first token", rows[0].Name)

	measured, telemetry := SplitTelemetry(rows)
	require.Len(t, telemetry, 1)
	require.Equal(t, acceptance.MetricCPUUtil, telemetry[0].Metric)
	require.Len(t, measured, 5)
}

// A sweep's levels read as numbers: c=1, c=4, c=16, not c=1, c=16, c=4.
func TestMetricRowsOrderLevelsAsNumbers(t *testing.T) {
	var in []store.MeasurementRow
	for _, lv := range []string{"c=16", "c=1", "c=4"} {
		in = append(in, store.MeasurementRow{Metric: acceptance.MetricTTFT, Step: "sweep", Level: lv, Repetition: 1})
	}
	var got []string
	for _, r := range MetricRowsFrom(in) {
		got = append(got, r.Level)
	}
	require.Equal(t, []string{"c=1", "c=4", "c=16"}, got)
}

// Pooled rows follow the per-repetition rows' order, each of the run's
// followed by its baseline's (or why it has none); metrics whose every
// figure agrees are shown once, and only then.
func TestPooledRowsAndFoldAlike(t *testing.T) {
	sum := func(p99 float64) store.Summary {
		return store.Summary{N: 100, P50: 10, P90: 20, P95: 30, P99: p99, P999: 50, Max: 60, Mean: 12}
	}
	var reps []store.MeasurementRow
	for rep := 1; rep <= 3; rep++ {
		reps = append(reps,
			store.MeasurementRow{Metric: acceptance.MetricTTFT, Step: "chat", Level: "c=4", Repetition: rep, Summary: sum(40)},
			store.MeasurementRow{Metric: acceptance.MetricTTFTContent, Step: "chat", Level: "c=4", Repetition: rep, Summary: sum(40)},
			// One repetition's p99 differs: not the same figures.
			store.MeasurementRow{Metric: acceptance.MetricTTFTIntended, Step: "chat", Level: "c=4", Repetition: rep, Summary: sum(40 + float64(rep/3))},
			store.MeasurementRow{Metric: acceptance.MetricErrorRate, Step: "chat", Level: "c=4", Repetition: rep, Summary: store.Summary{N: 1}},
			store.MeasurementRow{Metric: acceptance.MetricCacheHitRatio, Step: "chat", Level: "c=4", Repetition: rep, Summary: store.Summary{N: 1}},
		)
	}
	rows := MetricRowsFrom(reps)
	stats := func(metric string, rate bool) chartdata.SeriesStats {
		return chartdata.SeriesStats{Metric: metric, Step: "chat", Level: "c=4", Repetitions: 3, N: 300, P50: 10, P90: 20, P95: 30, P99: 40, P999: 50, Max: 60, Mean: 12, Rate: rate}
	}
	run := chartdata.Aggregates{Summary: []chartdata.SeriesStats{stats(acceptance.MetricTTFT, false), stats(acceptance.MetricTTFTContent, false),
		stats(acceptance.MetricTTFTIntended, false), stats(acceptance.MetricErrorRate, true), stats(acceptance.MetricCacheHitRatio, true)}}
	base := chartdata.Aggregates{Summary: []chartdata.SeriesStats{stats(acceptance.MetricTTFT, false), stats(acceptance.MetricTTFTContent, false)}}

	pooled := PooledRows(rows, run, &base, "baseline run #7")
	var who []string
	for _, r := range pooled {
		who = append(who, r.Metric+" "+r.Who)
	}
	require.Equal(t, []string{"ttft this run", "ttft baseline run #7", "ttft_content this run", "ttft_content baseline run #7",
		"ttft_intended this run", "ttft_intended baseline run #7", "error_rate this run", "error_rate baseline run #7",
		"cache_hit_ratio this run", "cache_hit_ratio baseline run #7"}, who)
	require.Equal(t, []string{"10.0", "20.0", "30.0", "40.0", "50.0", "60.0", "12.0"}, pooled[0].Figures())
	require.False(t, pooled[5].Has)
	require.Equal(t, "no baseline figures for this step and metric", pooled[5].Why)

	folded, foldedReps := FoldAlike(pooled, rows)
	var kept []string
	for _, r := range folded {
		if r.First {
			kept = append(kept, r.Metric)
		}
	}
	require.Equal(t, []string{acceptance.MetricTTFT, acceptance.MetricTTFTIntended, acceptance.MetricErrorRate, acceptance.MetricCacheHitRatio}, kept,
		"ttft_content folds into ttft; ttft_intended differs in one repetition; equal rates stay")
	require.Equal(t, []string{"Time to first content token"}, folded[0].Also)
	require.Len(t, foldedReps, 12, "the folded metric's three repetitions are gone")
	require.Equal(t, []string{"Time to first content token"}, foldedReps[0].Also)

	// Without a baseline's figures for it, a metric does not fold.
	alone, _ := FoldAlike(PooledRows(rows, run, &chartdata.Aggregates{Summary: base.Summary[:1]}, "baseline run #7"), rows)
	require.Empty(t, alone[0].Also)

	// No baseline chosen: the run's rows only.
	require.Len(t, PooledRows(rows, run, nil, ""), 5)
}
