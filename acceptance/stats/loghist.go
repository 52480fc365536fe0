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

// LogBucket is the bucket of a value v > 0 on the log grid: ⌈ln v / ln γ⌉.
// Chart data keep histograms on this grid (acceptance/chartdata).
func LogBucket(v float64) int { return bucketIndex(v) }

// LogBucketValue is the representative value of bucket i, within
// HistogramRelativeError of every value in it.
func LogBucketValue(i int) float64 { return bucketValue(i) }

// logHistograms puts every repetition on one dense grid of buckets spanning
// the smallest to the largest value of all of them, with a cumulative count
// per repetition, so that the count of any repetition in any range of
// buckets is two lookups. Dense bucket 0 holds values ≤ 0.
type logHistograms struct {
	values []float64 // representative value per dense bucket, ascending
	cum    [][]int64 // cum[r][j]: samples of repetition r in buckets [0, j)
}

func newLogHistograms(reps []Sample) logHistograms {
	// Each repetition's bucket counts; raw samples have them already.
	hs := make([]bucketCounts, len(reps))
	lo, hi := math.MaxInt, math.MinInt
	for r, s := range reps {
		if s.raw() {
			hs[r] = bucketCounts{s.grid.lo, s.grid.counts}
		} else {
			hs[r] = weightedHist(s)
		}
		if len(hs[r].counts) > 1 {
			lo = min(lo, hs[r].lo)
			hi = max(hi, hs[r].lo+len(hs[r].counts)-2)
		}
	}
	size := 1
	if lo <= hi {
		size += hi - lo + 1
	} else {
		lo = 0
	}
	h := logHistograms{values: make([]float64, size), cum: make([][]int64, len(reps))}
	for j := 1; j < size; j++ {
		h.values[j] = bucketValue(lo + j - 1)
	}
	for r, x := range hs {
		cum := make([]int64, size+1)
		cum[1] = x.counts[0]
		shift := x.lo - lo
		for j := 1; j < len(x.counts); j++ {
			cum[j+shift+1] = x.counts[j]
		}
		for j := 1; j <= size; j++ {
			cum[j] += cum[j-1]
		}
		h.cum[r] = cum
	}
	return h
}

// bucketCounts are counts of the dense buckets from absolute log bucket lo
// on, with [0] for values ≤ 0.
type bucketCounts struct {
	lo     int
	counts []int64
}

// bucketSpan writes the absolute log bucket of each positive value to abs
// (when given) and returns the first bucket and how many dense buckets a
// grid from it needs, [0] being for values ≤ 0.
func bucketSpan(values []float64, abs []int32) (lo, size int) {
	lo, hi := math.MaxInt, math.MinInt
	for i, v := range values {
		if v > 0 {
			b := bucketIndex(v)
			if abs != nil {
				abs[i] = int32(b)
			}
			lo, hi = min(lo, b), max(hi, b)
		}
	}
	if lo > hi {
		return 0, 1
	}
	return lo, hi - lo + 2
}

// weightedHist buckets a weighted sample's values on the log grid.
func weightedHist(s Sample) (out bucketCounts) {
	lo, size := bucketSpan(s.values, nil)
	out.lo, out.counts = lo, make([]int64, size)
	for i, v := range s.values {
		j := 0
		if v > 0 {
			j = bucketIndex(v) - lo + 1
		}
		out.counts[j] += s.counts[i]
	}
	return out
}
