package stats

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
)

// Sample is a sample of non-negative or any finite values, in one of two
// forms, immutable once built:
//
//   - raw: the values as given (never copied, never modified), each with
//     the index of its log bucket (HistogramRelativeError), and the count of
//     every bucket. An order statistic is found exactly without sorting:
//     the bucket counts say which bucket holds the rank, and only that
//     bucket's values are sorted. Building costs one logarithm per value,
//     a query one pass over the bucket indices.
//   - weighted: sorted distinct values with counts (histogram input).
//
// Negative values are kept exactly in raw samples but share one bucket, so
// queries among them scan more; Accord's metrics are never negative.
type Sample struct {
	n int64

	// weighted form
	values []float64 // ascending
	counts []int64
	cum    []int64 // cum[i] = samples in values[:i]

	// raw form
	chunks [][]float64 // one per pooled repetition
	idx    [][]int32   // dense bucket of each value
	grid   *grid
	// segments of the raw form kept outside memory (NewSegmentedSample),
	// and what has been read of them
	segs []segPart
	ext  *extState
}

// grid is a dense run of log buckets. Dense bucket 0 holds values ≤ 0 (kept
// exact, only grouped); bucket j ≥ 1 is the log bucket lo + j − 1.
type grid struct {
	lo     int
	counts []int64
	cum    []int64 // cum[j] = samples in buckets [0, j)
}

// NewSample builds a sample from values, or from a histogram when counts is
// not nil (value i seen counts[i] times). Raw values are referenced, not
// copied: the caller must not change them afterwards. Values must be
// finite; counts non-negative and as many as values.
func NewSample(values []float64, counts []int64) (Sample, error) {
	if counts != nil && len(counts) != len(values) {
		return Sample{}, fmt.Errorf("stats: %d values but %d counts", len(values), len(counts))
	}
	for i, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Sample{}, fmt.Errorf("stats: value %d is %v", i, v)
		}
	}
	if counts == nil {
		return newRawSample(values), nil
	}
	type pair struct {
		v float64
		c int64
	}
	ps := make([]pair, 0, len(values))
	for i, v := range values {
		if counts[i] < 0 {
			return Sample{}, fmt.Errorf("stats: count %d is negative", i)
		}
		if counts[i] > 0 {
			ps = append(ps, pair{v, counts[i]})
		}
	}
	slices.SortFunc(ps, func(a, b pair) int { return cmp.Compare(a.v, b.v) })
	s := Sample{values: make([]float64, 0, len(ps)), counts: make([]int64, 0, len(ps))}
	for _, p := range ps {
		if k := len(s.values); k > 0 && s.values[k-1] == p.v {
			s.counts[k-1] += p.c
			continue
		}
		s.values = append(s.values, p.v)
		s.counts = append(s.counts, p.c)
	}
	s.buildCum()
	return s, nil
}

func newRawSample(values []float64) Sample {
	abs := make([]int32, len(values))
	lo, size := bucketSpan(values, abs)
	g := &grid{lo: lo, counts: make([]int64, size)}
	for i, v := range values {
		j := int32(0)
		if v > 0 {
			j = abs[i] - int32(lo) + 1
		}
		abs[i] = j
		g.counts[j]++
	}
	g.buildCum()
	return Sample{n: int64(len(values)), chunks: [][]float64{values}, idx: [][]int32{abs}, grid: g}
}

func (g *grid) buildCum() {
	g.cum = make([]int64, len(g.counts)+1)
	for j, c := range g.counts {
		g.cum[j+1] = g.cum[j] + c
	}
}

func (s *Sample) buildCum() {
	s.cum = make([]int64, len(s.values)+1)
	for i, c := range s.counts {
		s.cum[i+1] = s.cum[i] + c
	}
	s.n = s.cum[len(s.values)]
}

func (s Sample) raw() bool { return s.grid != nil }

// Merge pools samples (the repetitions of a series) into one. Raw samples
// pool without copying values; if any is weighted, the result is weighted.
func Merge(samples ...Sample) Sample {
	if len(samples) == 1 {
		return samples[0]
	}
	allRaw := true
	for _, s := range samples {
		allRaw = allRaw && s.raw()
	}
	if allRaw {
		return mergeRaw(samples)
	}
	var vals []float64
	var counts []int64
	for _, s := range samples {
		w := s.weighted()
		vals = append(vals, w.values...)
		counts = append(counts, w.counts...)
	}
	out, _ := NewSample(vals, counts) // values were checked when each sample was built
	return out
}

func mergeRaw(samples []Sample) Sample {
	var parts []segPart
	for _, x := range samples {
		parts = append(parts, x.segs...)
	}
	return buildRaw(samples, parts)
}

// weighted returns the sample in weighted form (sorting a raw sample).
func (s Sample) weighted() Sample {
	if !s.raw() {
		return s
	}
	var all []float64
	if len(s.segs) > 0 {
		// Every bucket read: the whole sample in memory (only a series
		// pooling segments with a histogram comes here).
		for j := range s.grid.counts {
			if s.grid.counts[j] > 0 {
				all = append(all, s.sortedBucket(int32(j))...)
			}
		}
	} else {
		for _, c := range s.chunks {
			all = append(all, c...)
		}
	}
	slices.Sort(all)
	w := Sample{}
	for _, v := range all {
		if k := len(w.values); k > 0 && w.values[k-1] == v {
			w.counts[k-1]++
			continue
		}
		w.values = append(w.values, v)
		w.counts = append(w.counts, 1)
	}
	w.buildCum()
	return w
}

// N is the number of samples.
func (s Sample) N() int64 { return s.n }

// Weighted reports whether the sample came from a histogram.
func (s Sample) Weighted() bool { return !s.raw() }

// At returns the order statistic X_(rank), rank 1-based and clamped to [1, n].
func (s Sample) At(rank int64) float64 {
	if s.n == 0 {
		return math.NaN()
	}
	rank = min(max(rank, 1), s.n)
	if !s.raw() {
		i := sort.Search(len(s.values), func(i int) bool { return s.cum[i+1] >= rank })
		return s.values[i]
	}
	g := s.grid
	j := sort.Search(len(g.counts), func(j int) bool { return g.cum[j+1] >= rank })
	if len(s.segs) > 0 {
		in := s.sortedBucket(int32(j))
		if in == nil {
			return math.NaN() // a read failed: Err says which
		}
		return in[rank-g.cum[j]-1]
	}
	in := s.memBucketValues(int32(j), nil)
	slices.Sort(in)
	return in[rank-g.cum[j]-1]
}

// memBucketValues appends the in-memory values in dense bucket j to dst.
func (s Sample) memBucketValues(j int32, dst []float64) []float64 {
	for c, idx := range s.idx {
		chunk := s.chunks[c]
		for i, b := range idx {
			if b == j {
				dst = append(dst, chunk[i])
			}
		}
	}
	return dst
}

// Quantile is the nearest-rank q-quantile.
func (s Sample) Quantile(q float64) float64 { return s.At(Rank(q, s.n)) }

// Min and Max are the smallest and largest value.
func (s Sample) Min() float64 { return s.At(1) }
func (s Sample) Max() float64 { return s.At(s.n) }

// CountAtMost is the number of samples ≤ x.
func (s Sample) CountAtMost(x float64) int64 { return s.count(x, true) }

// CountBelow is the number of samples < x.
func (s Sample) CountBelow(x float64) int64 { return s.count(x, false) }

func (s Sample) count(x float64, inclusive bool) int64 {
	if !s.raw() {
		var i int
		if inclusive {
			i = sort.Search(len(s.values), func(i int) bool { return s.values[i] > x })
		} else {
			i = sort.SearchFloat64s(s.values, x)
		}
		return s.cum[i]
	}
	g := s.grid
	j := 0
	if x > 0 {
		j = bucketIndex(x) - g.lo + 1
		switch {
		case j < 1:
			return g.counts[0] // every value ≤ 0 is below any positive x
		case j >= len(g.counts):
			return s.n
		}
	}
	n := g.cum[j]
	if len(s.segs) > 0 {
		in := s.sortedBucket(int32(j))
		if inclusive {
			return n + int64(sort.Search(len(in), func(i int) bool { return in[i] > x }))
		}
		return n + int64(sort.SearchFloat64s(in, x))
	}
	for c, idx := range s.idx {
		chunk := s.chunks[c]
		for i, b := range idx {
			if b == int32(j) && (chunk[i] < x || (inclusive && chunk[i] == x)) {
				n++
			}
		}
	}
	return n
}

// each calls f for every distinct value with its multiplicity.
func (s Sample) each(f func(v float64, c int64)) {
	if s.raw() {
		for _, chunk := range s.chunks {
			for _, v := range chunk {
				f(v, 1)
			}
		}
		return
	}
	for i, v := range s.values {
		f(v, s.counts[i])
	}
}

// Mean is the arithmetic mean (Kahan-compensated, so that pooled and
// per-repetition means agree to the last digits).
func (s Sample) Mean() float64 {
	if s.n == 0 {
		return math.NaN()
	}
	if len(s.segs) > 0 {
		sum, _ := s.segmentedMoments()
		return sum / float64(s.n)
	}
	var sum, comp float64
	s.each(func(v float64, c int64) {
		x := v*float64(c) - comp
		t := sum + x
		comp = (t - sum) - x
		sum = t
	})
	return sum / float64(s.n)
}

// Variance is the population variance (divisor n), which is the variance of
// one bootstrap draw from the sample.
func (s Sample) Variance() float64 {
	if s.n == 0 {
		return math.NaN()
	}
	if len(s.segs) > 0 {
		_, m2 := s.segmentedMoments()
		return m2 / float64(s.n)
	}
	m := s.Mean()
	var ss float64
	s.each(func(v float64, c int64) {
		d := v - m
		ss += d * d * float64(c)
	})
	return ss / float64(s.n)
}

// draw returns the sample's u-th value in its own order (u < n): one
// uniform draw when u is uniform.
func (s Sample) draw(u uint64) float64 {
	if s.raw() {
		for _, chunk := range s.chunks {
			if u < uint64(len(chunk)) {
				return chunk[u]
			}
			u -= uint64(len(chunk))
		}
		return s.drawSegment(u)
	}
	r := int64(u) + 1
	i := sort.Search(len(s.values), func(i int) bool { return s.cum[i+1] >= r })
	return s.values[i]
}

// Rank is the nearest-rank index ⌈q·n⌉ (at least 1) of the q-quantile of n
// samples. q is taken to a resolution of 1e-9, in integer arithmetic, so
// that 0.99 × 1000 is exactly rank 990 and not 991.
func Rank(q float64, n int64) int64 {
	if n <= 0 {
		return 0
	}
	const den = 1_000_000_000
	num := int64(math.Round(q * den))
	num = min(max(num, 0), den)
	// ⌈num·n/den⌉ in 128-bit arithmetic.
	hi, lo := bits.Mul64(uint64(num), uint64(n))
	quo, rem := bits.Div64(hi, lo, den) // hi < den: no panic for any int64 n
	k := int64(quo)
	if rem != 0 {
		k++
	}
	return min(max(k, 1), n)
}
