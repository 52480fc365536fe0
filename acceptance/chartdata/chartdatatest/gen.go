// Package chartdatatest makes synthetic series for the tests and
// benchmarks of chart data and charts, seeded so that every run sees the
// same values.
package chartdatatest

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/accordlab/accord/acceptance/chartdata"
)

// Lognormal returns n latencies (ms) around median, sorted when asked.
func Lognormal(seed uint64, n int, median, sigma float64, sorted bool) []float64 {
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

// RequestsOverRun returns n requests over dur seconds: warm-up (slow
// first 5 %), noise, and one spike of spikeValue at spikeAt (an index).
func RequestsOverRun(seed uint64, n int, dur float64, spikeAt int, spikeValue float64) []chartdata.Point {
	r := rand.New(rand.NewPCG(seed, 2))
	pts := make([]chartdata.Point, n)
	for i := range pts {
		t := dur * float64(i) / float64(n)
		y := 80 * math.Exp(0.3*r.NormFloat64())
		if t < dur*0.05 {
			y *= 3
		}
		pts[i] = chartdata.Point{X: t, Y: y}
	}
	if spikeAt >= 0 {
		pts[spikeAt].Y = spikeValue
	}
	return pts
}

// Telemetry returns n samples over dur seconds of a wave with noise.
func Telemetry(seed uint64, n int, dur, level, amp float64) []chartdata.Point {
	r := rand.New(rand.NewPCG(seed, 3))
	pts := make([]chartdata.Point, n)
	for i := range pts {
		t := dur * float64(i) / float64(n)
		pts[i] = chartdata.Point{X: t, Y: level + amp*math.Sin(t/20) + amp/5*r.NormFloat64()}
	}
	return pts
}

// SortedLatencies returns n sorted latencies around scale, rounded to a
// thousandth (µs resolution for ms: ties happen, as in real records).
func SortedLatencies(seed uint64, n int, scale, sigma float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Round(scale*math.Exp(sigma*r.NormFloat64())*1000) / 1000 // µs resolution: ties happen
	}
	slices.Sort(v)
	return v
}
