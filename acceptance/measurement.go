package acceptance

import "github.com/accordlab/accord/acceptance/stats"

// Source says where a value came from, so that both sides can trace it.
type Source struct {
	Tool        string `json:"tool"`                   // accord-probe, fio, vllm-bench, genai-perf, aiperf
	ToolVersion string `json:"tool_version,omitempty"` // as the tool reported it
	Field       string `json:"field,omitempty"`        // the field or file the values were read from
	// PercentileMethod says how Accord computes percentiles from Values, for
	// example "raw samples, nearest rank" or "fio latency bins (≤ 1/64 relative error)".
	PercentileMethod string `json:"percentile_method,omitempty"`
	// PercentileDefinition is the tool's own rule for the percentiles in
	// ToolSummary (numpy linear interpolation for vLLM, GenAI-Perf and
	// AIPerf; fio's bin rule for fio); empty for Accord's own
	// measurements. Accord's canonical percentiles are nearest rank
	// whatever it says; this is the rule Accord also uses where its figure
	// stands beside the tool's, so that the two are read the same way.
	PercentileDefinition stats.Definition `json:"percentile_definition,omitempty"`
}

// Measurement is what one repetition of one step produced for one metric.
//
// For distribution metrics, Values are the raw samples in the metric's
// canonical unit (one per request or telemetry tick), or histogram buckets
// when Counts is set. For rate metrics, Values holds exactly one value: the
// rate over the repetition. When a tool gave only its own summary (fio JSON
// without bins, a vLLM result without per-request arrays), Values is empty
// and ToolSummary holds the numbers: gates then use the tool's point
// estimate, without an interval, and say so.
type Measurement struct {
	Metric string `json:"metric"`
	Step   string `json:"step"`
	// Level is the load level within a sweep ("c=16", "r=8"); empty otherwise.
	Level string `json:"level,omitempty"`
	// Host names the lab host of a multi-host run the values come from;
	// empty for a one-host run and for the hosts combined (CombineHosts),
	// which is what gates judge.
	Host       string    `json:"host,omitempty"`
	Repetition int       `json:"repetition"`
	Values     []float64 `json:"-"`
	// Counts, when set, makes Values a histogram: Values[i] (a bucket's
	// representative value, ascending) occurred Counts[i] times. Used where
	// keeping every sample would cost too much (ITL, fio latency bins).
	Counts []int64 `json:"-"`
	// SentIndex, when set, says when each value's request was sent, so
	// that a drift criterion can cut windows out of the repetition: Values
	// are then in the order their requests were sent, and SentIndex[s] is
	// the index of the first value whose request was sent in second s of
	// the repetition or later (second 0 is the second of the first
	// measured request); the last second's values end at len(Values).
	// Only raw samples (no Counts) carry it.
	SentIndex []int64 `json:"-"`
	// Segments, when set, hold the samples instead of Values: a
	// measurement of more than stats.InMemoryLimit raw samples keeps them
	// outside memory, grouped by log bucket (a temporary file while its run
	// is imported, the database once stored), and every figure is still
	// read off the exact samples (stats.NewSegmentedSample). Segments keep
	// the values in the order their records came, without SentIndex: a
	// drift criterion cannot cut windows out of them.
	Segments []stats.Segment `json:"-"`
	// ToolSummary keeps the tool's own statistics (in the canonical unit),
	// shown beside Accord's recomputed ones: "p99" → value.
	ToolSummary map[string]float64 `json:"tool_summary,omitempty"`
	Source      Source             `json:"source"`
	// Trials, for a share of requests (error rate), is how many requests
	// the share was taken over (0: unknown). It lets a gate bound a share
	// that did not vary between repetitions (no errors at all, say) by the
	// binomial sampling of those requests.
	Trials int64 `json:"trials,omitempty"`
}

// SeriesKey identifies the samples a criterion is judged on: one step at one
// load level, across repetitions.
type SeriesKey struct {
	Step  string `json:"step"`
	Level string `json:"level,omitempty"`
}

// Key returns the series the measurement belongs to.
func (m Measurement) Key() SeriesKey { return SeriesKey{Step: m.Step, Level: m.Level} }

// HasSamples reports whether the measurement has samples or histogram
// buckets (rather than only the tool's summary).
func (m Measurement) HasSamples() bool { return len(m.Values) > 0 || len(m.Segments) > 0 }

// SampleCount is the number of samples: the segments' total, the
// histogram's counts, or the values.
func (m Measurement) SampleCount() int64 {
	switch {
	case len(m.Segments) > 0:
		var n int64
		for _, s := range m.Segments {
			n += s.N
		}
		return n
	case m.Counts != nil:
		var n int64
		for _, c := range m.Counts {
			n += c
		}
		return n
	}
	return int64(len(m.Values))
}

// Sample builds the statistics' view of the measurement's samples (its
// segments, histogram or values).
func (m Measurement) Sample() (stats.Sample, error) {
	if len(m.Segments) > 0 {
		return stats.NewSegmentedSample(m.Segments)
	}
	return stats.NewSample(m.Values, m.Counts)
}
