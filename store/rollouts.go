package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RolloutStage is one stage of a program's rollout plan, with its gates: a
// gate set version that must pass on each of its profiles.
type RolloutStage struct {
	ID               int64
	ProgramID        int64
	Position         int
	Name             string
	Description      string
	GateSetVersionID int64
	GateSetID        int64
	GateSetName      string
	GateSetVersion   int
	GateSetDigest    string
	Profiles         []StageProfile
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// GateSetLabel names the stage's gate set version ("name v3").
func (s RolloutStage) GateSetLabel() string {
	return fmt.Sprintf("%s v%d", s.GateSetName, s.GateSetVersion)
}

// StageProfile is a profile a stage's gates must pass on; RunID is the run
// chosen explicitly as its evidence (nil: the latest qualifying run).
type StageProfile struct {
	ProfileID   int64
	ProfileName string
	RunID       *int64
}

// StageGates is what a plan editor sets on a stage.
type StageGates struct {
	Description      string
	GateSetVersionID int64
	Profiles         []StageProfile
}

const stageColumns = `s.id, s.program_id, s.position, s.name, s.description, s.gate_set_version_id, gv.gate_set_id, g.name, gv.version, gv.digest, s.created_at, s.updated_at`
const stageJoins = ` FROM rollout_stages s JOIN gate_set_versions gv ON gv.id = s.gate_set_version_id JOIN gate_sets g ON g.id = gv.gate_set_id`

func scanStage(row pgx.Row) (RolloutStage, error) {
	var s RolloutStage
	err := row.Scan(&s.ID, &s.ProgramID, &s.Position, &s.Name, &s.Description, &s.GateSetVersionID, &s.GateSetID, &s.GateSetName,
		&s.GateSetVersion, &s.GateSetDigest, &s.CreatedAt, &s.UpdatedAt)
	return s, err
}

// ListRolloutStages returns a program's plan in order, with each stage's profiles.
func (s *Store) ListRolloutStages(ctx context.Context, programID int64) ([]RolloutStage, error) {
	rows, err := s.db.Query(ctx, `SELECT `+stageColumns+stageJoins+` WHERE s.program_id = $1 ORDER BY s.position`, programID)
	if err != nil {
		return nil, fmt.Errorf("store: rollout stages of program %d: %w", programID, err)
	}
	stages, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RolloutStage, error) { return scanStage(r) })
	if err != nil {
		return nil, fmt.Errorf("store: rollout stages of program %d: %w", programID, err)
	}
	if err := s.fillStageProfiles(ctx, programID, stages); err != nil {
		return nil, err
	}
	return stages, nil
}

// GetRolloutStage returns one stage of a program's plan.
func (s *Store) GetRolloutStage(ctx context.Context, programID, stageID int64) (RolloutStage, error) {
	st, err := scanStage(s.db.QueryRow(ctx, `SELECT `+stageColumns+stageJoins+` WHERE s.program_id = $1 AND s.id = $2`, programID, stageID))
	if err != nil {
		return st, notFound(err, fmt.Sprintf("rollout stage %d", stageID))
	}
	list := []RolloutStage{st}
	if err := s.fillStageProfiles(ctx, programID, list); err != nil {
		return st, err
	}
	return list[0], nil
}

func (s *Store) fillStageProfiles(ctx context.Context, programID int64, stages []RolloutStage) error {
	if len(stages) == 0 {
		return nil
	}
	rows, err := s.db.Query(ctx, `SELECT sp.stage_id, sp.profile_id, p.name, sp.run_id
		FROM rollout_stage_profiles sp JOIN rollout_stages s ON s.id = sp.stage_id JOIN profiles p ON p.id = sp.profile_id
		WHERE s.program_id = $1 ORDER BY lower(p.name), p.id`, programID)
	if err != nil {
		return fmt.Errorf("store: stage profiles of program %d: %w", programID, err)
	}
	byStage := map[int64][]StageProfile{}
	var stageID int64
	var sp StageProfile
	_, err = pgx.ForEachRow(rows, []any{&stageID, &sp.ProfileID, &sp.ProfileName, &sp.RunID}, func() error {
		byStage[stageID] = append(byStage[stageID], sp)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: stage profiles of program %d: %w", programID, err)
	}
	for i := range stages {
		stages[i].Profiles = byStage[stages[i].ID]
	}
	return nil
}

// AddRolloutStage appends a stage to a program's plan.
func (s *Store) AddRolloutStage(ctx context.Context, programID int64, name string, g StageGates, createdBy int64) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO rollout_stages (program_id, position, name, description, gate_set_version_id, created_by)
		SELECT $1, coalesce(max(position), 0) + 1, $2, $3, $4, $5 FROM rollout_stages WHERE program_id = $1
		RETURNING id`, programID, name, g.Description, g.GateSetVersionID, nullID(createdBy)).Scan(&id)
	if err != nil {
		return 0, notFound(err, "add rollout stage "+name)
	}
	return id, s.setStageProfiles(ctx, id, g.Profiles)
}

// UpdateRolloutStage changes a stage's description and gates.
func (s *Store) UpdateRolloutStage(ctx context.Context, programID, stageID int64, g StageGates) error {
	tag, err := s.db.Exec(ctx, `UPDATE rollout_stages SET description = $3, gate_set_version_id = $4, updated_at = now()
		WHERE program_id = $1 AND id = $2`, programID, stageID, g.Description, g.GateSetVersionID)
	if err != nil {
		return fmt.Errorf("store: update rollout stage %d: %w", stageID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: rollout stage %d: %w", stageID, ErrNotFound)
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM rollout_stage_profiles WHERE stage_id = $1`, stageID); err != nil {
		return fmt.Errorf("store: update rollout stage %d: %w", stageID, err)
	}
	return s.setStageProfiles(ctx, stageID, g.Profiles)
}

func (s *Store) setStageProfiles(ctx context.Context, stageID int64, profiles []StageProfile) error {
	for _, p := range profiles {
		if _, err := s.db.Exec(ctx, `INSERT INTO rollout_stage_profiles (stage_id, profile_id, run_id) VALUES ($1, $2, $3)`,
			stageID, p.ProfileID, p.RunID); err != nil {
			return fmt.Errorf("store: profiles of rollout stage %d: %w", stageID, err)
		}
	}
	return nil
}

// DeleteRolloutStage removes a stage and closes the gap in the order.
func (s *Store) DeleteRolloutStage(ctx context.Context, programID, stageID int64) error {
	var pos int
	err := s.db.QueryRow(ctx, `DELETE FROM rollout_stages WHERE program_id = $1 AND id = $2 RETURNING position`, programID, stageID).Scan(&pos)
	if err != nil {
		return notFound(err, fmt.Sprintf("delete rollout stage %d", stageID))
	}
	if _, err := s.db.Exec(ctx, `UPDATE rollout_stages SET position = position - 1 WHERE program_id = $1 AND position > $2`, programID, pos); err != nil {
		return fmt.Errorf("store: delete rollout stage %d: %w", stageID, err)
	}
	return nil
}

// LatestJudgedRun returns the newest finished run of a profile (any
// version) judged by a gate set version: a stage's evidence when no run
// was chosen explicitly.
func (s *Store) LatestJudgedRun(ctx context.Context, programID, profileID, gateSetVersionID int64) (Run, error) {
	rows, err := s.db.Query(ctx, `SELECT `+runColumns+runJoins+`
		WHERE r.program_id = $1 AND pv.profile_id = $2 AND r.gate_set_version_id = $3 AND r.state = 'done' AND r.verdict IS NOT NULL
		ORDER BY r.id DESC LIMIT 1`, programID, profileID, gateSetVersionID)
	runs, err := collectRuns(rows, err, "latest judged run")
	if err != nil {
		return Run{}, err
	}
	if len(runs) == 0 {
		return Run{}, fmt.Errorf("store: judged run of profile %d by gate set version %d: %w", profileID, gateSetVersionID, ErrNotFound)
	}
	return runs[0], nil
}

// Watch is a production watch of a stage: a query to a Prometheus-compatible
// API whose value is compared with a stop-loss line on a schedule.
type Watch struct {
	ID              int64
	ProgramID       int64
	StageID         int64
	StageName       string
	Name            string
	Endpoint        string
	Query           string
	Comparator      string // <= (the value must stay at or below the line) or >=
	Line            float64
	Unit            string
	Consecutive     int
	IntervalSeconds int
	Breaches        int
	Recent          []WatchPoint
	NextCheckAt     time.Time
	LastCheckedAt   *time.Time
	LastValue       *float64
	LastError       string
	CreatedAt       time.Time
}

// WatchPoint is one check past the line.
type WatchPoint struct {
	At    time.Time `json:"at"`
	Value float64   `json:"value"`
}

// NewWatch is what a plan editor sets on a stage's watch.
type NewWatch struct {
	Name, Endpoint, Query, Comparator, Unit string
	Line                                    float64
	Consecutive, IntervalSeconds            int
	CreatedBy                               int64
}

const watchColumns = `w.id, w.program_id, w.stage_id, s.name, w.name, w.endpoint, w.query, w.comparator, w.line, w.unit, w.consecutive,
	w.interval_seconds, w.breaches, w.recent, w.next_check_at, w.last_checked_at, w.last_value, w.last_error, w.created_at`
const watchJoins = ` FROM rollout_watches w JOIN rollout_stages s ON s.id = w.stage_id`

func scanWatch(row pgx.Row) (Watch, error) {
	var w Watch
	err := row.Scan(&w.ID, &w.ProgramID, &w.StageID, &w.StageName, &w.Name, &w.Endpoint, &w.Query, &w.Comparator, &w.Line, &w.Unit,
		&w.Consecutive, &w.IntervalSeconds, &w.Breaches, &w.Recent, &w.NextCheckAt, &w.LastCheckedAt, &w.LastValue, &w.LastError, &w.CreatedAt)
	return w, err
}

func collectWatches(rows pgx.Rows, err error, what string) ([]Watch, error) {
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Watch, error) { return scanWatch(r) })
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return list, nil
}

// SetWatch creates or replaces a stage's watch; a replaced watch starts
// counting breaches afresh.
func (s *Store) SetWatch(ctx context.Context, programID, stageID int64, w NewWatch) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO rollout_watches (program_id, stage_id, name, endpoint, query, comparator, line, unit, consecutive, interval_seconds, created_by)
		SELECT $1, s.id, $3, $4, $5, $6, $7, $8, $9, $10, $11 FROM rollout_stages s WHERE s.program_id = $1 AND s.id = $2
		ON CONFLICT (stage_id) DO UPDATE SET name = EXCLUDED.name, endpoint = EXCLUDED.endpoint, query = EXCLUDED.query,
			comparator = EXCLUDED.comparator, line = EXCLUDED.line, unit = EXCLUDED.unit, consecutive = EXCLUDED.consecutive,
			interval_seconds = EXCLUDED.interval_seconds, breaches = 0, recent = '[]', next_check_at = now(), last_error = ''
		RETURNING id`, programID, stageID, w.Name, w.Endpoint, w.Query, w.Comparator, w.Line, w.Unit, w.Consecutive, w.IntervalSeconds, nullID(w.CreatedBy)).Scan(&id)
	if err != nil {
		return 0, notFound(err, fmt.Sprintf("watch of rollout stage %d", stageID))
	}
	return id, nil
}

// DeleteWatch removes a stage's watch (nothing when it has none).
func (s *Store) DeleteWatch(ctx context.Context, programID, stageID int64) (bool, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM rollout_watches WHERE program_id = $1 AND stage_id = $2`, programID, stageID)
	if err != nil {
		return false, fmt.Errorf("store: delete watch of stage %d: %w", stageID, err)
	}
	return tag.RowsAffected() > 0, nil
}

// ListWatches returns a program's watches.
func (s *Store) ListWatches(ctx context.Context, programID int64) ([]Watch, error) {
	rows, err := s.db.Query(ctx, `SELECT `+watchColumns+watchJoins+` WHERE w.program_id = $1 ORDER BY s.position`, programID)
	return collectWatches(rows, err, fmt.Sprintf("watches of program %d", programID))
}

// WatchByID returns a watch by id (for its worker).
func (s *Store) WatchByID(ctx context.Context, watchID int64) (Watch, error) {
	w, err := scanWatch(s.db.QueryRow(ctx, `SELECT `+watchColumns+watchJoins+` WHERE w.id = $1`, watchID))
	if err != nil {
		return w, notFound(err, fmt.Sprintf("watch %d", watchID))
	}
	return w, nil
}

// LockWatch returns a watch, locked for the transaction.
func (s *Store) LockWatch(ctx context.Context, watchID int64) (Watch, error) {
	w, err := scanWatch(s.db.QueryRow(ctx, `SELECT `+watchColumns+watchJoins+` WHERE w.id = $1 FOR UPDATE OF w`, watchID))
	if err != nil {
		return w, notFound(err, fmt.Sprintf("watch %d", watchID))
	}
	return w, nil
}

// ClaimDueWatches locks the watches due for a check by now, or within
// slack after it (skipping those another transaction holds), and moves
// each one's next check an interval after the one claimed: its checks
// keep their interval on average, each within slack of its time when the
// claims come at least every 2 × slack. After a pause (a check much later
// than due), the next one is an interval after this one, less slack,
// never a burst of checks to catch up.
func (s *Store) ClaimDueWatches(ctx context.Context, now time.Time, slack time.Duration, limit int) ([]Watch, error) {
	rows, err := s.db.Query(ctx, `WITH due AS (
			SELECT id FROM rollout_watches WHERE next_check_at <= $1::timestamptz + $3 * interval '1 millisecond'
			ORDER BY next_check_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE rollout_watches w SET next_check_at = greatest(w.next_check_at + make_interval(secs => w.interval_seconds),
				$1::timestamptz + make_interval(secs => w.interval_seconds) - $3 * interval '1 millisecond')
		FROM due, rollout_stages s WHERE w.id = due.id AND s.id = w.stage_id
		RETURNING `+watchColumns, now, limit, slack.Milliseconds())
	return collectWatches(rows, err, "claim due watches")
}

// RecordWatchCheck stores a check's outcome: the value (nil when the query
// failed or had no data), the error, and the run of breaches.
func (s *Store) RecordWatchCheck(ctx context.Context, watchID int64, at time.Time, value *float64, errText string, breaches int, recent []WatchPoint) error {
	if recent == nil {
		recent = []WatchPoint{}
	}
	_, err := s.db.Exec(ctx, `UPDATE rollout_watches SET last_checked_at = $2, last_value = coalesce($3, last_value), last_error = $4,
		breaches = $5, recent = $6 WHERE id = $1`, watchID, at, value, errText, breaches, recent)
	if err != nil {
		return fmt.Errorf("store: record check of watch %d: %w", watchID, err)
	}
	return nil
}

// ResetWatch clears a watch's run of breaches (its stage is not current).
func (s *Store) ResetWatch(ctx context.Context, watchID int64) error {
	_, err := s.db.Exec(ctx, `UPDATE rollout_watches SET breaches = 0, recent = '[]' WHERE id = $1 AND breaches <> 0`, watchID)
	if err != nil {
		return fmt.Errorf("store: reset watch %d: %w", watchID, err)
	}
	return nil
}
