package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// Measurements come back as saved, the request count of a share included,
// so that their digest (and the evaluation's inputs) is the same.
func TestMeasurementsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	_, run, _ := hostAndRuns(t, st)
	in := []acceptance.Measurement{
		{Metric: acceptance.MetricErrorRate, Step: "chat", Level: "c=4", Repetition: 1, Values: []float64{0.002}, Trials: 5000,
			Source: acceptance.Source{Tool: "accord-probe", Field: "requests.jsonl: failed / all"}},
		{Metric: acceptance.MetricTTFT, Step: "chat", Level: "c=4", Repetition: 1, Values: []float64{12.5, 13, 40},
			ToolSummary: map[string]float64{"p99": 39}, Source: acceptance.Source{Tool: "vllm-bench", Field: "ttfts"}},
		{Metric: acceptance.MetricITL, Step: "chat", Level: "c=4", Repetition: 1, Values: []float64{5, 6}, Counts: []int64{10, 3},
			Source: acceptance.Source{Tool: "accord-probe"}},
	}
	require.NoError(t, st.SaveMeasurements(ctx, run, in))
	out, err := st.LoadMeasurements(ctx, run)
	require.NoError(t, err)
	require.Equal(t, acceptance.MeasurementsDigest(in), acceptance.MeasurementsDigest(out))
	for _, m := range out {
		if m.Metric == acceptance.MetricErrorRate {
			require.EqualValues(t, 5000, m.Trials)
		} else {
			require.Zero(t, m.Trials)
		}
	}
}
