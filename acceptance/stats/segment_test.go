package stats

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// memSegments keeps grouped segments in memory and counts what is read.
type memSegments struct {
	grouped [][]float64
	read    int64
	fail    bool
}

func (m *memSegments) ReadRanges(rs []SegmentRange) ([][]float64, error) {
	if m.fail {
		return nil, errors.New("the segment store is gone")
	}
	out := make([][]float64, len(rs))
	for i, r := range rs {
		out[i] = slices.Clone(m.grouped[r.Segment][r.Offset : r.Offset+r.Count])
		m.read += r.Count
	}
	return out, nil
}

// segmentsOf groups values in segments of size values each.
func segmentsOf(t *testing.T, values []float64, size int) ([]Segment, *memSegments) {
	t.Helper()
	store := &memSegments{}
	var segs []Segment
	for i := 0; i < len(values); i += size {
		part := values[i:min(i+size, len(values))]
		grouped := make([]float64, len(part))
		seg, err := GroupSegment(part, grouped, nil)
		require.NoError(t, err)
		seg.Reader, seg.Index = store, len(store.grouped)
		store.grouped = append(store.grouped, grouped)
		segs = append(segs, seg)
	}
	return segs, store
}

func lognormalValues(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		switch r.IntN(20) {
		case 0:
			v[i] = 0
		case 1:
			v[i] = 100 * (1 + 1e-5*float64(r.IntN(5))) // many values in one bucket
		default:
			v[i] = math.Exp(4 + r.NormFloat64())
		}
	}
	return v
}

// A sample kept in segments answers every query as the same values in
// memory do, exactly, reading only the buckets the queries need.
func TestSegmentedSampleMatchesInMemory(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(31, 32))
	for trial := range 20 {
		n := 1 + r.IntN(20000)
		v := lognormalValues(r, n)
		mem, err := NewSample(v, nil)
		require.NoError(t, err)
		segs, store := segmentsOf(t, v, 1+r.IntN(5000))
		seg, err := NewSegmentedSample(segs)
		require.NoError(t, err)
		require.True(t, seg.Segmented())
		require.Equal(t, mem.N(), seg.N())
		for range 20 {
			k := 1 + r.Int64N(int64(n))
			require.Equal(t, mem.At(k), seg.At(k), "trial %d rank %d", trial, k)
			x := v[r.IntN(n)] * (1 + 1e-7*float64(r.IntN(3)-1))
			require.Equal(t, mem.CountAtMost(x), seg.CountAtMost(x), "trial %d x %v", trial, x)
			require.Equal(t, mem.CountBelow(x), seg.CountBelow(x), "trial %d x %v", trial, x)
		}
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
			require.Equal(t, mem.Quantile(q), seg.Quantile(q))
			for _, d := range Definitions {
				a, err := mem.Percentile(d, 100*q)
				require.NoError(t, err)
				b, err := seg.Percentile(d, 100*q)
				require.NoError(t, err)
				require.Equal(t, a, b, "%s p%v", d, 100*q)
			}
		}
		require.InEpsilon(t, mem.Mean(), seg.Mean(), 1e-12)
		require.InEpsilon(t, mem.Variance(), seg.Variance(), 1e-9)
		lo, counts, _ := mem.Buckets()
		slo, scounts, _ := seg.Buckets()
		require.Equal(t, lo, slo)
		require.Equal(t, counts, scounts)
		require.Less(t, store.read, int64(n)*2, "reads buckets, not the whole sample each time")
		require.NoError(t, seg.Err())
	}
}

// Pooling segmented repetitions (and an in-memory one) is pooling their
// values; the bootstrap of a quantile draws the same replicates from the
// segments as from the values, since both are the same bucket counts.
func TestSegmentedSamplesPoolAndResample(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(41, 42))
	var memReps, segReps []Sample
	var all []float64
	for i := range 3 {
		v := lognormalValues(r, 5000+r.IntN(5000))
		all = append(all, v...)
		m, err := NewSample(v, nil)
		require.NoError(t, err)
		memReps = append(memReps, m)
		if i == 2 {
			segReps = append(segReps, m) // one repetition in memory
			continue
		}
		segs, _ := segmentsOf(t, v, 3000)
		s, err := NewSegmentedSample(segs)
		require.NoError(t, err)
		segReps = append(segReps, s)
	}
	pm, ps := Merge(memReps...), Merge(segReps...)
	slices.Sort(all)
	require.Equal(t, int64(len(all)), ps.N())
	for range 200 {
		k := 1 + r.IntN(len(all))
		require.Equal(t, all[k-1], ps.At(int64(k)))
	}
	require.InEpsilon(t, pm.Mean(), ps.Mean(), 1e-12)
	require.InEpsilon(t, pm.Variance(), ps.Variance(), 1e-9)

	sm, err := NewSide(memReps)
	require.NoError(t, err)
	ss, err := NewSide(segReps)
	require.NoError(t, err)
	seed := [32]byte{7}
	require.Equal(t, Replicates(NewRand(seed), sm, StatQuantile(0.99), 500), Replicates(NewRand(seed), ss, StatQuantile(0.99), 500))
	require.Equal(t, sm.GridQuantile(0.99), ss.GridQuantile(0.99))
	mm := Replicates(NewRand(seed), sm, StatMean, 500)
	ms := Replicates(NewRand(seed), ss, StatMean, 500)
	for i := range mm {
		require.InEpsilon(t, mm[i], ms[i], 1e-9)
	}
}

// The segment keeps the values' digest and moments in input order, and
// groups them by bucket.
func TestGroupSegment(t *testing.T) {
	t.Parallel()
	v := []float64{5, 0, 1, 5.001, 2, 1}
	grouped := make([]float64, len(v))
	seg, err := GroupSegment(v, grouped, nil)
	require.NoError(t, err)
	require.Equal(t, []float64{0, 1, 1, 2, 5, 5.001}, grouped)
	require.Equal(t, int64(6), seg.N)
	m, err := NewSample(v, nil)
	require.NoError(t, err)
	require.Equal(t, m.Mean()*6, seg.Sum, "summed as Sample.Mean sums")
	require.Equal(t, LogBucket(1), seg.Lo)
	require.Equal(t, int64(1), seg.Counts[0])
	require.Equal(t, int64(2), seg.Counts[1])
	require.Equal(t, valuesDigest(v), seg.Digest)
	require.NotEqual(t, valuesDigest(grouped), seg.Digest, "the digest is of the input order")

	_, err = GroupSegment([]float64{1, math.Inf(1)}, make([]float64, 2), nil)
	require.ErrorContains(t, err, "value 1 is +Inf")
}

// A read that fails is an error of the sample, never a silent figure.
func TestSegmentedSampleReadError(t *testing.T) {
	t.Parallel()
	segs, store := segmentsOf(t, lognormalValues(rand.New(rand.NewPCG(5, 6)), 1000), 400)
	s, err := NewSegmentedSample(segs)
	require.NoError(t, err)
	store.fail = true
	require.True(t, math.IsNaN(s.Quantile(0.5)))
	require.ErrorContains(t, s.Err(), "the segment store is gone")
}
