package charts

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Synthetic data for the tests and benchmarks, seeded so that every run
// sees the same values.

// lognormal returns n latencies (ms) around median, sorted when asked.
func lognormal(seed uint64, n int, median, sigma float64, sorted bool) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float64, n)
	for i := range v {
		v[i] = median * math.Exp(sigma*r.NormFloat64())
	}
	if sorted {
		slices.Sort(v)
	}
	return v
}

// requestsOverRun returns n requests over dur seconds: warm-up (slow
// first 5 %), noise, and one spike of spikeValue at spikeAt (an index).
func requestsOverRun(seed uint64, n int, dur float64, spikeAt int, spikeValue float64) []Point {
	r := rand.New(rand.NewPCG(seed, 2))
	pts := make([]Point, n)
	for i := range pts {
		t := dur * float64(i) / float64(n)
		y := 80 * math.Exp(0.3*r.NormFloat64())
		if t < dur*0.05 {
			y *= 3
		}
		pts[i] = Point{t, y}
	}
	if spikeAt >= 0 {
		pts[spikeAt].Y = spikeValue
	}
	return pts
}

// telemetry returns n samples over dur seconds of a wave with noise.
func telemetry(seed uint64, n int, dur, level, amp float64) []Point {
	r := rand.New(rand.NewPCG(seed, 3))
	pts := make([]Point, n)
	for i := range pts {
		t := dur * float64(i) / float64(n)
		pts[i] = Point{t, level + amp*math.Sin(t/20) + amp/5*r.NormFloat64()}
	}
	return pts
}

// sweep is a concurrency sweep whose latency turns up past c=16.
func sweep(scale float64) []KneePoint {
	var out []KneePoint
	for _, c := range []int{1, 2, 4, 8, 16, 32, 64} {
		tp := scale * 100 * float64(c) / (1 + float64(c)/24)
		lat := 300 + 20*float64(c)
		if c > 16 {
			lat *= float64(c) / 8
		}
		out = append(out, KneePoint{Concurrency: c, Throughput: tp, Latency: lat})
	}
	return out
}

var trendStart = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func trendSeries(host string, n int, base float64) TrendSeries {
	s := TrendSeries{Host: host}
	for i := range n {
		s.Points = append(s.Points, TrendPoint{
			Time:  trendStart.Add(time.Duration(i) * 26 * time.Hour),
			Value: base + 40*math.Sin(float64(i)),
			RunID: "run " + string(rune('A'+i)),
		})
	}
	return s
}
