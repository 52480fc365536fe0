package acceptance

import (
	"cmp"
	"fmt"
	"slices"
)

// ClientHealth is what the probe measured of its own load generator during
// one level: a measurement where the client, not the server, set the tail
// is worthless, so such a level is flagged and its criteria are not
// judged unless the gate set accepts it.
type ClientHealth struct {
	OpenLoop bool
	// LatenessP99Ms is how late the open loop dispatched requests against
	// their intended send times (p99).
	LatenessP99Ms float64
	// TickDelayP99Ms is how late a 10 ms ticker goroutine woke (p99), over
	// Ticks ticks.
	TickDelayP99Ms float64
	Ticks          int64
	// ProbeCPUPct is the probe's CPU time over the level's wall time and
	// the CPUs it may run on.
	ProbeCPUPct float64
	// ProbeRunQueuePct is the time its threads waited runnable, summed
	// over threads, over the wall time; nil where the host does not say.
	ProbeRunQueuePct *float64
	// The host's CPU busy share and CPU pressure (PSI "some": the share of
	// the level during which some task waited for a CPU).
	HostCPUBusyPct     *float64
	HostCPUPressurePct *float64
	// TTFTP50Ms and TTFTP99Ms are the level's own TTFT, which the client's
	// delays are held against; nil where the level measured none.
	TTFTP50Ms, TTFTP99Ms *float64
}

// The limits of a healthy client. Each of the client's delays is held to
// an absolute limit, and, where the level measured TTFT, to a share of
// it: a delay that is large next to the server's own response time means
// the client, not the server, may have set the tail, however small it is
// in absolute terms.
//
//   - Dispatch lateness: the open loop sent requests late by more than
//     half a typical TTFT (p99 lateness against p50 TTFT), so the load the
//     server saw is not the load that was planned at the scale of its
//     response time.
//   - Wake-up delay: a goroutine of the probe that waits on the network
//     wakes as late as its ticker does, and that delay is added to the TTFT
//     it measures; a ticker p99 over half the TTFT p99 means half the
//     measured tail may be the probe's own.
//   - Host saturation: with the host's CPU pressure at or above 90 % (some
//     task waited for a CPU nearly all the time), the probe's delays are
//     systematic rather than occasional, and a quarter of the TTFT p99 is
//     enough.
//   - No relative limit is below 5 ms: under that, a ticker's delay is its
//     timer's granularity and the scheduler's ordinary latency.
//
// The absolute limits sit well above what a probe meets on a busy machine:
// on the 2-core development machine shared by a dozen test processes (CPU
// pressure 80-99 %), an open loop of 200 requests per second was
// dispatched up to p99 62 ms late, a ticker woke up to p99 51 ms late, and
// the probe's threads waited runnable up to 58 % of the time; a probe
// pinned to a core with two busy processes and lowered priority was 1.7 s
// late at p99, its ticker 1.8 s, its threads waiting 199 %. The relative
// limits flag what the absolute ones cannot see: the recorded lab run
// handlers/testdata/labruns/local-2 had a TTFT p99 of 25 ms at c=4, its
// ticker woke 28 ms late at p99, with the host's CPU pressure at 93 %.
const (
	// ClientLateLimitMs: the open loop's p99 dispatch lateness.
	ClientLateLimitMs = 100.0
	// ClientTickLimitMs: the ticker's p99 wake-up delay.
	ClientTickLimitMs = 150.0
	// ClientCPULimitPct: the probe's share of the CPUs it may run on.
	ClientCPULimitPct = 90.0
	// ClientRunQueueLimitPct: its threads' run-queue wait over the wall
	// time (100 % is one thread always waiting).
	ClientRunQueueLimitPct = 150.0
	// ClientLateTTFTShare: p99 lateness against the level's p50 TTFT.
	ClientLateTTFTShare = 0.5
	// ClientTickTTFTShare: p99 wake-up delay against the level's p99 TTFT.
	ClientTickTTFTShare = 0.5
	// ClientSaturatedTickTTFTShare replaces ClientTickTTFTShare when the
	// host's CPU pressure is at least ClientHostPressurePct.
	ClientSaturatedTickTTFTShare = 0.25
	ClientHostPressurePct        = 90.0
	// ClientRelativeFloorMs: no relative limit is below it.
	ClientRelativeFloorMs = 5.0
)

// clientLimit is the limit on a client delay: the absolute one, or share
// of the TTFT figure when that is lower (never below the floor).
func clientLimit(abs float64, share float64, ttft *float64) (limit float64, relative bool) {
	if ttft == nil || *ttft <= 0 {
		return abs, false
	}
	rel := max(ClientRelativeFloorMs, share**ttft)
	if rel < abs {
		return rel, true
	}
	return abs, false
}

// JudgeClient says whether the load generator was late or starved, and why.
func JudgeClient(h ClientHealth) (flagged bool, reasons []string) {
	if h.OpenLoop {
		limit, rel := clientLimit(ClientLateLimitMs, ClientLateTTFTShare, h.TTFTP50Ms)
		if h.LatenessP99Ms > limit {
			why := fmt.Sprintf("limit %s ms", msText(limit))
			if rel {
				why = fmt.Sprintf("limit %s ms, half the level's TTFT p50 of %s ms", msText(limit), msText(*h.TTFTP50Ms))
			}
			reasons = append(reasons, fmt.Sprintf("late: the load generator sent requests p99 %s ms after their intended times (%s)", msText(h.LatenessP99Ms), why))
		}
	}
	if h.Ticks > 0 {
		saturated := h.HostCPUPressurePct != nil && *h.HostCPUPressurePct >= ClientHostPressurePct
		share := ClientTickTTFTShare
		if saturated {
			share = ClientSaturatedTickTTFTShare
		}
		limit, rel := clientLimit(ClientTickLimitMs, share, h.TTFTP99Ms)
		if h.TickDelayP99Ms > limit {
			why := fmt.Sprintf("limit %s ms", msText(limit))
			switch {
			case rel && saturated:
				why = fmt.Sprintf("limit %s ms, a quarter of the level's TTFT p99 of %s ms on a saturated host: CPU pressure %.0f %%", msText(limit), msText(*h.TTFTP99Ms), *h.HostCPUPressurePct)
			case rel:
				why = fmt.Sprintf("limit %s ms, half the level's TTFT p99 of %s ms", msText(limit), msText(*h.TTFTP99Ms))
			}
			reasons = append(reasons, fmt.Sprintf("starved: a 10 ms ticker in the probe woke p99 %s ms late (%s)", msText(h.TickDelayP99Ms), why))
		}
	}
	if h.ProbeCPUPct > ClientCPULimitPct {
		reasons = append(reasons, fmt.Sprintf("CPU-bound: the probe used %.0f %% of the CPUs it may run on (limit %.0f %%)", h.ProbeCPUPct, ClientCPULimitPct))
	}
	if h.ProbeRunQueuePct != nil && *h.ProbeRunQueuePct > ClientRunQueueLimitPct {
		reasons = append(reasons, fmt.Sprintf("starved: the probe's threads waited for a CPU %.0f %% of the time (summed over threads; limit %.0f %%)", *h.ProbeRunQueuePct, ClientRunQueueLimitPct))
	}
	return len(reasons) > 0, reasons
}

// msText writes a delay in ms: whole above 10 ms, to a tenth below.
func msText(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// ClientFlag is a load level (one step, level and repetition) where the
// load generator was late or starved.
type ClientFlag struct {
	Step       string   `json:"step"`
	Level      string   `json:"level,omitempty"`
	Repetition int      `json:"repetition"`
	Reasons    []string `json:"reasons"`
}

// Key returns the series the flag belongs to.
func (f ClientFlag) Key() SeriesKey { return SeriesKey{Step: f.Step, Level: f.Level} }

// ClientReadings gathers the self-check measurements of a run, level by
// level, with the level's TTFT they are held against, from samples
// (ClientFlags) or from stored summaries (pages).
type ClientReadings struct {
	byKey map[clientKey]*ClientHealth
	ttft  map[clientKey][2]float64 // p50, p99
}

type clientKey struct {
	step, level string
	rep         int
}

// IsClientMetric reports whether the metric is one of the load
// generator's self-check readings, which a flagged level does not hold
// back.
func IsClientMetric(id string) bool {
	switch id {
	case MetricClientLateness, MetricClientTickDelay, MetricClientCPU, MetricClientRunQueue, MetricHostCPUPressure:
		return true
	}
	return false
}

// Add records one reading: p99 for a distribution (with its sample count),
// value for a rate.
func (r *ClientReadings) Add(metric, step, level string, rep int, p99 float64, n int64, value float64) {
	if !IsClientMetric(metric) {
		return
	}
	if r.byKey == nil {
		r.byKey = map[clientKey]*ClientHealth{}
	}
	k := clientKey{step, level, rep}
	h := r.byKey[k]
	if h == nil {
		h = &ClientHealth{}
		r.byKey[k] = h
	}
	v := value
	switch metric {
	case MetricClientLateness:
		h.OpenLoop, h.LatenessP99Ms = n > 0, p99
	case MetricClientTickDelay:
		h.TickDelayP99Ms, h.Ticks = p99, n
	case MetricClientCPU:
		h.ProbeCPUPct = value
	case MetricClientRunQueue:
		h.ProbeRunQueuePct = &v
	case MetricHostCPUPressure:
		h.HostCPUPressurePct = &v
	}
}

// AddTTFT records the TTFT of one level (p50 and p99, ms), which the
// client's delays on that level are held against.
func (r *ClientReadings) AddTTFT(step, level string, rep int, p50, p99 float64) {
	if r.ttft == nil {
		r.ttft = map[clientKey][2]float64{}
	}
	r.ttft[clientKey{step, level, rep}] = [2]float64{p50, p99}
}

// Flags judges every level read, in a stable order.
func (r *ClientReadings) Flags() []ClientFlag {
	var out []ClientFlag
	for k, h := range r.byKey {
		if t, ok := r.ttft[k]; ok {
			p50, p99 := t[0], t[1]
			h.TTFTP50Ms, h.TTFTP99Ms = &p50, &p99
		}
		if flagged, reasons := JudgeClient(*h); flagged {
			out = append(out, ClientFlag{Step: k.step, Level: k.level, Repetition: k.rep, Reasons: reasons})
		}
	}
	slices.SortFunc(out, func(a, b ClientFlag) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), CompareLevels(a.Level, b.Level), cmp.Compare(a.Repetition, b.Repetition))
	})
	return out
}

// ClientFlags judges the load generator's self-check in a run's
// measurements: the levels where it was late or starved.
func ClientFlags(ms []Measurement) []ClientFlag {
	var r ClientReadings
	for _, m := range ms {
		if (!IsClientMetric(m.Metric) && m.Metric != MetricTTFT) || !m.HasSamples() {
			continue
		}
		s, err := m.Sample() // a level's TTFT may be kept in segments
		if err != nil || s.N() == 0 {
			continue
		}
		if m.Metric == MetricTTFT {
			p50, p99 := s.Quantile(0.5), s.Quantile(0.99)
			if s.Err() == nil { // unreadable: the absolute limits alone judge the level
				r.AddTTFT(m.Step, m.Level, m.Repetition, p50, p99)
			}
			continue
		}
		r.Add(m.Metric, m.Step, m.Level, m.Repetition, s.Quantile(0.99), s.N(), m.Values[0])
	}
	return r.Flags()
}
