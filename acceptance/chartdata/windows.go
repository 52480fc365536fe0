package chartdata

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/accordlab/accord/acceptance/stats"
)

// A soak sends millions of requests: past maxExactPoints of a step, its
// latency over the run is kept as windows of the run instead of one point
// per request, so that building the charts takes memory bounded by the
// number of windows, not by the length of the run. Each window keeps its
// request count, its fastest and slowest request, and a log-bucketed
// histogram of every request in it (acceptance/stats' grid coarsened
// to about 1 % relative error), from which the rolling percentile is read; the chart
// data say so.

// maxExactPoints is the most requests of a step kept one point each.
const maxExactPoints = 1 << 20

// maxWindows bounds the windows of a step: when the run outgrows them,
// they are merged in pairs and the width doubles.
const maxWindows = 256

// windowBucketGroup is how many of acceptance/stats' log buckets (0.1 %
// wide) one bucket of a window's histogram spans: about 1 % relative
// error, so that a window holds a few hundred buckets at most.
const windowBucketGroup = 10

func windowBucket(v float64) int {
	return int(math.Floor(float64(stats.LogBucket(v)) / windowBucketGroup))
}

// windowBucketValue is the middle of a window bucket, within 1 % of
// every value in it.
func windowBucketValue(b int) float64 {
	return stats.LogBucketValue(b*windowBucketGroup + windowBucketGroup/2)
}

// latencyWindows aggregates requests (x: seconds of the run, y: latency)
// into windows [k·width, (k+1)·width).
type latencyWindows struct {
	width float64
	wins  map[int64]*latencyWindow
	n     int64
}

type latencyWindow struct {
	n        int64
	min, max Point
	zero     int64
	buckets  map[int]int64 // windowBucket → requests
}

func newLatencyWindows() *latencyWindows {
	return &latencyWindows{width: 1, wins: map[int64]*latencyWindow{}}
}

func (lw *latencyWindows) add(p Point) {
	k := int64(math.Floor(p.X / lw.width))
	w := lw.wins[k]
	if w == nil {
		w = &latencyWindow{min: p, max: p, buckets: map[int]int64{}}
		lw.wins[k] = w
	}
	w.n++
	lw.n++
	if p.Y < w.min.Y {
		w.min = p
	}
	if p.Y > w.max.Y {
		w.max = p
	}
	if p.Y <= 0 {
		w.zero++
	} else {
		w.buckets[windowBucket(p.Y)]++
	}
	if len(lw.wins) > maxWindows {
		lw.coarsen()
	}
}

// coarsen doubles the width until the windows fit, merging them.
func (lw *latencyWindows) coarsen() {
	for len(lw.wins) > maxWindows {
		merged := make(map[int64]*latencyWindow, len(lw.wins)/2+1)
		for k, w := range lw.wins {
			j := int64(math.Floor(float64(k) / 2))
			if m := merged[j]; m != nil {
				m.merge(w)
			} else {
				merged[j] = w
			}
		}
		lw.wins, lw.width = merged, lw.width*2
	}
}

func (w *latencyWindow) merge(o *latencyWindow) {
	w.n += o.n
	w.zero += o.zero
	if o.min.Y < w.min.Y {
		w.min = o.min
	}
	if o.max.Y > w.max.Y {
		w.max = o.max
	}
	for b, c := range o.buckets {
		w.buckets[b] += c
	}
}

// keys are the windows in order.
func (lw *latencyWindows) keys() []int64 { return slices.Sorted(maps.Keys(lw.wins)) }

// extremes are each window's fastest and slowest request, in time order:
// the scatter of a windowed step.
func (lw *latencyWindows) extremes() []Point {
	var out []Point
	for _, k := range lw.keys() {
		w := lw.wins[k]
		out = append(out, w.min)
		if w.max != w.min {
			out = append(out, w.max)
		}
	}
	SortPoints(out)
	return out
}

// rolling is the nearest-rank q-quantile of every rolling window of
// about target seconds (a whole number of windows), read from the
// windows' histograms, at the window's middle; and the width used.
func (lw *latencyWindows) rolling(target, q float64) (float64, []Point) {
	per := max(1, int64(math.Round(target/lw.width)))
	width := float64(per) * lw.width
	groups := map[int64][]*latencyWindow{}
	for k, w := range lw.wins {
		g := int64(math.Floor(float64(k) / float64(per)))
		groups[g] = append(groups[g], w)
	}
	var out []Point
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		var n, zero int64
		counts := map[int]int64{}
		for _, w := range groups[g] {
			n += w.n
			zero += w.zero
			for b, c := range w.buckets {
				counts[b] += c
			}
		}
		rank := stats.Rank(q, n)
		y := 0.0
		if rank > zero {
			seen := zero
			for _, b := range slices.Sorted(maps.Keys(counts)) {
				seen += counts[b]
				if seen >= rank {
					y = windowBucketValue(b)
					break
				}
			}
		}
		out = append(out, Point{X: (float64(g) + 0.5) * width, Y: y})
	}
	return width, out
}

// windowedNote says how a windowed step's latency over the run was made.
func windowedNote(step string, n int64, width float64) string {
	return fmt.Sprintf("step %s: %s requests, more than the %d drawn one by one: its latency over the run is kept in windows of %s s (each window's fastest and slowest request drawn, the rolling p99 read from the windows' log-bucketed histograms, within about 1 %% of the exact value)",
		step, fmtInt(n), maxExactPoints, fmtFloat(width))
}

func fmtInt(n int64) string { return fmt.Sprintf("%d", n) }

func fmtFloat(v float64) string { return fmt.Sprintf("%g", v) }
