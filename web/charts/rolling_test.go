package charts

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance/chartdata"
)

// A page precomputed at ingest stores a reduced scatter and the rolling
// line of all requests: the chart is then the one drawn from every point.
func TestLatencyOverRunWithPrecomputedRollingLine(t *testing.T) {
	t.Parallel()
	all := requestsOverRun(9, 200_000, 600, 123_456, 12_000)
	window, rolling, err := chartdata.RollingQuantile(all, 0, 0)
	require.NoError(t, err)
	require.Equal(t, 5.0, window, "600 s in about 120 windows")

	full, fullTable, err := LatencyOverRun(OverRunInput{Unit: "ms", Series: []OverRunSeries{{Name: "TTFT", Points: all}}})
	require.NoError(t, err)
	reduced := chartdata.MinMaxSampled(all, DefaultScatterPoints)
	pre, preTable, err := LatencyOverRun(OverRunInput{Unit: "ms", Window: window,
		Series: []OverRunSeries{{Name: "TTFT", Points: reduced, Rolling: rolling}}})
	require.NoError(t, err)
	require.JSONEq(t, string(full), string(pre))
	require.Equal(t, fullTable, preTable)

	// The line from the reduced points alone differs (it keeps the
	// extremes of every stretch, so its p99 is biased up).
	biased, _, err := LatencyOverRun(OverRunInput{Unit: "ms", Window: window, Series: []OverRunSeries{{Name: "TTFT", Points: reduced}}})
	require.NoError(t, err)
	require.NotEqual(t, string(full), string(biased))
}

func TestLatencyOverRunRejectsARollingLineWithoutWindow(t *testing.T) {
	t.Parallel()
	_, _, err := LatencyOverRun(OverRunInput{Series: []OverRunSeries{{Name: "TTFT", Points: []Point{{X: 0, Y: 1}}, Rolling: []Point{{X: 0.5, Y: 1}}}}})
	require.ErrorContains(t, err, "no window")
}
