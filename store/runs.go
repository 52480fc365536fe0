package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Run states, in the order a run normally passes through them.
const (
	RunQueued         = "queued"
	RunWaitingForHost = "waiting_for_host"
	RunPreparing      = "preparing"
	RunRunning        = "running"
	RunCollecting     = "collecting"
	RunEvaluating     = "evaluating"
	RunDone           = "done"
	RunFailed         = "failed"
	RunCancelled      = "cancelled"
)

// RunFinal reports whether a state is final.
func RunFinal(state string) bool {
	return state == RunDone || state == RunFailed || state == RunCancelled
}

// RunStateLabel is the state as pages say it.
func RunStateLabel(state string) string {
	switch state {
	case RunWaitingForHost:
		return "waiting for host"
	}
	return state
}

// Run is one execution (or import) of a profile version on a host, judged
// by a gate set version, optionally against a baseline run.
type Run struct {
	ID                int64
	ProgramID         int64
	Kind              string // executed or imported
	ProfileVersionID  *int64
	ProfileID         *int64
	ProfileName       string
	ProfileVersion    int
	GateSetVersionID  *int64
	GateSetID         *int64
	GateSetName       string
	GateSetVersion    int
	HostID            *int64
	HostName          string
	BaselineRunID     *int64
	State             string
	Reason            string
	Label             string
	Emulated          bool
	Attempt           int
	Launched          bool
	RemoteDir         string
	EventsOffset      int64
	Progress          json.RawMessage
	Verdict           string
	ReadinessOverride json.RawMessage
	RiverJobID        *int64
	CreatedBy         *int64
	CreatedByName     string
	CreatedAt         time.Time
	StartedAt         *time.Time
	FinishedAt        *time.Time
	StateChangedAt    time.Time
}

// DisplayLabel names the run in lists.
func (r Run) DisplayLabel() string {
	if r.Label != "" {
		return fmt.Sprintf("#%d %s", r.ID, r.Label)
	}
	if r.ProfileName != "" {
		return fmt.Sprintf("#%d %s v%d", r.ID, r.ProfileName, r.ProfileVersion)
	}
	return fmt.Sprintf("#%d", r.ID)
}

const runColumns = `r.id, r.program_id, r.kind, r.profile_version_id, pv.profile_id, coalesce(p.name, ''), coalesce(pv.version, 0),
	r.gate_set_version_id, gv.gate_set_id, coalesce(g.name, ''), coalesce(gv.version, 0),
	r.host_id, coalesce(h.name, ''), r.baseline_run_id, r.state, r.reason, r.label, r.emulated,
	r.attempt, r.launched, r.remote_dir, r.events_offset, r.progress, coalesce(r.verdict, ''), r.readiness_override, r.river_job_id,
	r.created_by, coalesce(u.display_name, ''), r.created_at, r.started_at, r.finished_at, r.state_changed_at`

const runJoins = ` FROM runs r
	LEFT JOIN profile_versions pv ON pv.id = r.profile_version_id
	LEFT JOIN profiles p ON p.id = pv.profile_id
	LEFT JOIN gate_set_versions gv ON gv.id = r.gate_set_version_id
	LEFT JOIN gate_sets g ON g.id = gv.gate_set_id
	LEFT JOIN hosts h ON h.id = r.host_id
	LEFT JOIN users u ON u.id = r.created_by`

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	err := row.Scan(&r.ID, &r.ProgramID, &r.Kind, &r.ProfileVersionID, &r.ProfileID, &r.ProfileName, &r.ProfileVersion,
		&r.GateSetVersionID, &r.GateSetID, &r.GateSetName, &r.GateSetVersion,
		&r.HostID, &r.HostName, &r.BaselineRunID, &r.State, &r.Reason, &r.Label, &r.Emulated,
		&r.Attempt, &r.Launched, &r.RemoteDir, &r.EventsOffset, &r.Progress, &r.Verdict, &r.ReadinessOverride, &r.RiverJobID,
		&r.CreatedBy, &r.CreatedByName, &r.CreatedAt, &r.StartedAt, &r.FinishedAt, &r.StateChangedAt)
	return r, err
}

func collectRuns(rows pgx.Rows, err error, what string) ([]Run, error) {
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Run, error) { return scanRun(r) })
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return runs, nil
}

// RecentRunsFor lists the newest runs of the programs a user may see.
func (s *Store) RecentRunsFor(ctx context.Context, userID int64, limit int) ([]Run, error) {
	rows, err := s.db.Query(ctx, `SELECT `+runColumns+runJoins+`
		WHERE r.program_id IN (SELECT program_id FROM program_members WHERE user_id = $1)
		ORDER BY r.id DESC LIMIT $2`, userID, limit)
	return collectRuns(rows, err, "recent runs")
}
