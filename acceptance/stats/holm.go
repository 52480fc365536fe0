package stats

import (
	"cmp"
	"slices"
)

// HolmResult is Holm's step-down adjustment of one p-value in a family.
type HolmResult struct {
	// Rank is the position of the p-value in ascending order, 1-based (ties
	// keep their input order).
	Rank int
	// Level is the unadjusted level the p-value is compared with at its
	// rank, α/(m − Rank + 1).
	Level float64
	// Adjusted is the Holm-adjusted p-value, max over ranks j ≤ Rank of
	// min(1, (m − j + 1)·p_(j)); the hypothesis is rejected at family-wise
	// level α exactly when Adjusted ≤ α.
	Adjusted float64
}

// Holm adjusts a family of p-values (Holm 1979): sort ascending, reject
// H_(1), H_(2), … while p_(j) ≤ α/(m − j + 1), and stop at the first that is
// not. It controls the probability of any false rejection at α, whatever
// the dependence between the tests.
func Holm(p []float64, alpha float64) []HolmResult {
	m := len(p)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(p[a], p[b]) })
	out := make([]HolmResult, m)
	running := 0.0
	for j, i := range order {
		factor := float64(m - j)
		running = max(running, min(1, factor*p[i]))
		out[i] = HolmResult{Rank: j + 1, Level: alpha / factor, Adjusted: running}
	}
	return out
}
