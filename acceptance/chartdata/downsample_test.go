package chartdata_test

import (
	"github.com/accordlab/accord/acceptance/chartdata"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance/chartdata/chartdatatest"
)

// downsampler is chartdata.LTTB or chartdata.MinMax.
type downsampler struct {
	name string
	fn   func([]chartdata.Point, int) []chartdata.Point
}

var downsamplers = []downsampler{{"chartdata.LTTB", chartdata.LTTB}, {"chartdata.MinMax", chartdata.MinMax}, {"chartdata.MinMaxSampled", chartdata.MinMaxSampled}}

// requireSubsequence checks the invariants both downsamplers promise:
// first and last kept, at most target points, a subsequence of the input
// (so X is monotonic and every point was measured).
func requireSubsequence(t *testing.T, in, out []chartdata.Point, target int) {
	t.Helper()
	require.LessOrEqual(t, len(out), target)
	require.Equal(t, in[0], out[0], "first point kept")
	require.Equal(t, in[len(in)-1], out[len(out)-1], "last point kept")
	j := 0
	for i, p := range out {
		for j < len(in) && in[j] != p {
			j++
		}
		require.Less(t, j, len(in), "output point %d %v is not in the input in order", i, p)
		j++
		if i > 0 {
			require.GreaterOrEqual(t, p.X, out[i-1].X, "x stays monotonic at %d", i)
		}
	}
}

func TestDownsampleSpikeInAMillionSurvives(t *testing.T) {
	t.Parallel()
	const n = 1_000_000
	for _, d := range downsamplers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			pts := chartdatatest.RequestsOverRun(7, n, 3600, 612_345, 9000)
			// And a dip: the fastest request of the run.
			pts[345_678].Y = 0.5
			out := d.fn(pts, 3000)
			require.LessOrEqual(t, len(out), 3000)
			require.GreaterOrEqual(t, len(out), 2800, "the budget is used")
			requireSubsequence(t, pts, out, 3000)
			require.Contains(t, out, pts[612_345], "the spike survives")
			require.Contains(t, out, pts[345_678], "the dip survives")
		})
	}
}

// chartdata.MinMax keeps the lowest and highest point of every bucket: every local
// extreme at the bucket scale, not only the global ones.
func TestMinMaxKeepsEveryBucketExtreme(t *testing.T) {
	t.Parallel()
	pts := chartdatatest.RequestsOverRun(11, 100_003, 600, -1, 0)
	const target = 1002
	out := chartdata.MinMax(pts, target)
	requireSubsequence(t, pts, out, target)
	kept := map[chartdata.Point]bool{}
	for _, p := range out {
		kept[p] = true
	}
	buckets := (target - 2) / 2
	inner := len(pts) - 2
	for b := range buckets {
		start, end := 1+b*inner/buckets, 1+(b+1)*inner/buckets
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range pts[start:end] {
			lo, hi = min(lo, p.Y), max(hi, p.Y)
		}
		var sawLo, sawHi bool
		for _, p := range pts[start:end] {
			sawLo = sawLo || p.Y == lo && kept[p]
			sawHi = sawHi || p.Y == hi && kept[p]
		}
		require.True(t, sawLo && sawHi, "bucket %d keeps its min %v and max %v", b, lo, hi)
	}
}

// chartdata.LTTB keeps the shape: on a clean sine, each kept point lies on it and
// the peaks and troughs are kept to within one bucket's width.
func TestLTTBKeepsPeaks(t *testing.T) {
	t.Parallel()
	n := 200_000
	pts := make([]chartdata.Point, n)
	for i := range pts {
		x := float64(i) / float64(n) * 10 * math.Pi
		pts[i] = chartdata.Point{x, math.Sin(x)}
	}
	out := chartdata.LTTB(pts, 500)
	requireSubsequence(t, pts, out, 500)
	hi, lo := math.Inf(-1), math.Inf(1)
	for _, p := range out {
		hi, lo = max(hi, p.Y), min(lo, p.Y)
	}
	require.InDelta(t, 1, hi, 1e-3)
	require.InDelta(t, -1, lo, 1e-3)
}

func TestDownsampleSmallInputsUnchanged(t *testing.T) {
	t.Parallel()
	pts := []chartdata.Point{{0, 1}, {1, 5}, {2, 2}}
	for _, d := range downsamplers {
		require.Equal(t, pts, d.fn(pts, 10), d.name)
		require.Empty(t, d.fn(nil, 10), d.name)
	}
	// A target too small to hold first, last and something between is
	// raised to the smallest that does.
	many := chartdatatest.RequestsOverRun(3, 100, 10, 50, 1e4)
	require.Len(t, chartdata.LTTB(many, 1), 3)
	require.Len(t, chartdata.MinMax(many, 1), 4)
	require.Contains(t, chartdata.MinMax(many, 1), many[50])
}

// FuzzDownsample checks the invariants on arbitrary series (with repeated
// x, negative values, any target).
func FuzzDownsample(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255, 0, 3}, uint16(5))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0}, uint16(3))
	f.Add([]byte{200, 1, 200, 1, 200, 1, 200, 1, 9, 9, 9}, uint16(4))
	f.Fuzz(func(t *testing.T, ys []byte, target uint16) {
		if len(ys) == 0 {
			return
		}
		pts := make([]chartdata.Point, len(ys))
		for i, y := range ys {
			pts[i] = chartdata.Point{float64(i / 3), float64(int(y) - 128)}
		}
		for _, d := range downsamplers {
			out := d.fn(pts, int(target))
			bound := map[string]int{"chartdata.LTTB": 3, "chartdata.MinMax": 4, "chartdata.MinMaxSampled": 8}[d.name]
			bound = max(int(target), bound)
			requireSubsequence(t, pts, out, bound)
			if d.name != "chartdata.LTTB" {
				// The global extremes survive.
				lo, hi := math.Inf(1), math.Inf(-1)
				olo, ohi := math.Inf(1), math.Inf(-1)
				for _, p := range pts {
					lo, hi = min(lo, p.Y), max(hi, p.Y)
				}
				for _, p := range out {
					olo, ohi = min(olo, p.Y), max(ohi, p.Y)
				}
				require.Equal(t, lo, olo)
				require.Equal(t, hi, ohi)
			}
		}
	})
}

// On noisy latencies chartdata.MinMax keeps the edges of the band only; chartdata.MinMaxSampled
// also shows where most requests are.
func TestMinMaxSampledShowsTheBody(t *testing.T) {
	t.Parallel()
	pts := chartdatatest.RequestsOverRun(13, 500_000, 1800, -1, 0)[25_000:] // past the warm-up
	ys := make([]float64, len(pts))
	for i, p := range pts {
		ys[i] = p.Y
	}
	slices.Sort(ys)
	q25, q75 := ys[len(ys)/4], ys[3*len(ys)/4]
	share := func(out []chartdata.Point) float64 {
		in := 0
		for _, p := range out {
			if p.Y >= q25 && p.Y <= q75 {
				in++
			}
		}
		return float64(in) / float64(len(out))
	}
	require.Less(t, share(chartdata.MinMax(pts, 4000)), 0.05)
	require.Greater(t, share(chartdata.MinMaxSampled(pts, 4000)), 0.2)
}
