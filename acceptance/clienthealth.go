package acceptance

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/accordlab/accord/acceptance/stats"
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
	// The host's CPU busy share and CPU pressure, for context.
	HostCPUBusyPct     *float64
	HostCPUPressurePct *float64
}

// The limits of a healthy client. They sit well above what a probe meets
// on a busy machine: on the 2-core development machine shared by a dozen
// test processes (CPU pressure 80-99 %), an open loop of 200 requests per
// second was dispatched up to p99 62 ms late, a ticker woke up to p99
// 51 ms late, and the probe's threads waited runnable up to 58 % of the
// time; a probe pinned to a core with two busy processes and lowered
// priority was 1.7 s late at p99, its ticker 1.8 s, its threads waiting
// 199 %. Only a client that clearly could not keep up is flagged.
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
)

// JudgeClient says whether the load generator was late or starved, and why.
func JudgeClient(h ClientHealth) (flagged bool, reasons []string) {
	if h.OpenLoop && h.LatenessP99Ms > ClientLateLimitMs {
		reasons = append(reasons, fmt.Sprintf("late: the load generator sent requests p99 %.0f ms after their intended times (limit %.0f ms)", h.LatenessP99Ms, ClientLateLimitMs))
	}
	if h.Ticks > 0 && h.TickDelayP99Ms > ClientTickLimitMs {
		reasons = append(reasons, fmt.Sprintf("starved: a 10 ms ticker in the probe woke p99 %.0f ms late (limit %.0f ms)", h.TickDelayP99Ms, ClientTickLimitMs))
	}
	if h.ProbeCPUPct > ClientCPULimitPct {
		reasons = append(reasons, fmt.Sprintf("CPU-bound: the probe used %.0f %% of the CPUs it may run on (limit %.0f %%)", h.ProbeCPUPct, ClientCPULimitPct))
	}
	if h.ProbeRunQueuePct != nil && *h.ProbeRunQueuePct > ClientRunQueueLimitPct {
		reasons = append(reasons, fmt.Sprintf("starved: the probe's threads waited for a CPU %.0f %% of the time (summed over threads; limit %.0f %%)", *h.ProbeRunQueuePct, ClientRunQueueLimitPct))
	}
	return len(reasons) > 0, reasons
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
// level, from samples (ClientFlags) or from stored summaries (pages).
type ClientReadings struct {
	byKey map[clientKey]*ClientHealth
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

// Flags judges every level read, in a stable order.
func (r *ClientReadings) Flags() []ClientFlag {
	var out []ClientFlag
	for k, h := range r.byKey {
		if flagged, reasons := JudgeClient(*h); flagged {
			out = append(out, ClientFlag{Step: k.step, Level: k.level, Repetition: k.rep, Reasons: reasons})
		}
	}
	slices.SortFunc(out, func(a, b ClientFlag) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Level, b.Level), cmp.Compare(a.Repetition, b.Repetition))
	})
	return out
}

// ClientFlags judges the load generator's self-check in a run's
// measurements: the levels where it was late or starved.
func ClientFlags(ms []Measurement) []ClientFlag {
	var r ClientReadings
	for _, m := range ms {
		if !IsClientMetric(m.Metric) || len(m.Values) == 0 {
			continue
		}
		s, err := stats.NewSample(m.Values, m.Counts)
		if err != nil || s.N() == 0 {
			continue
		}
		r.Add(m.Metric, m.Step, m.Level, m.Repetition, s.Quantile(0.99), s.N(), m.Values[0])
	}
	return r.Flags()
}
