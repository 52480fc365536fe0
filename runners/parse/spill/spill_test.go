package spill

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance/stats"
)

// Up to the limit the values stay in memory as they came; past it every
// one of them is in segments in the file, and the sample read from there
// gives the same figures as the values in memory, exactly.
func TestSamplesSpillPastTheLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := NewFile(dir)
	defer f.Close()
	r := rand.New(rand.NewPCG(3, 4))
	values := make([]float64, stats.InMemoryLimit+stats.SegmentSize/3)
	for i := range values {
		values[i] = math.Exp(4 + r.NormFloat64())
	}

	small, big := f.NewSamples(10), f.NewSamples(10)
	secOf := func(i int) int32 { return int32(i / 1000) }
	for i, v := range values {
		if i < stats.InMemoryLimit {
			small.Add(v, secOf(i))
		}
		big.Add(v, secOf(i))
	}
	kept, secs, segs, err := small.Finish()
	require.NoError(t, err)
	require.Nil(t, segs)
	require.Equal(t, values[:stats.InMemoryLimit], kept, "at the limit nothing changes")
	require.Len(t, secs, stats.InMemoryLimit)
	require.Equal(t, secOf(stats.InMemoryLimit-1), secs[stats.InMemoryLimit-1])

	kept, secs, segs, err = big.Finish()
	require.NoError(t, err)
	require.Nil(t, kept)
	require.Nil(t, secs, "segments keep no send times")
	require.Len(t, segs, 2)
	require.Equal(t, int64(stats.SegmentSize), segs[0].N)
	require.Equal(t, int64(len(values)), big.Len())

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the file is unlinked at once")

	mem, err := stats.NewSample(values, nil)
	require.NoError(t, err)
	seg, err := stats.NewSegmentedSample(segs)
	require.NoError(t, err)
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		require.Equal(t, mem.Quantile(q), seg.Quantile(q), "q %v", q)
		require.Equal(t, sorted[stats.Rank(q, int64(len(sorted)))-1], seg.Quantile(q))
	}
	x := sorted[len(sorted)/3]
	require.Equal(t, mem.CountAtMost(x), seg.CountAtMost(x))
	require.InEpsilon(t, mem.Mean(), seg.Mean(), 1e-12)
	require.NoError(t, seg.Err())

	raw, err := f.SegmentBytes(1)
	require.NoError(t, err)
	require.Len(t, raw, 8*int(segs[1].N))

	require.NoError(t, f.Close())
	fresh, err := stats.NewSegmentedSample(segs)
	require.NoError(t, err)
	require.True(t, math.IsNaN(fresh.Quantile(0.5)))
	require.ErrorContains(t, fresh.Err(), "closed")
}

// A value that is not finite fails the import, not a figure later.
func TestSamplesRefuseNonFinite(t *testing.T) {
	t.Parallel()
	f := NewFile(t.TempDir())
	defer f.Close()
	s := f.NewSamples(0)
	for i := range stats.SegmentSize + 1 {
		v := float64(i)
		if i == 17 {
			v = math.NaN()
		}
		s.Add(v, 0)
	}
	_, _, _, err := s.Finish()
	require.ErrorContains(t, err, "value 17 is NaN")
}
