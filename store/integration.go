package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The integration plan: a program's sequence of integration steps
// (plan_steps), each with its evidence and both sides' sign-offs. Not the
// probe's plan (wire.Plan) nor the rollout's stages (rollouts.go).

// Integration step statuses.
const (
	StepNotStarted = "not_started"
	StepInProgress = "in_progress"
	StepDone       = "done"
	StepBlocked    = "blocked"
)

// StepStatuses lists the statuses in the order forms offer them.
var StepStatuses = []string{StepNotStarted, StepInProgress, StepDone, StepBlocked}

// ValidStepStatus reports whether s is an integration step status.
func ValidStepStatus(s string) bool {
	for _, k := range StepStatuses {
		if k == s {
			return true
		}
	}
	return false
}

// StepStatusLabel is a status as pages say it.
func StepStatusLabel(s string) string {
	switch s {
	case StepNotStarted:
		return "not started"
	case StepInProgress:
		return "in progress"
	}
	return s
}

// Sides of a sign-off: the program's two organisations.
const (
	SideVendor   = "vendor"
	SideCustomer = "customer"
)

// IntegrationSeed is one step of the sequence a program's integration plan starts
// with.
type IntegrationSeed struct {
	Kind        string
	Title       string
	Description string
	CheckIDs    []string
}

// IntegrationStep is one step of a program's integration plan.
type IntegrationStep struct {
	ID            int64
	ProgramID     int64
	Kind          string
	Position      int
	Title         string
	Description   string
	OwnerUserID   *int64
	OwnerName     string
	OwnerOrgKind  string
	Status        string
	Note          string
	UpdatedByName string
	UpdatedAt     time.Time
	CheckIDs      []string
	RunIDs        []int64
	SignOffs      []StepSignOff
}

// SignOff returns the sign-off of a side, if any.
func (p IntegrationStep) SignOff(side string) (StepSignOff, bool) {
	for _, s := range p.SignOffs {
		if s.Side == side {
			return s, true
		}
	}
	return StepSignOff{}, false
}

// StepSignOff is one side's sign-off of a step.
type StepSignOff struct {
	Side     string
	UserID   int64
	Name     string
	Email    string
	SignedAt time.Time
}

// EnsureIntegrationSteps seeds a program's integration plan with the sequence when it has none of
// these steps yet (steps already there are left as they are). It returns
// how many steps it added.
func (s *Store) EnsureIntegrationSteps(ctx context.Context, programID int64, seeds []IntegrationSeed) (int, error) {
	added := 0
	for i, sd := range seeds {
		var id int64
		err := s.db.QueryRow(ctx, `INSERT INTO plan_steps (program_id, kind, position, title, description)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (program_id, kind) DO NOTHING RETURNING id`,
			programID, sd.Kind, i+1, sd.Title, sd.Description).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return added, fmt.Errorf("store: seed plan step %s of program %d: %w", sd.Kind, programID, err)
		}
		added++
		if len(sd.CheckIDs) > 0 {
			if _, err := s.db.Exec(ctx, `INSERT INTO plan_step_checks (step_id, check_id) SELECT $1, unnest($2::text[])`, id, sd.CheckIDs); err != nil {
				return added, fmt.Errorf("store: seed checks of plan step %s: %w", sd.Kind, err)
			}
		}
	}
	return added, nil
}

const planStepColumns = `ps.id, ps.program_id, ps.kind, ps.position, ps.title, ps.description, ps.owner_user_id,
	coalesce(ou.display_name, ''), coalesce(oo.kind, ''), ps.status, ps.note, coalesce(uu.display_name, ''), ps.updated_at,
	coalesce((SELECT array_agg(check_id ORDER BY check_id) FROM plan_step_checks WHERE step_id = ps.id), '{}'),
	coalesce((SELECT array_agg(run_id ORDER BY run_id) FROM plan_step_runs WHERE step_id = ps.id), '{}')`

const planStepJoins = ` FROM plan_steps ps
	LEFT JOIN users ou ON ou.id = ps.owner_user_id
	LEFT JOIN organizations oo ON oo.id = ou.organization_id
	LEFT JOIN users uu ON uu.id = ps.updated_by`

func scanIntegrationStep(row pgx.Row) (IntegrationStep, error) {
	var p IntegrationStep
	err := row.Scan(&p.ID, &p.ProgramID, &p.Kind, &p.Position, &p.Title, &p.Description, &p.OwnerUserID,
		&p.OwnerName, &p.OwnerOrgKind, &p.Status, &p.Note, &p.UpdatedByName, &p.UpdatedAt, &p.CheckIDs, &p.RunIDs)
	return p, err
}

// ListIntegrationSteps returns a program's integration plan in order, with evidence and sign-offs.
func (s *Store) ListIntegrationSteps(ctx context.Context, programID int64) ([]IntegrationStep, error) {
	rows, err := s.db.Query(ctx, `SELECT `+planStepColumns+planStepJoins+` WHERE ps.program_id = $1 ORDER BY ps.position, ps.id`, programID)
	if err != nil {
		return nil, fmt.Errorf("store: plan of program %d: %w", programID, err)
	}
	steps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (IntegrationStep, error) { return scanIntegrationStep(r) })
	if err != nil {
		return nil, fmt.Errorf("store: plan of program %d: %w", programID, err)
	}
	if err := s.attachSignOffs(ctx, programID, steps); err != nil {
		return nil, err
	}
	return steps, nil
}

// GetIntegrationStep returns one step of the program's integration plan.
func (s *Store) GetIntegrationStep(ctx context.Context, programID, stepID int64) (IntegrationStep, error) {
	p, err := scanIntegrationStep(s.db.QueryRow(ctx, `SELECT `+planStepColumns+planStepJoins+` WHERE ps.id = $1 AND ps.program_id = $2`, stepID, programID))
	if err != nil {
		return p, notFound(err, fmt.Sprintf("plan step %d", stepID))
	}
	steps := []IntegrationStep{p}
	if err := s.attachSignOffs(ctx, programID, steps); err != nil {
		return p, err
	}
	return steps[0], nil
}

func (s *Store) attachSignOffs(ctx context.Context, programID int64, steps []IntegrationStep) error {
	rows, err := s.db.Query(ctx, `SELECT so.step_id, so.side, so.user_id, u.display_name, u.email, so.signed_at
		FROM plan_signoffs so JOIN plan_steps ps ON ps.id = so.step_id JOIN users u ON u.id = so.user_id
		WHERE ps.program_id = $1 ORDER BY so.side DESC`, programID)
	if err != nil {
		return fmt.Errorf("store: plan sign-offs of program %d: %w", programID, err)
	}
	byStep := map[int64]int{}
	for i, st := range steps {
		byStep[st.ID] = i
	}
	var stepID int64
	var so StepSignOff
	_, err = pgx.ForEachRow(rows, []any{&stepID, &so.Side, &so.UserID, &so.Name, &so.Email, &so.SignedAt}, func() error {
		if i, ok := byStep[stepID]; ok {
			steps[i].SignOffs = append(steps[i].SignOffs, so)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: plan sign-offs of program %d: %w", programID, err)
	}
	return nil
}

// IntegrationStepUpdate is what an engineer saves on a step: the evidence sets
// replace the step's.
type IntegrationStepUpdate struct {
	OwnerUserID *int64
	Status      string
	Note        string
	CheckIDs    []string
	RunIDs      []int64
	UpdatedBy   int64
}

// UpdateIntegrationStep saves a step. The owner must be a member of the program
// and the runs must be the program's (ErrNotFound otherwise). It runs
// several statements: call it inside InTx.
func (s *Store) UpdateIntegrationStep(ctx context.Context, programID, stepID int64, u IntegrationStepUpdate) error {
	if u.OwnerUserID != nil {
		var member bool
		if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM program_members WHERE program_id = $1 AND user_id = $2)`,
			programID, *u.OwnerUserID).Scan(&member); err != nil {
			return fmt.Errorf("store: plan step %d owner: %w", stepID, err)
		}
		if !member {
			return fmt.Errorf("store: plan step %d owner %d is not a member: %w", stepID, *u.OwnerUserID, ErrNotFound)
		}
	}
	if u.RunIDs == nil {
		u.RunIDs = []int64{}
	}
	if u.CheckIDs == nil {
		u.CheckIDs = []string{}
	}
	var found int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM runs WHERE program_id = $1 AND id = ANY($2)`, programID, u.RunIDs).Scan(&found); err != nil {
		return fmt.Errorf("store: plan step %d runs: %w", stepID, err)
	}
	if found != len(uniqueInt64(u.RunIDs)) {
		return fmt.Errorf("store: plan step %d: a run is not the program's: %w", stepID, ErrNotFound)
	}
	tag, err := s.db.Exec(ctx, `UPDATE plan_steps SET owner_user_id = $3, status = $4, note = $5, updated_by = $6, updated_at = now()
		WHERE id = $1 AND program_id = $2`, stepID, programID, u.OwnerUserID, u.Status, u.Note, nullID(u.UpdatedBy))
	if err != nil {
		return fmt.Errorf("store: update plan step %d: %w", stepID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: plan step %d: %w", stepID, ErrNotFound)
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM plan_step_checks WHERE step_id = $1`, stepID); err != nil {
		return fmt.Errorf("store: plan step %d checks: %w", stepID, err)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO plan_step_checks (step_id, check_id) SELECT DISTINCT $1::bigint, unnest($2::text[])`, stepID, u.CheckIDs); err != nil {
		return fmt.Errorf("store: plan step %d checks: %w", stepID, err)
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM plan_step_runs WHERE step_id = $1`, stepID); err != nil {
		return fmt.Errorf("store: plan step %d runs: %w", stepID, err)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO plan_step_runs (step_id, run_id) SELECT DISTINCT $1::bigint, unnest($2::bigint[])`, stepID, u.RunIDs); err != nil {
		return fmt.Errorf("store: plan step %d runs: %w", stepID, err)
	}
	return nil
}

func uniqueInt64(in []int64) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, v := range in {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// ErrStepNotDone is returned when a step that is not done would be
// signed off.
var ErrStepNotDone = errors.New("the plan step is not done")

// SignOffIntegrationStep records one side's sign-off of a done step of the
// program. A side that signed already is ErrConflict; a step that is not
// done is ErrStepNotDone.
func (s *Store) SignOffIntegrationStep(ctx context.Context, programID, stepID int64, side string, userID int64) error {
	var status string
	err := s.db.QueryRow(ctx, `SELECT status FROM plan_steps WHERE id = $1 AND program_id = $2 FOR UPDATE`, stepID, programID).Scan(&status)
	if err != nil {
		return notFound(err, fmt.Sprintf("plan step %d", stepID))
	}
	if status != StepDone {
		return fmt.Errorf("store: sign off plan step %d (%s): %w", stepID, status, ErrStepNotDone)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO plan_signoffs (step_id, side, user_id) VALUES ($1, $2, $3)`, stepID, side, userID); err != nil {
		return notFound(err, fmt.Sprintf("sign off plan step %d", stepID))
	}
	return nil
}

// ClearStepSignOffs withdraws a step's sign-offs (the step changed after
// they were given) and returns how many there were.
func (s *Store) ClearStepSignOffs(ctx context.Context, programID, stepID int64) (int, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM plan_signoffs so USING plan_steps ps
		WHERE so.step_id = ps.id AND ps.id = $1 AND ps.program_id = $2`, stepID, programID)
	if err != nil {
		return 0, fmt.Errorf("store: withdraw sign-offs of plan step %d: %w", stepID, err)
	}
	return int(tag.RowsAffected()), nil
}

// FinishedRunsOnTransport lists a program's finished (done) runs whose
// profile version's storage transport is transport, newest first.
func (s *Store) FinishedRunsOnTransport(ctx context.Context, programID int64, transport string) ([]Run, error) {
	rows, err := s.db.Query(ctx, `SELECT `+runColumns+runJoins+`
		WHERE r.program_id = $1 AND r.state = 'done' AND pv.spec->'storage'->>'transport' = $2
		ORDER BY r.id DESC LIMIT 100`, programID, transport)
	return collectRuns(rows, err, "finished runs on "+transport)
}

// ProfilesRunOnHosts maps each host of the program to the profiles (spec
// ids) that ran on it.
func (s *Store) ProfilesRunOnHosts(ctx context.Context, programID int64) (map[int64]map[int64]bool, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT r.host_id, pv.profile_id FROM runs r JOIN profile_versions pv ON pv.id = r.profile_version_id
		WHERE r.program_id = $1 AND r.host_id IS NOT NULL`, programID)
	if err != nil {
		return nil, fmt.Errorf("store: profiles run on hosts of program %d: %w", programID, err)
	}
	out := map[int64]map[int64]bool{}
	var host, profile int64
	_, err = pgx.ForEachRow(rows, []any{&host, &profile}, func() error {
		if out[host] == nil {
			out[host] = map[int64]bool{}
		}
		out[host][profile] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: profiles run on hosts of program %d: %w", programID, err)
	}
	return out, nil
}
