package acceptance

// GateSchemaVersion is the newest gate set schema this build understands.
const GateSchemaVersion = 1

// GateSetSpec says how a run is judged. Like profiles, gate sets are
// immutable versions.
type GateSetSpec struct {
	SchemaVersion int    `json:"schema_version" yaml:"schema_version"`
	Name          string `json:"name" yaml:"name"`
	Description   string `json:"description,omitempty" yaml:"description,omitempty"`
	// Correction for testing many criteria at once: holm (default) or none.
	Correction string `json:"correction,omitempty" yaml:"correction,omitempty"`
	// StopLossConsecutive is k: that many consecutive interim breaches of a
	// stop-loss line abort the run (default 3).
	StopLossConsecutive int `json:"stop_loss_consecutive,omitempty" yaml:"stop_loss_consecutive,omitempty"`
	// AcceptClientLimited lets criteria be judged on load levels where the
	// probe's load generator was late or starved (ClientFlags); without it
	// a criterion on such a level is INCONCLUSIVE. Every verdict, page and
	// signed report shows both the flag and the acceptance.
	AcceptClientLimited bool        `json:"accept_client_limited,omitempty" yaml:"accept_client_limited,omitempty"`
	Criteria            []Criterion `json:"criteria" yaml:"criteria"`
}

// Comparator of a criterion.
type Comparator string

const (
	LessOrEqual    Comparator = "<="
	GreaterOrEqual Comparator = ">="
)

// CriterionMode says what the threshold is compared with.
type CriterionMode string

const (
	// Absolute compares the statistic with a limit in a unit.
	Absolute CriterionMode = "absolute"
	// Relative compares the relative difference (candidate − baseline) /
	// baseline, in percent, with the threshold.
	Relative CriterionMode = "relative"
	// Isolation compares, within one run, the victim step measured beside
	// an aggressor (Step, in a parallel group) with the same victim
	// measured alone (Reference): (interference − alone) / alone, in
	// percent, judged as a relative criterion is.
	Isolation CriterionMode = "isolation"
	// Drift compares, within one run, the last Window of a step's requests
	// (by the time each was sent) with its first Window: (last − first) /
	// first, in percent, judged as a relative criterion is.
	Drift CriterionMode = "drift"
)

// CriterionModes are the modes in the order the forms and the help page
// list them.
var CriterionModes = []CriterionMode{Absolute, Relative, Isolation, Drift}

// ComparesTwo reports whether the mode judges a change in percent between
// two sets of samples (a baseline run's, a quiet phase's, a first
// window's) rather than a statistic against a limit.
func (m CriterionMode) ComparesTwo() bool { return m == Relative || m == Isolation || m == Drift }

// WithinRun reports whether both sides of the comparison come from the
// judged run itself (isolation, drift), so that no baseline is needed.
func (m CriterionMode) WithinRun() bool { return m == Isolation || m == Drift }

// Severity of a criterion: blocking ones decide the overall verdict.
type Severity string

const (
	Blocking Severity = "blocking"
	Advisory Severity = "advisory"
)

// Criterion is one gate: metric × statistic × comparator × threshold.
//
// Absolute example: ttft p99 <= 2000 ms.
// Relative examples: output_token_throughput rate >= +25 % (superiority: the
// lower confidence bound must clear +25 %); ttft p99 <= +5 % (non-inferiority
// with a 5 % margin: the upper bound must stay under it).
type Criterion struct {
	Name      string        `json:"name" yaml:"name"`
	Metric    string        `json:"metric" yaml:"metric"`
	Statistic Statistic     `json:"statistic" yaml:"statistic"`
	Mode      CriterionMode `json:"mode" yaml:"mode"`
	// Step restricts the criterion to one step of the profile; empty means
	// every step (and sweep level) that produces the metric must pass.
	// For isolation, Step is the victim measured under interference (a
	// step in a parallel group) and is required.
	Step string `json:"step,omitempty" yaml:"step,omitempty"`
	// Reference is, for isolation, the same victim measured alone in the
	// same run (a step of the same kind on its own, not in a group).
	Reference string `json:"reference,omitempty" yaml:"reference,omitempty"`
	// Window is, for drift, the length of the first and of the last
	// stretch of each repetition compared (by the requests' send times).
	Window     Duration   `json:"window,omitempty" yaml:"window,omitempty"`
	Comparator Comparator `json:"comparator" yaml:"comparator"`
	Threshold  float64    `json:"threshold" yaml:"threshold"`
	// Unit of Threshold for absolute criteria (converted to the metric's
	// canonical unit); "%" for relative ones.
	Unit string `json:"unit" yaml:"unit"`
	// Confidence level of the interval, e.g. 0.95 (default).
	Confidence float64 `json:"confidence,omitempty" yaml:"confidence,omitempty"`
	// MinSamples below which the verdict is INCONCLUSIVE.
	MinSamples int `json:"min_samples,omitempty" yaml:"min_samples,omitempty"`
	// PointEstimate lets a percentile or mean criterion be judged on a
	// tool's own summary figure where a side has no samples (no
	// per-request data, no histogram): a point estimate, without any
	// interval. Without it such a criterion is INCONCLUSIVE. Every verdict,
	// page and signed report shows when it was set.
	PointEstimate bool     `json:"point_estimate,omitempty" yaml:"point_estimate,omitempty"`
	Severity      Severity `json:"severity" yaml:"severity"`
	// StopLoss is a hard line in the same unit as Threshold (absolute), or a
	// relative change in percent: crossing it during a run aborts the run,
	// and in a rollout halts the stage.
	StopLoss *float64 `json:"stop_loss,omitempty" yaml:"stop_loss,omitempty"`
	Help     string   `json:"help,omitempty" yaml:"help,omitempty"`
}
