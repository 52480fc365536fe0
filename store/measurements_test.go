package store_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

func TestMeasurements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st  *store.Store
		run int64
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		f := newRunFixture(t, st)
		return &testBundle{st: st, run: f.run(t, st)}
	}

	// Measurements come back as saved, the request count of a share
	// included, so that their digest (and the evaluation's inputs) is the
	// same.
	t.Run("MeasurementsRoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := []acceptance.Measurement{
			{Metric: acceptance.MetricErrorRate, Step: "chat", Level: "c=4", Repetition: 1, Values: []float64{0.002}, Trials: 5000,
				Source: acceptance.Source{Tool: "accord-probe", Field: "requests.jsonl: failed / all"}},
			{Metric: acceptance.MetricTTFT, Step: "chat", Level: "c=4", Repetition: 1, Values: []float64{12.5, 13, 40}, SentIndex: []int64{0, 2},
				ToolSummary: map[string]float64{"p99": 39}, Source: acceptance.Source{Tool: "vllm-bench", Field: "ttfts"}},
			{Metric: acceptance.MetricITL, Step: "chat", Level: "c=4", Repetition: 1, Values: []float64{5, 6}, Counts: []int64{10, 3},
				Source: acceptance.Source{Tool: "accord-probe"}},
		}
		require.NoError(t, b.st.SaveMeasurements(ctx, b.run, in))
		out, err := b.st.RunMeasurements(ctx, b.run)
		require.NoError(t, err)
		require.Equal(t, acceptance.MeasurementsDigest(in), acceptance.MeasurementsDigest(out))
		for _, m := range out {
			if m.Metric == acceptance.MetricErrorRate {
				require.EqualValues(t, 5000, m.Trials)
			} else {
				require.Zero(t, m.Trials)
			}
		}
	})

	// A sweep's levels come back as numbers, not as text (PostgreSQL would
	// order c=1, c=16, c=4).
	t.Run("LevelsInNumberOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var in []acceptance.Measurement
		for _, lv := range []string{"c=16", "c=4", "c=1", "c=128"} {
			in = append(in, acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "sweep", Level: lv, Repetition: 1, Values: []float64{1, 2}})
		}
		require.NoError(t, b.st.SaveMeasurements(ctx, b.run, in))
		want := []string{"c=1", "c=4", "c=16", "c=128"}
		ms, err := b.st.RunMeasurements(ctx, b.run)
		require.NoError(t, err)
		rows, err := b.st.RunMeasurementSummaries(ctx, b.run)
		require.NoError(t, err)
		var loaded, summarized []string
		for i := range ms {
			loaded, summarized = append(loaded, ms[i].Level), append(summarized, rows[i].Level)
		}
		require.Equal(t, want, loaded)
		require.Equal(t, want, summarized)
	})

	t.Run("SummariesAreComputedOnceAtSaving", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		values := make([]float64, 1000)
		for i := range values {
			values[i] = float64(i + 1)
		}
		require.NoError(t, b.st.SaveMeasurements(ctx, b.run, []acceptance.Measurement{
			{Metric: acceptance.MetricTTFT, Step: "serve", Repetition: 1, Values: values, Source: acceptance.Source{Tool: "accord-probe"}},
			// A histogram: 90 requests at 5 ms, 10 at 50 ms.
			{Metric: acceptance.MetricITL, Step: "serve", Repetition: 1, Values: []float64{5, 50}, Counts: []int64{90, 10}, Source: acceptance.Source{Tool: "accord-probe"}},
		}))
		rows, err := b.st.RunMeasurementSummaries(ctx, b.run)
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.Equal(t, acceptance.MetricITL, rows[0].Metric, "ordered by step, level, metric")
		itl, ttft := rows[0].Summary, rows[1].Summary
		require.EqualValues(t, 100, itl.N, "a histogram counts its requests")
		require.Equal(t, 5.0, itl.P50)
		require.Equal(t, 50.0, itl.P95)
		require.Equal(t, store.Summary{N: 1000, Min: 1, P50: 500, P90: 900, P95: 950, P99: 990, P999: 999, Max: 1000, Mean: 500.5}, ttft,
			"nearest-rank percentiles")
		require.Equal(t, "accord-probe", rows[1].Source.Tool)
	})

	t.Run("SavingAgainReplacesASeries", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "serve", Level: "c=1", Repetition: 2, Values: []float64{1, 2, 3},
			ToolSummary: map[string]float64{"p50": 2}, Source: acceptance.Source{Tool: "vllm-bench"}}
		require.NoError(t, b.st.SaveMeasurements(ctx, b.run, []acceptance.Measurement{m}))
		m.Values, m.ToolSummary = []float64{7}, nil
		require.NoError(t, b.st.SaveMeasurements(ctx, b.run, []acceptance.Measurement{m}))
		out, err := b.st.RunMeasurements(ctx, b.run)
		require.NoError(t, err)
		require.Len(t, out, 1)
		require.Equal(t, []float64{7}, out[0].Values)
		require.Nil(t, out[0].ToolSummary, "no tool summary reads back as none")
	})

	t.Run("ValuesThatCannotBeSummarizedAreRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, m := range []acceptance.Measurement{
			{Metric: acceptance.MetricTTFT, Step: "s", Repetition: 1, Values: []float64{1, math.NaN()}},
			{Metric: acceptance.MetricTTFT, Step: "s", Repetition: 1, Values: []float64{1, 2}, Counts: []int64{1}},
		} {
			require.ErrorContains(t, b.st.SaveMeasurements(ctx, b.run, []acceptance.Measurement{m}), "summarize")
		}
		out, err := b.st.RunMeasurements(ctx, b.run)
		require.NoError(t, err)
		require.Empty(t, out)
		s, err := store.Summarize(acceptance.Measurement{})
		require.NoError(t, err)
		require.Equal(t, store.Summary{}, s, "no values, no statistics")
	})
}
