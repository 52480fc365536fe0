package chartdata

import (
	"math"
	"slices"
	"time"
)

// WatchCheck is one check of a production watch as it was: its value (if
// the query gave one), the stop-loss line then, whether the value was past
// it, the breaches in a row after the check, and whether the check halted
// the stage.
type WatchCheck struct {
	At        time.Time
	Value     float64
	HasValue  bool
	Line      float64
	PastLine  bool
	Breaches  int
	Triggered bool
}

// WatchChart is what a watch's chart draws: its values over time (every
// value past the line kept, the others reduced to their envelope), the
// line as it was, the breaches in a row at each check (as a step: a point
// where the count changes), and the halts.
type WatchChart struct {
	Values   []WatchValue
	Lines    []WatchLevel // the line in force: where it changes, and at the ends
	Breaches []WatchLevel // breaches in a row: where the count changes, and at the ends
	Halts    []time.Time
	// Top is a height above every finite value and line: where an
	// infinite value is drawn.
	Top float64
	// Counts over every check, reduced or not.
	Checks, WithoutValue, PastLine int
}

// WatchValue is one check's value on the chart.
type WatchValue struct {
	At    time.Time
	Value float64
	Past  bool // past the line: drawn as a breach
	// Infinite: the query answered ±Inf (a histogram quantile past its
	// last bucket); Value is Top (or its negative).
	Infinite bool
}

// WatchLevel is a step function's value from At on.
type WatchLevel struct {
	At    time.Time
	Value float64
}

// DefaultWatchPoints bounds the values a watch chart draws.
const DefaultWatchPoints = 3000

// ReduceWatch makes a watch's chart from its checks (in any order): at
// most maxPoints values (DefaultWatchPoints when 0), or more when more
// than that many checks were past the line, since every breach is drawn.
func ReduceWatch(checks []WatchCheck, maxPoints int) WatchChart {
	if maxPoints <= 0 {
		maxPoints = DefaultWatchPoints
	}
	cs := slices.Clone(checks)
	slices.SortStableFunc(cs, func(a, b WatchCheck) int { return a.At.Compare(b.At) })
	out := WatchChart{Checks: len(cs)}
	top := math.Inf(-1)
	for _, c := range cs {
		if finite(c.Line) {
			top = max(top, c.Line)
		}
		if c.HasValue && finite(c.Value) {
			top = max(top, math.Abs(c.Value))
		}
	}
	if math.IsInf(top, -1) || top <= 0 {
		top = 1
	}
	out.Top = top * 1.2

	var within []Point // X: index into cs
	var past []int
	for i, c := range cs {
		switch {
		case !c.HasValue || math.IsNaN(c.Value):
			out.WithoutValue++
		case c.PastLine:
			out.PastLine++
			past = append(past, i)
		default:
			within = append(within, Point{X: float64(i), Y: c.Value})
		}
		if c.Triggered {
			out.Halts = append(out.Halts, c.At)
		}
		out.Lines = appendLevel(out.Lines, c.At, c.Line)
		out.Breaches = appendLevel(out.Breaches, c.At, float64(c.Breaches))
	}
	if n := len(cs); n > 0 {
		last := cs[n-1]
		out.Lines = closeLevel(out.Lines, last.At)
		out.Breaches = closeLevel(out.Breaches, last.At)
	}
	// The values within the line share what the breaches leave of the
	// budget; infinite ones among them (−Inf under a line to stay above is
	// not past it only when the line is −Inf) are kept as they are.
	budget := max(maxPoints-len(past), 4)
	keep := make([]int, 0, min(len(within), budget)+len(past))
	for _, p := range MinMax(within, budget) {
		keep = append(keep, int(p.X))
	}
	keep = append(keep, past...)
	slices.Sort(keep)
	for _, i := range keep {
		c := cs[i]
		v := WatchValue{At: c.At, Value: c.Value, Past: c.PastLine}
		if math.IsInf(c.Value, 0) {
			v.Infinite = true
			v.Value = math.Copysign(out.Top, c.Value)
		}
		out.Values = append(out.Values, v)
	}
	return out
}

// appendLevel adds a step where the value changes.
func appendLevel(levels []WatchLevel, at time.Time, v float64) []WatchLevel {
	if n := len(levels); n > 0 && levels[n-1].Value == v {
		return levels
	}
	return append(levels, WatchLevel{At: at, Value: v})
}

// closeLevel carries the last step to the last check.
func closeLevel(levels []WatchLevel, at time.Time) []WatchLevel {
	if n := len(levels); n > 0 && levels[n-1].At.Before(at) {
		return append(levels, WatchLevel{At: at, Value: levels[n-1].Value})
	}
	return levels
}
