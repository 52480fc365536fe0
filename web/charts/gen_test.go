package charts

import (
	"github.com/accordlab/accord/acceptance/chartdata/chartdatatest"
	"math"
	"time"
)

// Synthetic data for the tests and benchmarks, seeded so that every run
// sees the same values.

// The generators are chartdatatest's, shared with acceptance/chartdata.
var (
	lognormal       = chartdatatest.Lognormal
	requestsOverRun = chartdatatest.RequestsOverRun
	telemetry       = chartdatatest.Telemetry
)

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
