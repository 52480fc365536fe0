package stats

import "math"

// HistogramRelativeError bounds |representative − value| / value for every
// positive value put in a log-bucketed histogram: buckets are
// (γ^(i−1), γ^i] with γ = (1+ε)/(1−ε), represented by 2γ^i/(γ+1), so a
// bucket's representative is within ε of every value in it. Zero has a
// bucket of its own; there are about 1,151 buckets per decade.
const HistogramRelativeError = 0.001

var (
	histGamma    = (1 + HistogramRelativeError) / (1 - HistogramRelativeError)
	histLogGamma = math.Log(histGamma)
)

func bucketIndex(v float64) int { return int(math.Ceil(math.Log(v) / histLogGamma)) }

func bucketValue(i int) float64 { return 2 * math.Exp(float64(i)*histLogGamma) / (histGamma + 1) }

// logHistograms puts every repetition on one dense grid of buckets spanning
// the smallest to the largest value of all of them, with a cumulative count
// per repetition, so that the count of any repetition in any range of
// buckets is two lookups.
type logHistograms struct {
	values []float64 // representative value per dense bucket, ascending
	cum    [][]int64 // cum[r][j]: samples of repetition r in buckets [0, j)
}

func newLogHistograms(reps []Sample) logHistograms {
	lo, hi := math.MaxInt, math.MinInt
	zero := false
	for _, s := range reps {
		for _, v := range s.values {
			if v <= 0 { // negative values are rejected before; 0 gets its own bucket
				zero = true
				continue
			}
			i := bucketIndex(v)
			lo, hi = min(lo, i), max(hi, i)
		}
	}
	off := 0
	if zero {
		off = 1
	}
	size := off
	if lo <= hi {
		size += hi - lo + 1
	}
	h := logHistograms{values: make([]float64, size), cum: make([][]int64, len(reps))}
	if zero {
		h.values[0] = 0
	}
	for j := off; j < size; j++ {
		h.values[j] = bucketValue(lo + j - off)
	}
	for r, s := range reps {
		counts := make([]int64, size+1)
		for i, v := range s.values {
			j := 0
			if v > 0 {
				j = bucketIndex(v) - lo + off
			}
			counts[j+1] += s.countAt(i)
		}
		for j := 1; j <= size; j++ {
			counts[j] += counts[j-1]
		}
		h.cum[r] = counts
	}
	return h
}
