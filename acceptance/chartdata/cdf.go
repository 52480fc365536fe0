package chartdata

import (
	"slices"

	"github.com/accordlab/accord/acceptance/stats"
)

// cdfQuantiles are exact points of every curve.
var cdfQuantiles = []float64{0.5, 0.9, 0.95, 0.99, 0.999}

// CurveOf reduces sorted samples to a curve whose every point is exact
// (see CDFCurve): every sample when they fit; otherwise cdfBody ranks
// spaced evenly up to p99, cdfTail ranks above it thinned as every CDF is
// (tailRanks), and the ranks of the minimum, maximum and percentiles.
func CurveOf(sorted []float64) CDFCurve {
	n := len(sorted)
	if n <= cdfBody+cdfTail {
		return CDFCurve{N: int64(n), Values: slices.Clone(sorted)}
	}
	at := func(r int) float64 { return sorted[r-1] }
	return curveAt(n, at, func(v float64) int { return countAtMost(sorted, v) })
}

// CurveOfSample is CurveOf for a sample too large to sort in memory (one
// kept in segments): the same ranks, each read off the exact samples.
func CurveOfSample(s stats.Sample) CDFCurve {
	n := int(s.N())
	if n <= cdfBody+cdfTail {
		v := make([]float64, n)
		for i := range v {
			v[i] = s.At(int64(i + 1))
		}
		return CDFCurve{N: int64(n), Values: v}
	}
	return curveAt(n, func(r int) float64 { return s.At(int64(r)) }, func(v float64) int { return int(s.CountAtMost(v)) })
}

// curveAt picks the curve's ranks of n sorted samples, reading the value
// of rank r (1-based) with at and the last rank of a value with lastRank.
func curveAt(n int, at func(r int) float64, lastRank func(v float64) int) CDFCurve {
	p99 := int(stats.Rank(0.99, int64(n))) // 1-based
	ranks := make([]int, 0, cdfBody+cdfTail+len(cdfQuantiles)+2)
	ranks = append(ranks, 1, n)
	for _, q := range cdfQuantiles {
		ranks = append(ranks, int(stats.Rank(q, int64(n))))
	}
	ranks = append(ranks, evenRanks(1, p99, cdfBody)...)
	ranks = append(ranks, tailRanks(p99+1, n, cdfTail)...)
	// Each rank moves to the last rank of its value, where the share at or
	// below the value is exact.
	for i, r := range ranks {
		ranks[i] = lastRank(at(r))
	}
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	c := CDFCurve{N: int64(n), Points: make([][2]float64, 0, len(ranks))}
	prev := 0
	for _, r := range ranks {
		c.Points = append(c.Points, [2]float64{at(r), float64(r - prev)})
		prev = r
	}
	return c
}
