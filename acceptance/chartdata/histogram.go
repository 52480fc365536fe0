package chartdata

import (
	"math"
	"slices"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
)

// maxHistBuckets bounds one histogram (six decades at ≤ 0.1 % error).
const maxHistBuckets = 8000

// logHistogram buckets one repetition on acceptance/stats' log grid
// (stats.LogBucket).
func logHistogram(m acceptance.Measurement) (LogHistogram, bool) {
	h := LogHistogram{Metric: m.Metric, Step: m.Step, Level: m.Level, Repetition: m.Repetition}
	if len(m.Segments) > 0 {
		// The segments' bucket counts are this grid's.
		s, err := m.Sample()
		if err != nil {
			return h, false
		}
		lo, counts, _ := s.Buckets()
		if len(counts)-1 > maxHistBuckets {
			return h, false
		}
		h.Zero, h.Lo, h.Counts = counts[0], lo, slices.Clone(counts[1:])
		return h, true
	}
	lo, hi := math.MaxInt, math.MinInt
	for _, v := range m.Values {
		if v > 0 && finite(v) {
			b := stats.LogBucket(v)
			lo, hi = min(lo, b), max(hi, b)
		}
	}
	if lo > hi {
		lo, hi = 0, -1
	}
	if hi-lo+1 > maxHistBuckets {
		return h, false
	}
	h.Lo = lo
	h.Counts = make([]int64, hi-lo+1)
	for i, v := range m.Values {
		c := int64(1)
		if m.Counts != nil {
			c = m.Counts[i]
		}
		switch {
		case !finite(v) || c <= 0:
		case v <= 0:
			h.Zero += c
		default:
			h.Counts[stats.LogBucket(v)-lo] += c
		}
	}
	return h, true
}

// HistogramMeasurement turns a stored log histogram back into a
// histogram measurement (each bucket at its representative value, within
// 0.1 % of every sample in it), for the gate engine.
func HistogramMeasurement(h LogHistogram) acceptance.Measurement {
	m := acceptance.Measurement{Metric: h.Metric, Step: h.Step, Level: h.Level, Repetition: h.Repetition,
		Source: acceptance.Source{Tool: "accord", PercentileMethod: "log-bucketed histogram (≤ 0.1 % relative error)"}}
	if h.Zero > 0 {
		m.Values = append(m.Values, 0)
		m.Counts = append(m.Counts, h.Zero)
	}
	for i, c := range h.Counts {
		if c > 0 {
			m.Values = append(m.Values, stats.LogBucketValue(h.Lo+i))
			m.Counts = append(m.Counts, c)
		}
	}
	return m
}
