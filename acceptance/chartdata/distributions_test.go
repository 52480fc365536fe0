package chartdata_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/acceptance/chartdata/chartdatatest"
	"github.com/accordlab/accord/acceptance/stats"
)

// A reduced CDF is exact at every point (the share at or below each value
// is the share of samples), and bounded (web/charts checks that its table
// reads the exact percentiles from it).
func TestCDFCurveIsExactAtItsPoints(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 10, chartdata.CDFSamples, chartdata.CDFSamples + 1, 50_000, 1_000_000} {
		values := chartdatatest.SortedLatencies(uint64(n), n, 400, 0.6)
		c := chartdata.CurveOf(values)
		require.Equal(t, int64(n), c.N)
		if n <= chartdata.CDFSamples {
			require.Equal(t, values, c.Values, "every sample when they fit")
			continue
		}
		require.LessOrEqual(t, len(c.Points), chartdata.CDFMaxPoints)
		cum := 0
		for _, p := range c.Points {
			cum += int(p[1])
			atOrBelow, _ := slices.BinarySearchFunc(values, p[0], func(e, t float64) int {
				if e <= t {
					return -1
				}
				return 1
			})
			require.Equal(t, atOrBelow, cum, "the share at or below %v is exact", p[0])
		}
		require.Equal(t, n, cum)
		require.Equal(t, values[0], c.Points[0][0])
		require.Equal(t, values[n-1], c.Points[len(c.Points)-1][0])
	}
}

// A log histogram keeps every percentile within the grid's 0.1 %.
func TestLogHistogramKeepsPercentiles(t *testing.T) {
	t.Parallel()
	values := chartdatatest.SortedLatencies(7, 200_000, 25, 0.8)
	values = append(values, 0, 0)
	m := acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "s", Level: "c=1", Repetition: 2, Values: values}
	h, ok := chartdata.LogHistogramOf(m)
	require.True(t, ok)
	require.Equal(t, int64(2), h.Zero)
	back := chartdata.HistogramMeasurement(h)
	require.Equal(t, m.Metric, back.Metric)
	require.Equal(t, 2, back.Repetition)
	raw, err := stats.NewSample(values, nil)
	require.NoError(t, err)
	hist, err := stats.NewSample(back.Values, back.Counts)
	require.NoError(t, err)
	require.Equal(t, raw.N(), hist.N())
	for _, q := range []float64{0.001, 0.5, 0.9, 0.99, 0.999, 1} {
		want, got := raw.Quantile(q), hist.Quantile(q)
		require.InEpsilon(t, want, got, stats.HistogramRelativeError*1.0001, "q=%v", q)
	}
	// Histogram input (ITL) keeps its counts.
	itl := acceptance.Measurement{Metric: acceptance.MetricITL, Values: []float64{5, 10, 20}, Counts: []int64{3, 0, 7}}
	h, ok = chartdata.LogHistogramOf(itl)
	require.True(t, ok)
	var total int64
	for _, c := range h.Counts {
		total += c
	}
	require.Equal(t, int64(10), total)
	// A range beyond the bound is refused rather than made huge.
	_, ok = chartdata.LogHistogramOf(acceptance.Measurement{Values: []float64{1e-9, 1e9}})
	require.False(t, ok)
}

// Samples kept in segments (a run of more than stats.InMemoryLimit
// requests) give the same curve, exact point for point, and the same log
// histogram as the same samples in memory.
func TestSegmentedSamplesChartAsInMemory(t *testing.T) {
	t.Parallel()
	values := chartdatatest.SortedLatencies(11, 120_000, 40, 0.5)
	shuffled := slices.Clone(values)
	for i := range shuffled { // a fixed shuffle: segments keep input order
		j := (i * 7919) % len(shuffled)
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	}
	segs, err := stats.MemorySegments(shuffled)
	require.NoError(t, err)
	s, err := stats.NewSegmentedSample(segs)
	require.NoError(t, err)
	require.Equal(t, chartdata.CurveOf(values), chartdata.CurveOfSample(s))
	require.NoError(t, s.Err())

	mem := acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "s", Repetition: 1, Values: values}
	seg := acceptance.Measurement{Metric: acceptance.MetricTTFT, Step: "s", Repetition: 1, Segments: segs}
	hm, ok := chartdata.LogHistogramOf(mem)
	require.True(t, ok)
	hs, ok := chartdata.LogHistogramOf(seg)
	require.True(t, ok)
	require.Equal(t, hm, hs)
}
