package apiclient

import (
	"encoding/json"
	"time"
)

// The API's documents. The server (handlers) answers with these same
// types, so that what it sends and what a client reads cannot drift apart.

// Program is a joint test program the token's user is a member of.
type Program struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	Vendor    string    `json:"vendor"`
	Customer  string    `json:"customer"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// Host is a program's lab host.
type Host struct {
	ID       int64             `json:"id"`
	Name     string            `json:"name"`
	Address  string            `json:"address"`
	Port     int               `json:"port"`
	Pinned   bool              `json:"host_key_pinned"`
	Emulated bool              `json:"emulated"`
	Labels   map[string]string `json:"labels"`
}

// SpecKind is the path of a kind of versioned spec.
type SpecKind string

const (
	Profiles SpecKind = "profiles"
	GateSets SpecKind = "gatesets"
)

// versionsPath is the path that reads a version by its id alone:
// profile-versions or gateset-versions.
func (k SpecKind) versionsPath() string {
	return string(k)[:len(k)-1] + "-versions"
}

// Spec is a workload profile or a gate set, with its latest version.
type Spec struct {
	ID            int64     `json:"id"`
	Name          string    `json:"name"`
	LatestVersion int       `json:"latest_version"`
	LatestDigest  string    `json:"latest_digest"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// SpecVersion is one version of a spec, with its canonical JSON.
type SpecVersion struct {
	SpecID    int64           `json:"spec_id"`
	VersionID int64           `json:"version_id"`
	Version   int             `json:"version"`
	Digest    string          `json:"digest"`
	Note      string          `json:"note,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	Spec      json.RawMessage `json:"spec"`
}

// RunRequest submits a run: profile version × host × optional gate set
// version × optional baseline run.
type RunRequest struct {
	ProfileVersionID int64 `json:"profile_version_id"`
	// HostID is the lab host of a one-host profile; a profile with roles
	// takes Roles instead.
	HostID int64 `json:"host_id,omitempty"`
	// Roles names the lab hosts of each role of a multi-host profile, as
	// role → host ids (each host once in the run).
	Roles            map[string][]int64 `json:"roles,omitempty"`
	GateSetVersionID int64              `json:"gate_set_version_id,omitempty"`
	BaselineRunID    int64              `json:"baseline_run_id,omitempty"`
	Label            string             `json:"label,omitempty"`
	// ConfirmReadiness runs on a host whose blocking readiness checks fail.
	ConfirmReadiness bool `json:"confirm_readiness,omitempty"`
}

// RunHost is one lab host of a multi-host run.
type RunHost struct {
	Role     string  `json:"role"`
	HostID   int64   `json:"host_id"`
	Host     string  `json:"host"`
	State    string  `json:"state"`
	Reason   string  `json:"reason,omitempty"`
	Progress float64 `json:"progress"`
}

// Run is a run as the API shows it.
type Run struct {
	ID               int64      `json:"id"`
	State            string     `json:"state"`
	Final            bool       `json:"final"`
	Settled          bool       `json:"settled"` // final, and judged when it has a gate set
	Reason           string     `json:"reason,omitempty"`
	Verdict          string     `json:"verdict,omitempty"`
	Label            string     `json:"label,omitempty"`
	Kind             string     `json:"kind"`
	Emulated         bool       `json:"emulated"`
	ProfileVersionID *int64     `json:"profile_version_id,omitempty"`
	Profile          string     `json:"profile,omitempty"`
	GateSetVersionID *int64     `json:"gate_set_version_id,omitempty"`
	GateSet          string     `json:"gate_set,omitempty"`
	HostID           *int64     `json:"host_id,omitempty"`
	Host             string     `json:"host,omitempty"`
	BaselineRunID    *int64     `json:"baseline_run_id,omitempty"`
	Progress         float64    `json:"progress"`
	ProgressText     string     `json:"progress_text"`
	CreatedAt        time.Time  `json:"created_at"`
	StartedAt        *time.Time `json:"started_at,omitempty"`
	FinishedAt       *time.Time `json:"finished_at,omitempty"`
	URL              string     `json:"url"`
	// HasReport: the signed report bundle can be downloaded (report.tar.gz).
	HasReport bool `json:"has_report"`
	// Contaminated: another run was active on the host while this one
	// measured (Contamination says which, when the run is asked for
	// alone); such a run is never judged PASS.
	Contaminated  bool     `json:"contaminated"`
	Contamination []string `json:"contamination,omitempty"`
	// Warnings is what the pre-run check said of the request: criteria
	// that could not all be judged (no baseline for a relative criterion,
	// a baseline of another shape or host, too few requests for a
	// percentile). The run started anyway; they are kept with it.
	Warnings []RunWarning `json:"warnings,omitempty"`
	// Hosts are the lab hosts of a multi-host run with where each stands
	// (in the answer for one run).
	Hosts []RunHost `json:"hosts,omitempty"`
}

// RunWarning is one thing the pre-run check found.
type RunWarning struct {
	Kind      string `json:"kind"` // no-baseline, profile-shape, host-facts, too-few-requests
	Criterion string `json:"criterion,omitempty"`
	Message   string `json:"message"`
}

// StageGate is what Accord tells a deployer (an Argo Rollouts analysis, a
// Flagger webhook) of a rollout stage. State is approved (both sides
// signed it off: proceed), halted (a stop-loss, a halt, a rejection or a
// rollback request: roll back) or waiting (hold).
type StageGate struct {
	Program int64  `json:"program_id"`
	Stage   string `json:"stage"`
	State   string `json:"state"`
	// Approved and Halted are State as booleans, for conditions such as
	// Argo Rollouts' `result.approved`.
	Approved bool `json:"approved"`
	Halted   bool `json:"halted"`
	// StageState is Accord's own state of the stage: pending,
	// awaiting-approval, approved, rejected or halted.
	StageState string `json:"stage_state"`
	Current    bool   `json:"current"`
	// ApprovedBy lists the sides (vendor, customer) that signed the stage off.
	ApprovedBy []string  `json:"approved_by"`
	Reason     string    `json:"reason"`
	CheckedAt  time.Time `json:"checked_at"`
}

// FlaggerAnswer is the body of Accord's answer to a Flagger webhook; the
// status carries the answer (200 yes, 409 no), as Flagger reads it.
type FlaggerAnswer struct {
	Hook string    `json:"hook"`
	Yes  bool      `json:"yes"`
	Gate StageGate `json:"gate"`
}
