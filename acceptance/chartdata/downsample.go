package chartdata

// Two downsamplers for series ordered by X. Both keep the first and the
// last point, return a subsequence of the input (so X stays monotonic and
// every point shown was measured), and return at most target points.
//
//   - LTTB (largest triangle, three buckets; Steinarsson 2013) keeps one
//     point per bucket, the one that spans the largest triangle with the
//     point kept before and the next bucket's mean: the line's shape
//     survives. Used for throughput and telemetry lines.
//   - MinMax keeps the lowest and the highest point of every bucket, so
//     every extreme of the series survives, whatever its neighbours: a
//     single slow request among a million stays on the chart.
//   - MinMaxSampled spends half its budget as MinMax does and half on an
//     even sample, so that a scatter shows both the extremes and where
//     most points lie. Used for per-request latency, where the tail is
//     what the reader looks for.
//
// Buckets are runs of equal point count (not equal X width), as in LTTB.

// LTTB reduces pts to at most target points (target below 3 counts as 3).
// It returns pts itself when there is nothing to drop.
func LTTB(pts []Point, target int) []Point {
	target = max(target, 3)
	n := len(pts)
	if n <= target {
		return pts
	}
	out := make([]Point, 0, target)
	out = append(out, pts[0])
	every := float64(n-2) / float64(target-2)
	a := 0 // index of the point kept last
	for i := 0; i < target-2; i++ {
		// Mean of the next bucket (the last point for the last bucket).
		nextStart := int(float64(i+1)*every) + 1
		nextEnd := min(int(float64(i+2)*every)+1, n)
		var mx, my float64
		for _, p := range pts[nextStart:nextEnd] {
			mx += p.X
			my += p.Y
		}
		cnt := float64(nextEnd - nextStart)
		mx /= cnt
		my /= cnt

		start := int(float64(i)*every) + 1
		end := int(float64(i+1)*every) + 1
		pa := pts[a]
		best, bestArea := start, -1.0
		for j := start; j < end; j++ {
			p := pts[j]
			// Twice the triangle's area; only the order matters.
			area := (pa.X-mx)*(p.Y-pa.Y) - (pa.X-p.X)*(my-pa.Y)
			if area < 0 {
				area = -area
			}
			if area > bestArea {
				best, bestArea = j, area
			}
		}
		out = append(out, pts[best])
		a = best
	}
	return append(out, pts[n-1])
}

// MinMax reduces pts to at most target points (target below 4 counts as
// 4): the first and the last point, and the minimum and the maximum (by Y)
// of each of (target−2)/2 buckets, in their original order. It returns pts
// itself when there is nothing to drop.
//
// It draws the envelope of a series, not its density: on a scatter of
// noisy latencies the kept points gather at the edges of the band. Use
// MinMaxSampled there.
func MinMax(pts []Point, target int) []Point {
	target = max(target, 4)
	if len(pts) <= target {
		return pts
	}
	return pick(pts, minMaxIndices(pts, target))
}

// MinMaxSampled reduces pts to at most target points (target below 8
// counts as 8) for a scatter: half the budget keeps each bucket's minimum
// and maximum as MinMax does (so spikes and dips survive), the other half
// is an even sample by index (so the body shows where the points are
// dense). It returns pts itself when there is nothing to drop.
func MinMaxSampled(pts []Point, target int) []Point {
	target = max(target, 8)
	n := len(pts)
	if n <= target {
		return pts
	}
	env := minMaxIndices(pts, target/2)
	k := target - len(env)
	even := make([]int, k)
	for i := range even {
		even[i] = int(int64(i) * int64(n-1) / int64(k-1))
	}
	// Merge the two ascending index lists without repeats.
	idx := make([]int, 0, target)
	i, j := 0, 0
	for i < len(env) || j < len(even) {
		var v int
		switch {
		case j == len(even) || i < len(env) && env[i] <= even[j]:
			v = env[i]
			i++
		default:
			v = even[j]
			j++
		}
		if len(idx) == 0 || idx[len(idx)-1] != v {
			idx = append(idx, v)
		}
	}
	return pick(pts, idx)
}

// minMaxIndices is MinMax's choice as ascending indices (target ≥ 4,
// len(pts) > target).
func minMaxIndices(pts []Point, target int) []int {
	n := len(pts)
	buckets := (target - 2) / 2
	inner := n - 2
	out := make([]int, 0, 2+2*buckets)
	out = append(out, 0)
	for b := 0; b < buckets; b++ {
		start := 1 + b*inner/buckets
		end := 1 + (b+1)*inner/buckets
		lo, hi := start, start
		for j := start + 1; j < end; j++ {
			if pts[j].Y < pts[lo].Y {
				lo = j
			}
			if pts[j].Y > pts[hi].Y {
				hi = j
			}
		}
		switch {
		case lo == hi:
			out = append(out, lo)
		case lo < hi:
			out = append(out, lo, hi)
		default:
			out = append(out, hi, lo)
		}
	}
	return append(out, n-1)
}

func pick(pts []Point, idx []int) []Point {
	out := make([]Point, len(idx))
	for k, i := range idx {
		out[k] = pts[i]
	}
	return out
}

// ScatterPoints bounds the stored scatter of one series (web/charts
// draws as many).
const ScatterPoints = 4000
