package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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

// probeMayRunSQL says, of the run r, whether its probe may be on its host:
// a worker was about to launch it (the launch may have happened, recorded
// or not), its end was not seen, and the run is not final or, if it is,
// the probe's own time limit has not passed yet (it ended without its
// probe being stopped: the host was unreachable). While it holds, the
// host is the run's (AcquireLease).
const probeMayRunSQL = `(r.launch_intent_at IS NOT NULL AND r.probe_ended_at IS NULL
	AND (r.state NOT IN ('done', 'failed', 'cancelled') OR r.probe_deadline > now()))`

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
	ID               int64
	ProgramID        int64
	Kind             string // executed or imported
	ProfileVersionID *int64
	ProfileID        *int64
	ProfileName      string
	ProfileVersion   int
	GateSetVersionID *int64
	GateSetID        *int64
	GateSetName      string
	GateSetVersion   int
	HostID           *int64
	HostName         string
	BaselineRunID    *int64
	State            string
	Reason           string
	Label            string
	Emulated         bool
	Attempt          int
	Launched         bool
	// LaunchIntentAt is when a worker was about to launch the probe (the
	// launch may have happened from then on); ProbeEndedAt when the probe's
	// end was seen; ProbeDeadline when its own time limit has ended it.
	LaunchIntentAt *time.Time
	ProbeEndedAt   *time.Time
	ProbeDeadline  *time.Time
	// ProbeMayRun: the probe may be on the host now (probeMayRunSQL), so
	// the host stays the run's.
	ProbeMayRun bool
	// LeaseLapsedAt is set when the run's host lease expired without being
	// renewed: no worker is following the run (until one takes it over).
	LeaseLapsedAt     *time.Time
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
	// HasReport: a signed report bundle of the run exists.
	HasReport bool
	// Contaminated: another run was active on the host while this one
	// measured (RunNeighbours says which): it is never judged PASS.
	Contaminated bool
	// Warnings is what the pre-run check said when the run was started
	// anyway (a JSON list of acceptance.RunWarning; nil: nothing).
	Warnings json.RawMessage
	// HostCount is the number of hosts of a multi-host run (RunHosts);
	// 0 for a one-host run, whose host is HostID.
	HostCount int
}

// MultiHost reports whether the run spans several hosts by role.
func (r Run) MultiHost() bool { return r.HostCount > 0 }

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
	r.attempt, r.launched, r.launch_intent_at, r.probe_ended_at, r.probe_deadline, ` + probeMayRunSQL + `,
	(SELECT hl.expires_at FROM host_leases hl WHERE hl.host_id = r.host_id AND hl.run_id = r.id AND hl.expires_at < now()), r.remote_dir, r.events_offset, r.progress, coalesce(r.verdict, ''), r.readiness_override, r.river_job_id,
	r.created_by, coalesce(u.display_name, ''), r.created_at, r.started_at, r.finished_at, r.state_changed_at,
	EXISTS (SELECT 1 FROM run_reports rr WHERE rr.run_id = r.id), EXISTS (SELECT 1 FROM run_neighbours rn WHERE rn.run_id = r.id), r.warnings,
	(SELECT count(*) FROM run_hosts rh WHERE rh.run_id = r.id)`

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
		&r.Attempt, &r.Launched, &r.LaunchIntentAt, &r.ProbeEndedAt, &r.ProbeDeadline, &r.ProbeMayRun, &r.LeaseLapsedAt, &r.RemoteDir, &r.EventsOffset, &r.Progress, &r.Verdict, &r.ReadinessOverride, &r.RiverJobID,
		&r.CreatedBy, &r.CreatedByName, &r.CreatedAt, &r.StartedAt, &r.FinishedAt, &r.StateChangedAt, &r.HasReport, &r.Contaminated, &r.Warnings, &r.HostCount)
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

// NewRun is what submitting a run needs.
type NewRun struct {
	ProgramID         int64
	Kind              string // executed (default) or imported
	ProfileVersionID  int64
	GateSetVersionID  *int64
	HostID            int64
	BaselineRunID     *int64
	Label             string
	Emulated          bool
	ReadinessOverride json.RawMessage
	// Warnings is what the pre-run check said, when the run starts anyway.
	Warnings  json.RawMessage
	CreatedBy int64
	// IdempotencyKey (optional) names the request that asked for the run;
	// RequestDigest is that request's digest. See RunByIdempotencyKey.
	IdempotencyKey string
	RequestDigest  string
}

// CreateRun inserts a queued run. The caller inserts its River job in the
// same transaction and then records the job id (SetRunJob).
func (s *Store) CreateRun(ctx context.Context, r NewRun) (int64, error) {
	var id int64
	kind := r.Kind
	if kind == "" {
		kind = "executed"
	}
	err := s.db.QueryRow(ctx, `INSERT INTO runs (program_id, kind, profile_version_id, gate_set_version_id, host_id, baseline_run_id,
		state, label, emulated, readiness_override, created_by, idempotency_key, request_digest, warnings)
		VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7, $8, $9, $10, NULLIF($11, ''), NULLIF($12, ''), $13) RETURNING id`,
		r.ProgramID, kind, r.ProfileVersionID, r.GateSetVersionID, nullID(r.HostID), r.BaselineRunID, r.Label, r.Emulated, nullJSON(r.ReadinessOverride), nullID(r.CreatedBy),
		r.IdempotencyKey, r.RequestDigest, nullJSON(r.Warnings)).Scan(&id)
	if isUniqueViolation(err) && r.IdempotencyKey != "" {
		return 0, fmt.Errorf("store: create run: idempotency key: %w", ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("store: create run: %w", err)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO run_transitions (run_id, from_state, to_state, reason) VALUES ($1, '', 'queued', 'submitted')`, id); err != nil {
		return 0, fmt.Errorf("store: create run: %w", err)
	}
	return id, nil
}

// RunByIdempotencyKey finds the run a user's request with this key started
// in the program, and that request's digest (ErrNotFound when none did).
func (s *Store) RunByIdempotencyKey(ctx context.Context, programID, userID int64, key string) (int64, string, error) {
	var id int64
	var digest string
	err := s.db.QueryRow(ctx, `SELECT id, coalesce(request_digest, '') FROM runs WHERE program_id = $1 AND created_by = $2 AND idempotency_key = $3`,
		programID, userID, key).Scan(&id, &digest)
	if err != nil {
		return 0, "", notFound(err, "run by idempotency key")
	}
	return id, digest, nil
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// SetRunJob records the River job that executes the run.
func (s *Store) SetRunJob(ctx context.Context, runID, jobID int64) error {
	tag, err := s.db.Exec(ctx, `UPDATE runs SET river_job_id = $2 WHERE id = $1`, runID, jobID)
	return oneRow(tag, err, fmt.Sprintf("set job of run %d", runID))
}

// GetRun returns a run of the program.
func (s *Store) GetRun(ctx context.Context, programID, runID int64) (Run, error) {
	r, err := scanRun(s.db.QueryRow(ctx, `SELECT `+runColumns+runJoins+` WHERE r.id = $1 AND r.program_id = $2`, runID, programID))
	if err != nil {
		return r, notFound(err, fmt.Sprintf("run %d", runID))
	}
	return r, nil
}

// RunByID returns a run whatever its program: for workers only.
func (s *Store) RunByID(ctx context.Context, runID int64) (Run, error) {
	r, err := scanRun(s.db.QueryRow(ctx, `SELECT `+runColumns+runJoins+` WHERE r.id = $1`, runID))
	if err != nil {
		return r, notFound(err, fmt.Sprintf("run %d", runID))
	}
	return r, nil
}

// LockRun returns a run as it is now, its row locked until the caller's
// transaction ends, so that what the caller decides from it still holds
// when it writes (a worker's launch intent waits meanwhile).
func (s *Store) LockRun(ctx context.Context, runID int64) (Run, error) {
	r, err := scanRun(s.db.QueryRow(ctx, `SELECT `+runColumns+runJoins+` WHERE r.id = $1 FOR UPDATE OF r`, runID))
	if err != nil {
		return r, notFound(err, fmt.Sprintf("run %d", runID))
	}
	return r, nil
}

// RunsInExecution returns the ids of runs whose execute job owns them
// (queued up to collecting, with a job), across programs: the runs a
// reconciler checks against their jobs.
func (s *Store) RunsInExecution(ctx context.Context) ([]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT id FROM runs WHERE river_job_id IS NOT NULL
		AND state IN ('queued', 'waiting_for_host', 'preparing', 'running', 'collecting') ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: runs in execution: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("store: runs in execution: %w", err)
	}
	return ids, nil
}

// UnfollowedRuns returns the runs in execution (with a job) that no worker
// holds a live host lease for: their worker is gone, or between attempts,
// or waiting for the host. The caller asks River which of their jobs are
// running nonetheless.
func (s *Store) UnfollowedRuns(ctx context.Context) ([]Run, error) {
	rows, err := s.db.Query(ctx, `SELECT `+runColumns+runJoins+`
		WHERE r.river_job_id IS NOT NULL AND r.host_id IS NOT NULL
			AND r.state IN ('queued', 'waiting_for_host', 'preparing', 'running', 'collecting')
			AND NOT EXISTS (SELECT 1 FROM host_leases hl WHERE hl.host_id = r.host_id AND hl.run_id = r.id AND hl.expires_at > now())
		ORDER BY r.id`)
	return collectRuns(rows, err, "unfollowed runs")
}

// TakeOverRun makes jobID the run's job in place of fromJobID, unless the
// run moved on meanwhile (it is final, another job has it, or a worker
// renewed its lease): false then. The row lock orders it with other
// takeovers and with the run's own writes.
func (s *Store) TakeOverRun(ctx context.Context, runID, fromJobID, jobID int64) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE runs r SET river_job_id = $3
		WHERE r.id = $1 AND r.river_job_id = $2 AND r.state IN ('queued', 'waiting_for_host', 'preparing', 'running', 'collecting')
			AND NOT EXISTS (SELECT 1 FROM host_leases hl WHERE hl.host_id = r.host_id AND hl.run_id = r.id AND hl.expires_at > now())`,
		runID, fromJobID, jobID)
	if err != nil {
		return false, fmt.Errorf("store: take over run %d: %w", runID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseRunLease gives a host back if the run holds it.
func (s *Store) ReleaseRunLease(ctx context.Context, hostID, runID int64) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM host_leases WHERE host_id = $1 AND run_id = $2`, hostID, runID); err != nil {
		return fmt.Errorf("store: release lease of run %d: %w", runID, err)
	}
	return nil
}

// RunFilter selects runs of a program.
type RunFilter struct {
	ProfileID *int64
	HostID    *int64
	State     string
	Limit     int
	BeforeID  int64
}

// ListRuns returns a program's runs, newest first.
func (s *Store) ListRuns(ctx context.Context, programID int64, f RunFilter) ([]Run, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	rows, err := s.db.Query(ctx, `SELECT `+runColumns+runJoins+`
		WHERE r.program_id = $1 AND ($2::bigint IS NULL OR pv.profile_id = $2) AND ($3::bigint IS NULL OR r.host_id = $3)
		AND ($4 = '' OR r.state = $4) AND ($5 = 0 OR r.id < $5)
		ORDER BY r.id DESC LIMIT $6`, programID, f.ProfileID, f.HostID, f.State, f.BeforeID, f.Limit)
	return collectRuns(rows, err, "list runs")
}

// RunTransition is one state change of a run.
type RunTransition struct {
	At        time.Time
	FromState string
	ToState   string
	Reason    string
}

// RunTransitions returns a run's history.
func (s *Store) RunTransitions(ctx context.Context, runID int64) ([]RunTransition, error) {
	rows, err := s.db.Query(ctx, `SELECT at, from_state, to_state, reason FROM run_transitions WHERE run_id = $1 ORDER BY at, from_state`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: run transitions: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[RunTransition])
}

// ErrRunFinal is returned when a finished run would change state.
var ErrRunFinal = fmt.Errorf("the run has ended already")

// SetRunState moves a run to a new state with a reason, recording the
// transition and notifying live pages. A final run never changes again.
func (s *Store) SetRunState(ctx context.Context, runID int64, state, reason string) error {
	var from, before string
	err := s.db.QueryRow(ctx, `SELECT state, reason FROM runs WHERE id = $1 FOR UPDATE`, runID).Scan(&from, &before)
	if err != nil {
		return notFound(err, fmt.Sprintf("run %d", runID))
	}
	if RunFinal(from) {
		return fmt.Errorf("store: run %d to %s: %w", runID, state, ErrRunFinal)
	}
	reason = truncate(reason, 2000)
	if from == state && before == reason {
		return nil
	}
	// The reason is always replaced: it says what is happening now, and an
	// earlier step's words must not outlive the step.
	_, err = s.db.Exec(ctx, `UPDATE runs SET state = $2, reason = $3,
			state_changed_at = CASE WHEN state = $2 THEN state_changed_at ELSE now() END,
			started_at = CASE WHEN $2 = 'preparing' AND started_at IS NULL THEN now() ELSE started_at END,
			finished_at = CASE WHEN $2 IN ('done', 'failed', 'cancelled') THEN now() ELSE finished_at END
		WHERE id = $1`, runID, state, reason)
	if err != nil {
		return fmt.Errorf("store: run %d to %s: %w", runID, state, err)
	}
	if from != state {
		if _, err := s.db.Exec(ctx, `INSERT INTO run_transitions (run_id, from_state, to_state, reason) VALUES ($1, $2, $3, $4)`, runID, from, state, reason); err != nil {
			return fmt.Errorf("store: run %d transition: %w", runID, err)
		}
	}
	return s.notifyRun(ctx, runID)
}

// notifyRun wakes the live pages of a run (LISTEN run_updates).
func (s *Store) notifyRun(ctx context.Context, runID int64) error {
	if _, err := s.db.Exec(ctx, `SELECT pg_notify('run_updates', $1)`, strconv.FormatInt(runID, 10)); err != nil {
		return fmt.Errorf("store: notify run %d: %w", runID, err)
	}
	return nil
}

// MarkLaunched records that the measurement was started on the host, in
// remoteDir.
func (s *Store) MarkLaunched(ctx context.Context, runID int64, remoteDir string) error {
	tag, err := s.db.Exec(ctx, `UPDATE runs SET launched = true, remote_dir = $2, attempt = greatest(attempt, 1),
		launch_intent_at = coalesce(launch_intent_at, now()) WHERE id = $1`, runID, remoteDir)
	return oneRow(tag, err, fmt.Sprintf("mark run %d launched", runID))
}

// RecordLaunchIntent records, before the probe is launched in remoteDir,
// that it may be launched from now on: from this moment the host stays
// the run's until the probe's end is seen, or, once the run is final
// without that, until limit from now has passed (the probe's own time
// limit and a margin). Call it fenced, in the transaction that checks the
// lease: a worker whose lease was taken over can then not launch. A run
// that is final (cancelled before it started, say) is not launched:
// ErrRunFinal.
func (s *Store) RecordLaunchIntent(ctx context.Context, runID int64, remoteDir string, limit time.Duration) error {
	var state string
	if err := s.db.QueryRow(ctx, `SELECT state FROM runs WHERE id = $1 FOR UPDATE`, runID).Scan(&state); err != nil {
		return notFound(err, fmt.Sprintf("run %d launch intent", runID))
	}
	if RunFinal(state) {
		return fmt.Errorf("store: run %d launch intent: %w", runID, ErrRunFinal)
	}
	_, err := s.db.Exec(ctx, `UPDATE runs SET remote_dir = $2, attempt = greatest(attempt, 1),
			launch_intent_at = coalesce(launch_intent_at, now()),
			probe_deadline = greatest(probe_deadline, now() + $3 * interval '1 millisecond')
		WHERE id = $1`, runID, remoteDir, limit.Milliseconds())
	if err != nil {
		return fmt.Errorf("store: run %d launch intent: %w", runID, err)
	}
	return nil
}

// MarkProbeEnded records that the run's probe is known to be gone from its
// host (its status was read, its processes were found gone, or a stop
// confirmed that nothing of the run is left): the host is free for others
// once the run lets go of its lease.
func (s *Store) MarkProbeEnded(ctx context.Context, runID int64) error {
	tag, err := s.db.Exec(ctx, `UPDATE runs SET probe_ended_at = coalesce(probe_ended_at, now()) WHERE id = $1`, runID)
	return oneRow(tag, err, fmt.Sprintf("run %d probe ended", runID))
}

// ProbesLeftBehind returns the final runs whose probe may still be on
// their host (they ended without seeing it end, the host unreachable):
// the reconciler keeps trying to stop them.
func (s *Store) ProbesLeftBehind(ctx context.Context) ([]Run, error) {
	rows, err := s.db.Query(ctx, `SELECT `+runColumns+runJoins+`
		WHERE r.launch_intent_at IS NOT NULL AND r.probe_ended_at IS NULL AND r.host_id IS NOT NULL
			AND r.state IN ('done', 'failed', 'cancelled') AND r.probe_deadline > now()
		ORDER BY r.id`)
	return collectRuns(rows, err, "probes left behind")
}

// RequestCancel notes the user's cancel (by names who asked, the first one
// kept); workers check it when their context ends.
func (s *Store) RequestCancel(ctx context.Context, runID int64, by string) error {
	tag, err := s.db.Exec(ctx, `UPDATE runs SET cancel_requested_at = coalesce(cancel_requested_at, now()),
			cancel_requested_by = CASE WHEN cancel_requested_at IS NULL THEN $2 ELSE cancel_requested_by END
		WHERE id = $1`, runID, by)
	return oneRow(tag, err, fmt.Sprintf("cancel run %d", runID))
}

// CancelRequester names who asked for the run's cancel ("a user" when the
// cancel was asked for before Accord kept the name, or not at all).
func (s *Store) CancelRequester(ctx context.Context, runID int64) (string, error) {
	var by string
	if err := s.db.QueryRow(ctx, `SELECT cancel_requested_by FROM runs WHERE id = $1`, runID).Scan(&by); err != nil {
		return "", notFound(err, fmt.Sprintf("run %d", runID))
	}
	if by == "" {
		by = "a user"
	}
	return by, nil
}

// CancelRequested reports whether the run's cancel was asked for.
func (s *Store) CancelRequested(ctx context.Context, runID int64) (bool, error) {
	var at *time.Time
	if err := s.db.QueryRow(ctx, `SELECT cancel_requested_at FROM runs WHERE id = $1`, runID).Scan(&at); err != nil {
		return false, notFound(err, fmt.Sprintf("run %d", runID))
	}
	return at != nil, nil
}

// SetRunVerdict stores the overall verdict of the latest evaluation.
func (s *Store) SetRunVerdict(ctx context.Context, runID int64, verdict string) error {
	tag, err := s.db.Exec(ctx, `UPDATE runs SET verdict = $2 WHERE id = $1`, runID, verdict)
	if err := oneRow(tag, err, fmt.Sprintf("run %d verdict", runID)); err != nil {
		return err
	}
	return s.notifyRun(ctx, runID)
}

// StoredEvaluation is a verdict as stored, with its canonical bytes.
type StoredEvaluation struct {
	ID               int64
	RunID            int64
	BaselineRunID    *int64
	GateSetVersionID int64
	Overall          string
	Result           json.RawMessage
	Canonical        []byte
	Digest           string
	EngineVersion    string
	CreatedAt        time.Time
}

// SaveEvaluation stores an evaluation (never updated: a re-evaluation is a
// new row) and sets the run's verdict.
func (s *Store) SaveEvaluation(ctx context.Context, e StoredEvaluation) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO evaluations (run_id, baseline_run_id, gate_set_version_id, overall, result, canonical, digest, engine_version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
		e.RunID, e.BaselineRunID, e.GateSetVersionID, e.Overall, e.Result, e.Canonical, e.Digest, e.EngineVersion).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("store: save evaluation of run %d: %w", e.RunID, err)
	}
	return id, s.SetRunVerdict(ctx, e.RunID, e.Overall)
}

// RunLatestEvaluation returns a run's newest evaluation.
func (s *Store) RunLatestEvaluation(ctx context.Context, runID int64) (StoredEvaluation, error) {
	rows, err := s.db.Query(ctx, `SELECT id, run_id, baseline_run_id, gate_set_version_id, overall, result, canonical, digest, engine_version, created_at
		FROM evaluations WHERE run_id = $1 ORDER BY id DESC LIMIT 1`, runID)
	if err != nil {
		return StoredEvaluation{}, fmt.Errorf("store: evaluation of run %d: %w", runID, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[StoredEvaluation])
	if err != nil {
		return e, notFound(err, fmt.Sprintf("evaluation of run %d", runID))
	}
	return e, nil
}

// RecordStopLoss keeps the breach that aborted a run, with its numbers,
// and notes it in the run's log.
func (s *Store) RecordStopLoss(ctx context.Context, runID int64, breach any) error {
	b, err := json.Marshal(breach)
	if err != nil {
		return fmt.Errorf("store: stop-loss of run %d: %w", runID, err)
	}
	if _, err := s.db.Exec(ctx, `UPDATE runs SET stop_loss = $2 WHERE id = $1`, runID, b); err != nil {
		return fmt.Errorf("store: stop-loss of run %d: %w", runID, err)
	}
	return nil
}

// RunStopLoss returns the breach that aborted a run (nil when none).
func (s *Store) RunStopLoss(ctx context.Context, runID int64) (json.RawMessage, error) {
	var b []byte
	if err := s.db.QueryRow(ctx, `SELECT stop_loss FROM runs WHERE id = $1`, runID).Scan(&b); err != nil {
		return nil, notFound(err, fmt.Sprintf("run %d", runID))
	}
	return b, nil
}
