package stats

import "math"

// TInterval is Student's t inference on the mean of a few values (one per
// repetition of a rate metric): exact when the values are normal, and a
// fair approximation for throughputs, which rarely are far from it.
type TInterval struct {
	Mean, SE float64
	DF       int
}

// NewTInterval needs at least two values.
func NewTInterval(v []float64) (TInterval, bool) {
	if len(v) < 2 {
		return TInterval{}, false
	}
	n := float64(len(v))
	var m float64
	for _, x := range v {
		m += x
	}
	m /= n
	var ss float64
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	return TInterval{Mean: m, SE: math.Sqrt(ss / (n - 1) / n), DF: len(v) - 1}, true
}

// Lower and Upper are one-sided bounds at confidence 1 − alpha.
func (t TInterval) Lower(alpha float64) float64 {
	return t.Mean - StudentQuantile(1-alpha, float64(t.DF))*t.SE
}

func (t TInterval) Upper(alpha float64) float64 {
	return t.Mean + StudentQuantile(1-alpha, float64(t.DF))*t.SE
}

// PAtMost is the one-sided p-value for "the mean is at most L" (so that
// p ≤ α ⇔ Upper(α) ≤ L); PAtLeast for "at least L"; PAbove for "above L";
// PBelow for "below L". With no spread (SE = 0) the claim is decided by the
// mean alone.
func (t TInterval) PAtMost(l float64) float64  { return t.p(l-t.Mean, true) }
func (t TInterval) PAbove(l float64) float64   { return t.p(t.Mean-l, false) }
func (t TInterval) PAtLeast(l float64) float64 { return t.p(t.Mean-l, true) }
func (t TInterval) PBelow(l float64) float64   { return t.p(l-t.Mean, false) }

// p is the one-sided p-value 1 − T(d/SE) for a margin d by which the mean
// clears the claim; inclusive says whether d = 0 clears it without spread.
func (t TInterval) p(d float64, inclusive bool) float64 {
	if t.SE == 0 {
		if d > 0 || (d == 0 && inclusive) {
			return 0
		}
		return 1
	}
	return 1 - StudentCDF(d/t.SE, float64(t.DF))
}
