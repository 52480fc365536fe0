package chartdata

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

var tableQuantiles = []float64{0.5, 0.9, 0.99, 0.999}

// Nearest rank ⌈q·n⌉, checked by hand: of 1..10, p50 is the 5th value,
// p90 the 9th, p99 and p99.9 the 10th; of 1..200, p50 the 100th, p90 the
// 180th, p99 the 198th and p99.9 the 200th. Unsorted input is sorted in
// a copy.
func TestPlotCDFQuantilesAreNearestRank(t *testing.T) {
	t.Parallel()
	ten := []float64{7, 3, 10, 1, 9, 2, 8, 4, 6, 5}
	p, err := PlotCDF(ten, tableQuantiles, 100)
	require.NoError(t, err)
	require.Equal(t, []float64{5, 9, 10, 10}, p.Quantiles)
	require.Equal(t, []float64{7, 3, 10, 1, 9, 2, 8, 4, 6, 5}, ten, "the input is left as it was")
	require.Equal(t, int64(10), p.N)
	require.Equal(t, [2]float64{1, 10}, [2]float64{p.Min, p.Max})

	v := make([]float64, 200)
	for i := range v {
		v[i] = float64(i + 1)
	}
	p, err = PlotCDF(v, tableQuantiles, 16)
	require.NoError(t, err)
	require.Equal(t, []float64{100, 180, 198, 200}, p.Quantiles, "the same when the curve is thinned")
}

// Few distinct values: the exact empirical CDF, a point at the top of
// each step after the start at (min, 0 %).
func TestPlotCDFSmallIsTheExactSteps(t *testing.T) {
	t.Parallel()
	p, err := PlotCDF([]float64{1, 1, 2, 3}, nil, 16)
	require.NoError(t, err)
	require.True(t, p.Whole)
	require.Equal(t, []Point{{1, 0}, {1, 50}, {2, 75}, {3, 100}}, p.Points)

	_, err = PlotCDF([]float64{1, math.NaN()}, nil, 16)
	require.Error(t, err)
}

// Bins are sorted, merged by value and empty ones dropped; the quantiles
// are the values of the bins holding the nearest ranks (total 10: ranks
// 5, 9, 10, 10 fall in bins 10, 20, 30, 30).
func TestPlotCDFBinsQuantilesAndShares(t *testing.T) {
	t.Parallel()
	p, err := PlotCDFBins([]Bin{{30, 1}, {10, 3}, {20, 4}, {15, 0}, {10, 2}}, tableQuantiles, 16)
	require.NoError(t, err)
	require.Equal(t, int64(10), p.N)
	require.Equal(t, []float64{10, 20, 30, 30}, p.Quantiles)
	require.Equal(t, []Point{{10, 50}, {20, 90}, {30, 100}}, p.Points)

	_, err = PlotCDFBins([]Bin{{1, -1}}, nil, 16)
	require.Error(t, err)
}

// Hand-checked ranks: evenly 1, 4, 7, 10; a tail of 10 ranks in a budget
// of 4 keeps the last two exactly and spaces the other two from the
// first (distance 9 from the end) to distance round(9·2/9) = 2.
func TestThinningRanksByHand(t *testing.T) {
	t.Parallel()
	require.Equal(t, []int{1, 4, 7, 10}, evenRanks(1, 10, 4))
	require.Equal(t, []int{0, 1, 2}, evenRanks(0, 2, 5), "every rank when they fit")
	require.Equal(t, []int{5}, evenRanks(5, 9, 1))
	require.Equal(t, []int{1, 8, 9, 10}, tailRanks(1, 10, 4))
	require.Equal(t, []int{3, 4, 5}, tailRanks(3, 5, 4), "every rank when they fit")
}

// Thinning keeps the extreme tail whole: the last half of the tail's
// share (three quarters of the budget) are every one of the last
// indices, the first and last indices are always kept, and the result is
// ascending without repeats, within the budget.
func TestThinIndicesKeepsTheExtremeTail(t *testing.T) {
	t.Parallel()
	const m, tailStart, budget = 100_000, 99_000, 200
	idx := thinIndices(m, tailStart, budget)
	require.LessOrEqual(t, len(idx), budget)
	require.True(t, slices.IsSorted(idx))
	require.Equal(t, len(idx), len(slices.Compact(slices.Clone(idx))))
	require.Equal(t, 0, idx[0])
	require.Contains(t, idx, tailStart, "the tail starts at p99")
	exact := (budget - budget/4) / 2
	require.Equal(t, rangeOf(m-exact, m-1), idx[len(idx)-exact:])

	require.Equal(t, rangeOf(0, 9), thinIndices(10, 5, 16), "all when they fit")
}

// A thinned curve of distinct samples ends with the slowest samples, each
// its own point at its exact share.
func TestPlotCDFThinnedKeepsTheSlowestSamples(t *testing.T) {
	t.Parallel()
	const n, budget = 100_000, 400
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i + 1)
	}
	p, err := PlotCDF(v, nil, budget)
	require.NoError(t, err)
	require.False(t, p.Whole)
	require.LessOrEqual(t, len(p.Points), budget)
	require.Equal(t, Point{1, 0}, p.Points[0])
	last := p.Points[len(p.Points)-100:]
	for k, pt := range last {
		r := n - 100 + k + 1
		require.Equal(t, Point{float64(r), 100 * float64(r) / n}, pt)
	}
}
