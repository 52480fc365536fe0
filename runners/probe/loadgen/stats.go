package loadgen

import (
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// Histograms hold microseconds from 1 µs to one hour with three significant
// digits (0.1 % relative error), about 180 KiB each whatever the count.
const histMaxMicros = int64(3600 * 1e6)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, histMaxMicros, 3) }

func recordNanos(h *hdrhistogram.Histogram, ns int64) {
	us := ns / 1000
	if us < 0 {
		us = 0
	}
	if us > histMaxMicros {
		us = histMaxMicros
	}
	_ = h.RecordValue(us) // in range by construction
}

// stats aggregates completed requests: the current interim window and the
// measured part of the level. One lock per completed request.
type stats struct {
	mu sync.Mutex

	windowStart int64
	wTTFT       *hdrhistogram.Histogram
	wTPOT       *hdrhistogram.Histogram
	wITL        *hdrhistogram.Histogram
	wE2EL       *hdrhistogram.Histogram
	wOK         int64
	wFailed     int64
	wOutTokens  int64

	itl           *hdrhistogram.Histogram // measured, successful requests
	ttft          *hdrhistogram.Histogram // measured, successful requests: what the self-check holds the client's delays against
	succeeded     int64
	failed        int64
	warmupDropped int64
	usageMissing  int64
	lastDone      int64
}

func newStats() *stats {
	return &stats{
		wTTFT: newHist(), wTPOT: newHist(), wITL: newHist(), wE2EL: newHist(),
		itl: newHist(), ttft: newHist(),
	}
}

// add accounts for one finished request; itl holds its inter-token gaps.
func (s *stats) add(r *wire.RequestRecord, itl []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Warmup {
		s.warmupDropped++
		return
	}
	if r.Done > s.lastDone {
		s.lastDone = r.Done
	}
	if r.ErrorKind != "" {
		s.failed++
		s.wFailed++
		return
	}
	s.succeeded++
	s.wOK++
	s.wOutTokens += int64(r.OutputTokens)
	if r.UsageCounted {
		s.usageMissing++
	}
	e2el := r.Done - r.Sent
	recordNanos(s.wE2EL, e2el)
	if r.FirstToken > 0 {
		ttft := r.FirstToken - r.Sent
		recordNanos(s.wTTFT, ttft)
		recordNanos(s.ttft, ttft)
		if r.OutputTokens > 1 {
			recordNanos(s.wTPOT, (e2el-ttft)/int64(r.OutputTokens-1))
		}
	}
	for _, gap := range itl {
		recordNanos(s.wITL, gap)
		recordNanos(s.itl, gap)
	}
}

// interim returns the statistics of the window ending at now and starts a
// new window.
func (s *stats) interim(now int64, level string) wire.Interim {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := float64(now-s.windowStart) / 1e9
	out := wire.Interim{Level: level, WindowSec: sec, Metrics: map[string]wire.InterimStats{
		acceptance.MetricTTFT: histStats(s.wTTFT),
		acceptance.MetricTPOT: histStats(s.wTPOT),
		acceptance.MetricITL:  histStats(s.wITL),
		acceptance.MetricE2EL: histStats(s.wE2EL),
	}}
	completed := s.wOK + s.wFailed
	rate := func(v float64) *float64 { return &v }
	if sec > 0 {
		out.Metrics[acceptance.MetricRequestThroughput] = wire.InterimStats{N: s.wOK, Rate: rate(float64(s.wOK) / sec)}
		out.Metrics[acceptance.MetricOutputTokenThroughput] = wire.InterimStats{N: s.wOK, Rate: rate(float64(s.wOutTokens) / sec)}
	}
	errRate := 0.0
	if completed > 0 {
		errRate = float64(s.wFailed) / float64(completed)
	}
	out.Metrics[acceptance.MetricErrorRate] = wire.InterimStats{N: completed, Rate: rate(errRate)}
	for _, h := range []*hdrhistogram.Histogram{s.wTTFT, s.wTPOT, s.wITL, s.wE2EL} {
		h.Reset()
	}
	s.wOK, s.wFailed, s.wOutTokens = 0, 0, 0
	s.windowStart = now
	return out
}

// histStats summarises a histogram of microseconds in milliseconds.
func histStats(h *hdrhistogram.Histogram) wire.InterimStats {
	n := h.TotalCount()
	if n == 0 {
		return wire.InterimStats{}
	}
	// Percentiles are the upper ends of their buckets (conservative).
	q := h.ValueAtPercentilesSlice([]float64{50, 95, 99})
	return wire.InterimStats{
		N:    n,
		Mean: h.Mean() / 1000,
		P50:  float64(q[0]) / 1000,
		P95:  float64(q[1]) / 1000,
		P99:  float64(q[2]) / 1000,
		Max:  float64(h.Max()) / 1000,
	}
}

// buckets lists the histogram's non-empty buckets: upper value in ms, count.
func buckets(h *hdrhistogram.Histogram) []wire.HistogramBucket {
	var out []wire.HistogramBucket
	for _, bar := range h.Distribution() {
		if bar.Count == 0 {
			continue
		}
		out = append(out, wire.HistogramBucket{Value: float64(bar.To) / 1000, Count: bar.Count})
	}
	return out
}

// ttftPercentiles returns the level's measured TTFT p50 and p99 in ms, and
// whether any request had a first token.
func (s *stats) ttftPercentiles() (p50, p99 float64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ttft.TotalCount() == 0 {
		return 0, 0, false
	}
	return usToMs(s.ttft.ValueAtQuantile(50)), usToMs(s.ttft.ValueAtQuantile(99)), true
}
