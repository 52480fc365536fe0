// Package rollout is a program's rollout: its state rebuilt from the
// plan and the signed decision log, and every decision on it. Every
// decision — a person's approval, waiver, rejection, halt, resume or
// rollback request, or Accord's own stop-loss from a run or a production
// watch — goes through RecordDecision, in the caller's transaction: lock
// the program's decision chain, rebuild the rollout's state from the plan
// and the log (acceptance.ReplayRollout, the one source of the rules),
// read the stage's gates, apply the decision (acceptance.Apply), sign it
// and append it to the hash chain with a new signed checkpoint, and
// enqueue the webhooks it raises.
package rollout

import (
	"context"
	"errors"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/store"
)

// SystemActor is Accord itself: it may only record a stop-loss.
var SystemActor = acceptance.Actor{UserID: "accord", Name: "Accord", OrgKind: acceptance.OrgSystem}

// Rollout is a program's plan with its state rebuilt from the decision log.
type Rollout struct {
	Stages    []store.RolloutStage
	Decisions []store.StoredDecision
	State     acceptance.RolloutState
	// ReplayErr says the log does not replay on the plan (the plan or the
	// log was changed behind Accord's back); no decision is taken then.
	ReplayErr error
}

// Plan is the plan as the state machine sees it.
func (r Rollout) Plan() acceptance.RolloutPlan {
	p := acceptance.RolloutPlan{Stages: make([]acceptance.RolloutStage, len(r.Stages))}
	for i, s := range r.Stages {
		p.Stages[i] = acceptance.RolloutStage{Name: s.Name, Description: s.Description}
	}
	return p
}

// Stage returns the plan's stage of a name.
func (r Rollout) Stage(name string) (store.RolloutStage, bool) {
	for _, s := range r.Stages {
		if s.Name == name {
			return s, true
		}
	}
	return store.RolloutStage{}, false
}

// CurrentStage returns the stage decisions apply to (false once complete,
// or without a plan).
func (r Rollout) CurrentStage() (store.RolloutStage, acceptance.StageStatus, bool) {
	st, ok := r.State.CurrentStage()
	if !ok || r.ReplayErr != nil {
		return store.RolloutStage{}, st, false
	}
	s, ok := r.Stage(st.Name)
	return s, st, ok
}

// Named reports whether any decision of the log names the stage.
func (r Rollout) Named(stage string) bool {
	for _, d := range r.Decisions {
		if d.Record.Stage == stage {
			return true
		}
	}
	return false
}

// Load reads a program's plan and decision log and replays them.
func Load(ctx context.Context, st *store.Store, programID int64) (Rollout, error) {
	var r Rollout
	var err error
	if r.Stages, err = st.ListRolloutStages(ctx, programID); err != nil {
		return r, err
	}
	if r.Decisions, err = st.ListDecisions(ctx, programID); err != nil {
		return r, err
	}
	if len(r.Stages) == 0 {
		if len(r.Decisions) > 0 {
			r.ReplayErr = errors.New("the program has decisions but no rollout plan")
		}
		return r, nil
	}
	ds := make([]acceptance.Decision, len(r.Decisions))
	for i, d := range r.Decisions {
		ds[i] = RuleDecision(d.Record)
	}
	r.State, r.ReplayErr = acceptance.ReplayRollout(r.Plan(), ds)
	return r, nil
}

// Organisation is how a record names the actor's side: "vendor:Acme",
// "customer:BigCloud" or "system".
func Organisation(kind acceptance.OrgKind, name string) string {
	if kind == acceptance.OrgSystem || name == "" {
		return string(kind)
	}
	return string(kind) + ":" + name
}

// RuleDecision reads a signed record back as the state machine's decision:
// everything the rules depend on is in the signed record (the actor, the
// side, the gates' reading), so that replay trusts nothing unsigned.
func RuleDecision(rec attest.Decision) acceptance.Decision {
	kind, _, _ := strings.Cut(rec.Organisation, ":")
	ok := acceptance.OrgKind(kind)
	return acceptance.Decision{
		Kind:  acceptance.DecisionKind(rec.Kind),
		Stage: rec.Stage,
		// Persons were approvers when they signed (the server checks the
		// role before recording); the system never is.
		Actor:     acceptance.Actor{UserID: rec.Actor, Name: rec.Actor, OrgKind: ok, Approver: ok != acceptance.OrgSystem},
		GatesPass: rec.Evidence.Verdicts[GatesKey] == "PASS",
		Reason:    rec.Reason,
		At:        rec.Time,
	}
}

// GatesKey is the evidence verdict of a stage's gates as a whole.
const GatesKey = "gates"
