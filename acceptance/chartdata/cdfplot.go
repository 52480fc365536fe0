package chartdata

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/accordlab/accord/acceptance/stats"
)

// Bin is one histogram bin: Count samples at (or up to) Value.
type Bin struct {
	Value float64
	Count int64
}

// CDFPlot is a distribution as a CDF chart draws it: Points (value, %
// of samples at or below it), thinned to a budget by the ranks of
// thinIndices, and the exact summary of all samples.
type CDFPlot struct {
	Points []Point
	// Whole says every distinct sample is a point: the exact empirical
	// CDF, drawn as steps.
	Whole    bool
	N        int64
	Min, Max float64
	// Quantiles are the nearest-rank values (as the gates compute them)
	// of the quantiles asked for, in their order.
	Quantiles []float64
}

// PlotCDF makes the plot of raw samples (sorted in a copy when they are
// not): at most budget points, the first the curve's start at (min, 0 %),
// each other the top of the CDF's step at the last of equal values.
func PlotCDF(values, quantiles []float64, budget int) (CDFPlot, error) {
	for i, v := range values {
		if !finite(v) {
			return CDFPlot{}, fmt.Errorf("value %d is %v", i, v)
		}
	}
	if !slices.IsSorted(values) {
		values = slices.Clone(values)
		slices.Sort(values)
	}
	n := len(values)
	p := CDFPlot{N: int64(n)}
	if n == 0 {
		return p, nil
	}
	p.Min, p.Max = values[0], values[n-1]
	for _, q := range quantiles {
		p.Quantiles = append(p.Quantiles, values[stats.Rank(q, int64(n))-1])
	}
	share := func(atOrBelow int) float64 { return 100 * float64(atOrBelow) / float64(n) }
	p.Points = make([]Point, 0, min(n+1, budget))
	p.Points = append(p.Points, Point{X: values[0], Y: 0})
	if countDistinct(values, budget-1) >= 0 {
		p.Whole = true
		for i := 0; i < n; {
			i += countAtMost(values[i:], values[i])
			p.Points = append(p.Points, Point{X: values[i-1], Y: share(i)})
		}
		return p, nil
	}
	last := -1
	for _, i := range thinIndices(n, int(stats.Rank(0.99, int64(n)))-1, budget-1) {
		j := i + countAtMost(values[i:], values[i]) - 1 // the last index of the same value
		if j == last {
			continue
		}
		last = j
		p.Points = append(p.Points, Point{X: values[j], Y: share(j + 1)})
	}
	return p, nil
}

// PlotCDFBins makes the plot of histogram bins: at most budget points,
// point i at the value of bin i and the share of samples in bins up to
// it. Bins of equal value are merged, empty ones left out.
func PlotCDFBins(bins []Bin, quantiles []float64, budget int) (CDFPlot, error) {
	bs, cum, err := cumulativeBins(bins)
	if err != nil {
		return CDFPlot{}, err
	}
	var total int64
	if len(cum) > 0 {
		total = cum[len(cum)-1]
	}
	p := CDFPlot{N: total}
	if total == 0 {
		return p, nil
	}
	p.Min, p.Max = bs[0].Value, bs[len(bs)-1].Value
	binOfRank := func(rank int64) int {
		i, _ := slices.BinarySearch(cum, rank)
		return i
	}
	for _, q := range quantiles {
		p.Quantiles = append(p.Quantiles, bs[binOfRank(stats.Rank(q, total))].Value)
	}
	idx := thinIndices(len(bs), binOfRank(stats.Rank(0.99, total)), budget)
	p.Points = make([]Point, len(idx))
	for k, i := range idx {
		p.Points[k] = Point{X: bs[i].Value, Y: 100 * float64(cum[i]) / float64(total)}
	}
	return p, nil
}

// cumulativeBins sorts the non-empty bins by value, merges equal values,
// and counts the samples in bins up to each (cum[i]).
func cumulativeBins(in []Bin) ([]Bin, []int64, error) {
	bs := make([]Bin, 0, len(in))
	for i, b := range in {
		if !finite(b.Value) || b.Count < 0 {
			return nil, nil, fmt.Errorf("bucket %d is (%v, %d)", i, b.Value, b.Count)
		}
		if b.Count > 0 {
			bs = append(bs, b)
		}
	}
	slices.SortStableFunc(bs, func(a, b Bin) int { return cmp.Compare(a.Value, b.Value) })
	merged := bs[:0]
	for _, b := range bs {
		if k := len(merged); k > 0 && merged[k-1].Value == b.Value {
			merged[k-1].Count += b.Count
			continue
		}
		merged = append(merged, b)
	}
	cum := make([]int64, len(merged))
	var total int64
	for i, b := range merged {
		if total > math.MaxInt64-b.Count {
			return nil, nil, errors.New("bucket counts overflow")
		}
		total += b.Count
		cum[i] = total
	}
	return merged, cum, nil
}

// countAtMost is the number of leading values ≤ v (values ascending).
func countAtMost(values []float64, v float64) int {
	i, _ := slices.BinarySearchFunc(values, v, func(e, t float64) int {
		if e <= t {
			return -1
		}
		return 1
	})
	return i
}

// countDistinct counts distinct sorted values, giving up (returning -1)
// past limit, so that a large series costs no full pass.
func countDistinct(values []float64, limit int) int {
	d := 0
	for i := 0; i < len(values); {
		d++
		if d > limit {
			return -1
		}
		i += countAtMost(values[i:], values[i])
	}
	return d
}
