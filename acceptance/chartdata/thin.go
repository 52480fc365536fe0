package chartdata

import "math"

// The one way a CDF is thinned for drawing, shared by the curves stored
// at ingest (curveAt) and those drawn from samples or bins (thinIndices):
// the body spaced evenly, the tail above p99 whole while it fits, else its
// extreme half whole and the rest spaced geometrically towards p99, so
// that the slowest requests are never averaged away.

// evenRanks spreads count integers evenly over [first, last], both ends
// included: every integer when they fit.
func evenRanks(first, last, count int) []int {
	span := last - first + 1
	switch {
	case span <= 0 || count <= 0:
		return nil
	case span <= count:
		return rangeOf(first, last)
	case count == 1:
		return []int{first}
	}
	out := make([]int, count)
	for k := range out {
		out[k] = first + k*(last-first)/(count-1)
	}
	return out
}

// tailRanks picks at most budget distinct integers of [first, last],
// ascending: every one when they fit; otherwise the last budget/2 and the
// rest at geometrically spaced distances from last, from first on.
func tailRanks(first, last, budget int) []int {
	size := last - first + 1
	if size <= budget {
		return rangeOf(first, last)
	}
	exact := budget / 2
	spaced := budget - exact
	far, near := float64(size-1), float64(exact)
	out := make([]int, 0, budget)
	next := first // the least rank not yet taken
	for k := range spaced {
		f := 0.0
		if spaced > 1 {
			f = float64(k) / float64(spaced-1)
		}
		r := last - int(math.Round(far*math.Pow(near/far, f)))
		if r < next {
			continue // rounding gave a rank already taken
		}
		out = append(out, r)
		next = r + 1
	}
	for r := max(last-exact+1, next); r <= last; r++ {
		out = append(out, r)
	}
	return out
}

// thinIndices chooses at most budget of the indices 0..m−1, ascending,
// always 0 and m−1. Indices from tailStart on (above p99) get up to three
// quarters of the budget (tailRanks), the body the rest (evenRanks).
func thinIndices(m, tailStart, budget int) []int {
	if m <= budget {
		return rangeOf(0, m-1)
	}
	tailStart = min(max(tailStart, 1), m-1)
	tailBudget := min(m-tailStart, budget-budget/4)
	out := evenRanks(0, tailStart-1, budget-tailBudget)
	return append(out, tailRanks(tailStart, m-1, tailBudget)...)
}

// rangeOf is first, first+1, …, last.
func rangeOf(first, last int) []int {
	out := make([]int, 0, max(last-first+1, 0))
	for r := first; r <= last; r++ {
		out = append(out, r)
	}
	return out
}
