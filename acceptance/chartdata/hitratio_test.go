package chartdata

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

// A reuse sweep's curve has a point per level at the hit ratio the
// server's counters measured (the mean over repetitions) with the TTFT
// percentiles of every request of the level pooled, ordered by that
// ratio; a level whose counters gave no ratio is left out, said why.
func TestHitRatioCurveFromASweepsStatistics(t *testing.T) {
	t.Parallel()
	ttft := func(level string, rep int, values ...float64) acceptance.Measurement {
		return acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "reuse", Level: level, Repetition: rep, Values: values}
	}
	ratio := func(level string, rep int, v float64) acceptance.Measurement {
		return acceptance.Measurement{Metric: acceptance.MetricCacheHitRatio, Step: "reuse", Level: level, Repetition: rep, Values: []float64{v}}
	}
	ms := []acceptance.Measurement{
		ttft("reuse=0", 1, 100, 110, 120), ttft("reuse=0", 2, 105, 115, 300), ratio("reuse=0", 1, 0), ratio("reuse=0", 2, 0.02),
		// The 0.9 level measured less than the 0.5 one here: the points go
		// by the measured ratio, not by the share asked for.
		ttft("reuse=0.9", 1, 40, 42), ratio("reuse=0.9", 1, 0.3),
		ttft("reuse=0.5", 1, 60, 62), ratio("reuse=0.5", 1, 0.45),
		ttft("reuse=1", 1, 10, 12),
		{Metric: acceptance.MetricTTFT, Step: "other", Level: "c=1", Repetition: 1, Values: []float64{1}},
	}
	p := acceptance.ProfileSpec{Steps: []acceptance.StepSpec{
		{Name: "reuse", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{Prefix: &acceptance.PrefixReuse{Distinct: 2, Sweep: []float64{0, 0.5, 0.9, 1}}}},
		{Name: "other", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{}},
	}}
	a := Compute(Input{Profile: p, Measurements: ms})
	curves := HitRatioCurves(a)
	require.Len(t, curves, 1, "only the reuse sweep has a curve")
	c := curves[0]
	require.Equal(t, "reuse", c.Step)
	var levels []string
	for _, pt := range c.Points {
		levels = append(levels, pt.Level)
	}
	require.Equal(t, []string{"reuse=0", "reuse=0.9", "reuse=0.5"}, levels)
	zero := c.Points[0]
	require.InDelta(t, 0.01, zero.HitRatio, 1e-12, "the mean of the repetitions' ratios")
	require.Equal(t, []float64{0, 0.02}, zero.PerRepetition)
	require.Equal(t, int64(6), zero.N)
	require.Equal(t, 110.0, zero.P50, "nearest rank over both repetitions' six requests")
	require.Equal(t, 300.0, zero.P99)
	require.Equal(t, 0.9, c.Points[1].Share)
	require.Equal(t, []string{"reuse=1: the server's prefix cache counters gave no hit ratio"}, c.Left)

	_, ok := HitRatioCurveOf(a, "other")
	require.False(t, ok, "a concurrency level is no reuse level")
	back, ok := HitRatioCurveOf(a, "reuse")
	require.True(t, ok)
	require.Equal(t, c, back)
}
