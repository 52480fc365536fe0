package chartdata_test

import (
	"github.com/accordlab/accord/acceptance/chartdata"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRollingQuantileRejectsBadInput(t *testing.T) {
	t.Parallel()
	_, _, err := chartdata.RollingQuantile([]chartdata.Point{{0, 1}, {1, math.NaN()}}, 1, 0.99)
	require.Error(t, err)
	_, _, err = chartdata.RollingQuantile([]chartdata.Point{{0, 1}}, 1, 1.5)
	require.Error(t, err)
	w, line, err := chartdata.RollingQuantile(nil, 0, 0)
	require.NoError(t, err)
	require.Equal(t, 1.0, w)
	require.Empty(t, line)
}

func TestWindowQuantileIsNearestRank(t *testing.T) {
	t.Parallel()
	var pts []chartdata.Point
	for i := range 200 {
		pts = append(pts, chartdata.Point{float64(i) / 100, float64(200 - i)}) // two 1 s windows
	}
	got := chartdata.WindowQuantile(pts, 0, 1, 0.99)
	require.Equal(t, []chartdata.Point{{0.5, 199}, {1.5, 99}}, got) // rank 99 of 100: the 2nd largest
	got = chartdata.WindowQuantile(pts, 0, 1, 0.5)
	require.Equal(t, []chartdata.Point{{0.5, 150}, {1.5, 50}}, got)
}
