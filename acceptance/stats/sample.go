package stats

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
)

// Sample is a sorted sample: raw values (each seen once) or a weighted one
// (value i seen counts[i] times). It is immutable once built.
type Sample struct {
	values []float64 // ascending
	counts []int64   // nil for raw samples
	cum    []int64   // cum[i] = samples in values[:i]; nil for raw samples
	n      int64
}

// NewSample copies and sorts values (and counts, when not nil) into a Sample.
// Values must be finite; counts must be non-negative and as many as values.
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
		vs := slices.Clone(values)
		slices.Sort(vs)
		return Sample{values: vs, n: int64(len(vs))}, nil
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

func (s *Sample) buildCum() {
	s.cum = make([]int64, len(s.values)+1)
	for i, c := range s.counts {
		s.cum[i+1] = s.cum[i] + c
	}
	s.n = s.cum[len(s.values)]
}

// Merge pools samples into one sorted sample (a k-way merge of sorted runs).
func Merge(samples ...Sample) Sample {
	if len(samples) == 1 {
		return samples[0]
	}
	weighted := false
	total := 0
	for _, s := range samples {
		weighted = weighted || s.counts != nil
		total += len(s.values)
	}
	out := Sample{values: make([]float64, 0, total)}
	if weighted {
		out.counts = make([]int64, 0, total)
	}
	pos := make([]int, len(samples))
	for {
		best := -1
		for i, s := range samples {
			if pos[i] < len(s.values) && (best < 0 || s.values[pos[i]] < samples[best].values[pos[best]]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		s := samples[best]
		v := s.values[pos[best]]
		if !weighted {
			// Copy the run of this sample that stays below every other head.
			limit := math.Inf(1)
			for i, o := range samples {
				if i != best && pos[i] < len(o.values) && o.values[pos[i]] < limit {
					limit = o.values[pos[i]]
				}
			}
			end := pos[best] + 1
			for end < len(s.values) && s.values[end] < limit {
				end++
			}
			out.values = append(out.values, s.values[pos[best]:end]...)
			pos[best] = end
			continue
		}
		c := s.countAt(pos[best])
		pos[best]++
		if k := len(out.values); k > 0 && out.values[k-1] == v {
			out.counts[k-1] += c
			continue
		}
		out.values = append(out.values, v)
		out.counts = append(out.counts, c)
	}
	if weighted {
		out.buildCum()
	} else {
		out.n = int64(len(out.values))
	}
	return out
}

func (s Sample) countAt(i int) int64 {
	if s.counts == nil {
		return 1
	}
	return s.counts[i]
}

// N is the number of samples.
func (s Sample) N() int64 { return s.n }

// Weighted reports whether the sample came from a histogram.
func (s Sample) Weighted() bool { return s.counts != nil }

// Distinct is the number of distinct values (histogram buckets).
func (s Sample) Distinct() int { return len(s.values) }

// ErrEmpty is returned for statistics of an empty sample.
var ErrEmpty = errors.New("stats: empty sample")

// At returns the order statistic X_(rank), rank 1-based and clamped to [1, n].
func (s Sample) At(rank int64) float64 {
	if s.n == 0 {
		return math.NaN()
	}
	rank = min(max(rank, 1), s.n)
	if s.counts == nil {
		return s.values[rank-1]
	}
	// The first bucket whose cumulative count reaches rank.
	i := sort.Search(len(s.values), func(i int) bool { return s.cum[i+1] >= rank })
	return s.values[i]
}

// Quantile is the nearest-rank q-quantile.
func (s Sample) Quantile(q float64) float64 { return s.At(Rank(q, s.n)) }

// Min and Max are the smallest and largest value.
func (s Sample) Min() float64 { return s.At(1) }
func (s Sample) Max() float64 { return s.At(s.n) }

// CountAtMost is the number of samples ≤ x.
func (s Sample) CountAtMost(x float64) int64 {
	i := sort.Search(len(s.values), func(i int) bool { return s.values[i] > x })
	if s.counts == nil {
		return int64(i)
	}
	return s.cum[i]
}

// CountBelow is the number of samples < x.
func (s Sample) CountBelow(x float64) int64 {
	i := sort.SearchFloat64s(s.values, x)
	if s.counts == nil {
		return int64(i)
	}
	return s.cum[i]
}

// Mean is the arithmetic mean (Kahan-compensated, so that pooled and
// per-repetition means agree to the last digits).
func (s Sample) Mean() float64 {
	if s.n == 0 {
		return math.NaN()
	}
	var sum, comp float64
	for i, v := range s.values {
		x := v*float64(s.countAt(i)) - comp
		t := sum + x
		comp = (t - sum) - x
		sum = t
	}
	return sum / float64(s.n)
}

// Variance is the population variance (divisor n), which is the variance of
// one bootstrap draw from the sample.
func (s Sample) Variance() float64 {
	if s.n == 0 {
		return math.NaN()
	}
	m := s.Mean()
	var ss float64
	for i, v := range s.values {
		d := v - m
		ss += d * d * float64(s.countAt(i))
	}
	return ss / float64(s.n)
}

// draw returns one value drawn uniformly from the sample.
func (s Sample) draw(u uint64) float64 {
	if s.counts == nil {
		return s.values[u]
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
