package chartdata

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

// seriesAggregates makes one run's aggregates of step "chat" at level
// "c=4": TTFT histograms of three repetitions around median and a request
// rate per repetition.
func seriesAggregates(t *testing.T, seed uint64, median float64, rates []float64) Aggregates {
	t.Helper()
	a := newAggregates()
	r := rand.New(rand.NewPCG(seed, 3))
	for rep := 1; rep <= 3; rep++ {
		v := make([]float64, 500)
		for i := range v {
			v[i] = median * math.Exp(0.4*r.NormFloat64())
		}
		h, ok := logHistogram(acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "chat", Level: "c=4", Repetition: rep, Values: v})
		require.True(t, ok)
		a.Hist = append(a.Hist, h)
	}
	a.Summary = append(a.Summary, SeriesStats{Metric: acceptance.MetricRequestThroughput, Step: "chat", Level: "c=4", Rate: true, PerRepetition: rates})
	return a
}

// The compare page's numbers are the gate engine's on the measurements
// rebuilt from the aggregates, at the bootstrap size asked for: the same
// as evaluating them directly (what the page did before CompareSeries).
func TestCompareSeriesIsTheEnginesEvaluation(t *testing.T) {
	t.Parallel()
	cand := seriesAggregates(t, 1, 120, []float64{9, 9.5, 9.2})
	base := seriesAggregates(t, 2, 100, []float64{10, 10.1, 9.9})
	criteria := []MetricStatistic{{acceptance.MetricTTFT, acceptance.StatP99}, {acceptance.MetricRequestThroughput, acceptance.StatRate}}

	got, err := CompareSeries(cand, base, criteria, "chat", "c=4", ViewResamples)
	require.NoError(t, err)

	ev, err := acceptance.Evaluate(acceptance.EvaluationInput{Gates: ComparisonGates(criteria, "chat"),
		Candidate: SeriesMeasurements(cand, "chat", "c=4"), Baseline: SeriesMeasurements(base, "chat", "c=4"), Resamples: 2000})
	require.NoError(t, err)
	want := map[MetricStatistic]acceptance.SeriesResult{}
	for _, c := range ev.Criteria {
		for _, s := range c.Series {
			want[MetricStatistic{c.Metric, c.Statistic}] = s
		}
	}
	require.Len(t, got, 2)
	require.Equal(t, want, got)
	p99 := got[criteria[0]]
	require.NotNil(t, p99.Lower)
	require.Greater(t, *p99.Estimate, 0.0, "the candidate's TTFT is slower")

	none, err := CompareSeries(cand, base, nil, "chat", "c=4", ViewResamples)
	require.NoError(t, err)
	require.Empty(t, none)
}

// The rebuilt measurements are one histogram per repetition and one value
// per repetition for rates, of the series asked for only.
func TestSeriesMeasurements(t *testing.T) {
	t.Parallel()
	a := seriesAggregates(t, 1, 100, []float64{9, 10})
	ms := SeriesMeasurements(a, "chat", "c=4")
	require.Len(t, ms, 5)
	require.Equal(t, acceptance.Measurement{Metric: acceptance.MetricRequestThroughput, Step: "chat", Level: "c=4", Repetition: 2, Values: []float64{10}}, ms[4])
	require.Empty(t, SeriesMeasurements(a, "chat", "c=1"))
}
