package chartdata

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Point is one (x, y) point of a series.
type Point struct{ X, Y float64 }

// SortPoints orders by X, keeping the order of equal X.
func SortPoints(pts []Point) {
	slices.SortStableFunc(pts, func(a, b Point) int { return cmp.Compare(a.X, b.X) })
}

// SortedByX returns pts ordered by X, copying only when they are not.
func SortedByX(pts []Point) []Point {
	for i := 1; i < len(pts); i++ {
		if pts[i].X < pts[i-1].X {
			cp := append([]Point(nil), pts...)
			SortPoints(cp)
			return cp
		}
	}
	return pts
}

// CheckFinite reports the first NaN or infinite value of a series.
func CheckFinite(pts []Point) error {
	for i, p := range pts {
		if !finite(p.X) || !finite(p.Y) {
			return fmt.Errorf("point %d is (%v, %v)", i, p.X, p.Y)
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
