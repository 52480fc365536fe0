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
)

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
	Step       string     `json:"step,omitempty" yaml:"step,omitempty"`
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
