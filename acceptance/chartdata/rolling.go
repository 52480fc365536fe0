package chartdata

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/accordlab/accord/acceptance/stats"
)

// RollingQuantile computes the rolling line of web/charts' LatencyOverRun
// for one series from all of its points (any order; pts is not changed): the
// nearest-rank q-quantile (0.99 when 0) of each window of width window
// seconds (AutoWindow's choice when 0) that has points, at the window's
// middle. It returns the window used, for OverRunInput.Window.
func RollingQuantile(pts []Point, window, q float64) (float64, []Point, error) {
	if q == 0 {
		q = 0.99
	}
	if !(q > 0 && q <= 1) {
		return 0, nil, fmt.Errorf("chartdata: rolling quantile: quantile %v", q)
	}
	if err := CheckFinite(pts); err != nil {
		return 0, nil, fmt.Errorf("chartdata: rolling quantile: %w", err)
	}
	if len(pts) == 0 {
		return max(window, 1), nil, nil
	}
	sorted := SortedByX(pts)
	t0, t1 := sorted[0].X, sorted[len(sorted)-1].X
	if window <= 0 {
		window = AutoWindow(t1-t0, len(sorted))
	}
	if !finite(window) {
		return 0, nil, fmt.Errorf("chartdata: rolling quantile: window %v", window)
	}
	return window, WindowQuantile(sorted, t0, window, q), nil
}

// AutoWindow picks a round window width: about 120 windows over the run,
// widened so that a window holds about 100 requests when the run has
// fewer than 12,000.
func AutoWindow(span float64, perSeries int) float64 {
	if span <= 0 {
		return 1
	}
	w := span / 120
	if perSeries > 0 {
		w = max(w, span*100/float64(perSeries))
	}
	return ceil125(min(w, span))
}

// ceil125 rounds up to 1, 2 or 5 times a power of ten.
func ceil125(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5} {
		if v <= m*p*(1+1e-12) {
			return m * p
		}
	}
	return 10 * p
}

// WindowQuantile is the nearest-rank q-quantile of each window
// [t0 + k·w, t0 + (k+1)·w) that has requests, placed at the window's
// middle. pts are ordered by X.
func WindowQuantile(pts []Point, t0, w, q float64) []Point {
	var out []Point
	var buf []float64
	for i := 0; i < len(pts); {
		k := math.Floor((pts[i].X - t0) / w)
		end := t0 + (k+1)*w
		buf = buf[:0]
		for ; i < len(pts) && pts[i].X < end; i++ {
			buf = append(buf, pts[i].Y)
		}
		if len(buf) == 0 { // rounding at a window edge
			buf = append(buf, pts[i].Y)
			i++
		}
		r := int(stats.Rank(q, int64(len(buf)))) - 1
		out = append(out, Point{t0 + (k+0.5)*w, selectKth(buf, r)})
	}
	return out
}

// selectKth returns the k-th smallest of v (0-based), reordering v:
// quickselect, expected linear time (a window's p99 needs no full sort),
// falling back to sorting what is left if the partitions stay uneven.
func selectKth(v []float64, k int) float64 {
	lo, hi := 0, len(v)-1
	for budget := 2 * bits.Len(uint(len(v))); lo < hi; budget-- {
		if budget == 0 {
			slices.Sort(v[lo : hi+1])
			break
		}
		// Median of three as pivot, moved to hi.
		mid := lo + (hi-lo)/2
		if v[mid] < v[lo] {
			v[mid], v[lo] = v[lo], v[mid]
		}
		if v[hi] < v[lo] {
			v[hi], v[lo] = v[lo], v[hi]
		}
		if v[mid] < v[hi] {
			v[mid], v[hi] = v[hi], v[mid]
		}
		pivot := v[hi]
		// Lomuto partition: v[lo:p] < pivot ≤ v[p:hi].
		p := lo
		for i := lo; i < hi; i++ {
			if v[i] < pivot {
				v[i], v[p] = v[p], v[i]
				p++
			}
		}
		v[p], v[hi] = v[hi], v[p]
		switch {
		case k < p:
			hi = p - 1
		case k > p:
			lo = p + 1
		default:
			return v[k]
		}
	}
	return v[k]
}
