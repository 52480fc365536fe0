package chartdata

import "slices"

// A run's chart aggregates are computed once, at ingest (Compute),
// and kept in run_charts as JSON documents, one per key; pages read them
// and only assemble chart options. The keys:
//
//	meta                   Meta: version, steps and levels in run order
//	summary                []SeriesStats: pooled statistics of every metric and series
//	facts                  map[string]string: the host facts that decide comparability
//	cdf:<step>|<level>     map[metric]CDFCurve: TTFT and E2E distributions
//	overrun:<step>         OverRun: TTFT of each request over the run, reduced, with its rolling p99
//	timeseries             []TimeSeries: throughput and telemetry per second over the run
//	pct:<step>|<level>     []PercentileComparison: candidate against baseline, with intervals
//	hist                   []LogHistogram: log-bucketed distributions, for comparing runs
const (
	KeyMeta       = "meta"
	KeySummary    = "summary"
	KeyFacts      = "facts"
	KeyTimeSeries = "timeseries"
	KeyHist       = "hist"
)

// Version is the layout of the aggregates this build writes; pages
// ignore aggregates of another version (the run page then shows tables
// only).
const Version = 1

// KeyCDF is the key of a series' latency distributions.
func KeyCDF(step, level string) string { return "cdf:" + step + "|" + level }

// KeyPercentiles is the key of a series' comparison with the baseline.
func KeyPercentiles(step, level string) string { return "pct:" + step + "|" + level }

// KeyOverRun is the key of a step's latency over the run.
func KeyOverRun(step string) string { return "overrun:" + step }

// Meta says what a run's aggregates cover.
type Meta struct {
	Version int `json:"version"`
	// Steps that produced results, in the profile's order.
	Steps []Step `json:"steps"`
	// BaselineRunID is the run the percentile comparisons were made with.
	BaselineRunID *int64 `json:"baseline_run_id,omitempty"`
	// Requests is the number of request records read (all steps).
	Requests int64 `json:"requests"`
	// Notes are what could not be computed, in plain words.
	Notes []string `json:"notes,omitempty"`
}

// Step is one step of the run with its load levels in run order
// ("" for steps without levels).
type Step struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Levels []string `json:"levels"`
	// SLOTTFT is the step's TTFT SLO in ms (inference steps; 0: none).
	SLOTTFT float64 `json:"slo_ttft_ms,omitempty"`
}

// SeriesStats are the statistics of one metric in one series (step ×
// level), all repetitions pooled, with Accord's percentile definition.
type SeriesStats struct {
	Metric      string  `json:"metric"`
	Step        string  `json:"step"`
	Level       string  `json:"level,omitempty"`
	Repetitions int     `json:"repetitions"`
	N           int64   `json:"n"`
	Min         float64 `json:"min"`
	P50         float64 `json:"p50"`
	P90         float64 `json:"p90"`
	P95         float64 `json:"p95"`
	P99         float64 `json:"p99"`
	P999        float64 `json:"p999"`
	Max         float64 `json:"max"`
	Mean        float64 `json:"mean"`
	// Rate metrics: the mean over repetitions (Mean holds it too) and
	// each repetition's value.
	Rate          bool      `json:"rate,omitempty"`
	PerRepetition []float64 `json:"per_repetition,omitempty"`
	// Summary is true when no repetition had samples: the numbers are the
	// tool's own (mean of repetitions), not Accord's.
	Summary bool `json:"summary,omitempty"`
	// Missing names the statistics a tool's summary did not give (vLLM's
	// bench reports mean, median and p99 only): Stat says they are absent
	// rather than showing their zero.
	Missing []string `json:"missing,omitempty"`
}

// Stat returns a statistic by its gate name (p50 … p99.9, mean, max,
// rate) and whether the series has it.
func (s SeriesStats) Stat(name string) (float64, bool) {
	if s.Rate {
		if name == "rate" || name == "mean" {
			return s.Mean, true
		}
		return 0, false
	}
	if s.N == 0 && !s.Summary {
		return 0, false
	}
	if slices.Contains(s.Missing, name) {
		return 0, false
	}
	switch name {
	case "p50":
		return s.P50, true
	case "p90":
		return s.P90, true
	case "p95":
		return s.P95, true
	case "p99":
		return s.P99, true
	case "p99.9":
		return s.P999, true
	case "mean":
		return s.Mean, true
	case "max":
		return s.Max, true
	case "min":
		return s.Min, true
	}
	return 0, false
}

// CDFCurve is a latency distribution reduced for drawing, exact where it
// matters: Values holds every sample when there are few; otherwise Points
// are (value, count) pairs, each value a sample and each count the samples
// since the previous point, so that the share at or below every point is
// exact, and the minimum, maximum, p50, p90, p95, p99 and p99.9 are
// points themselves.
type CDFCurve struct {
	N      int64        `json:"n"`
	Values []float64    `json:"values,omitempty"`
	Points [][2]float64 `json:"points,omitempty"`
}

// OverRun is one step's TTFT per request against the time it was sent
// (seconds since the run started), reduced to a few thousand points that
// keep every stretch's extremes, and the rolling percentile of all of them.
type OverRun struct {
	Metric   string       `json:"metric"`
	Window   float64      `json:"window"`
	Quantile float64      `json:"quantile"`
	Requests int64        `json:"requests"` // measured requests with the metric
	Points   [][2]float64 `json:"points"`
	Rolling  [][2]float64 `json:"rolling"`
	// Warmup are the requests sent during warm-up (excluded from the
	// measurements), reduced the same way.
	Warmup      [][2]float64 `json:"warmup,omitempty"`
	WarmupCount int64        `json:"warmup_count,omitempty"`
	Failed      int64        `json:"failed,omitempty"`
	// Windowed says, when the step had more requests than are drawn one by
	// one, how Points and Rolling were made from windows of the run (its
	// fastest and slowest request each, the percentile from a log-bucketed
	// histogram); empty when every request is a point.
	Windowed string `json:"windowed,omitempty"`
}

// TimeSeries is one quantity per second over the run: Points reduced
// for drawing, N, Min, Mean and Max exact over every second.
type TimeSeries struct {
	Group string `json:"group"` // GroupThroughput, GroupTelemetry, GroupStorage, GroupFabric or GroupTimeline
	// Key is the telemetry quantity's key (Quantity.Key); empty for throughput.
	Key    string       `json:"key,omitempty"`
	Name   string       `json:"name"`
	Unit   string       `json:"unit"`
	Points [][2]float64 `json:"points"`
	N      int64        `json:"n"`
	Min    float64      `json:"min"`
	Mean   float64      `json:"mean"`
	Max    float64      `json:"max"`
}

// PercentileComparison is one statistic of one metric, candidate against
// baseline: the relative difference in % and its two-sided interval in %,
// as the gate engine computes it for a relative criterion (nil when it
// could not: too few samples, no baseline series).
type PercentileComparison struct {
	Metric     string   `json:"metric"`
	Statistic  string   `json:"statistic"`
	Candidate  *float64 `json:"candidate,omitempty"`
	Baseline   *float64 `json:"baseline,omitempty"`
	DiffPct    *float64 `json:"diff_pct,omitempty"`
	LowerPct   *float64 `json:"lower_pct,omitempty"`
	UpperPct   *float64 `json:"upper_pct,omitempty"`
	Confidence float64  `json:"confidence"`
	Interval   string   `json:"interval"`
	Why        string   `json:"why,omitempty"` // when there is no interval
}

// LogHistogram is one repetition's distribution of one metric on the
// log-bucketed grid of acceptance/stats (relative bucket error ≤ 0.1 %):
// Counts[i] samples in bucket Lo + i, and Zero samples ≤ 0.
type LogHistogram struct {
	Metric     string  `json:"metric"`
	Step       string  `json:"step"`
	Level      string  `json:"level,omitempty"`
	Repetition int     `json:"repetition"`
	Lo         int     `json:"lo"`
	Zero       int64   `json:"zero,omitempty"`
	Counts     []int64 `json:"counts"`
}
