package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/dsse"
	"github.com/accordlab/accord/store"
)

// Rollouts: every decision on a program's rollout — a person's approval,
// waiver, rejection, halt, resume or rollback request, or Accord's own
// stop-loss from a run or a production watch — goes through RecordDecision,
// in the caller's transaction: lock the program's decision chain, rebuild
// the rollout's state from the plan and the log (acceptance.ReplayRollout,
// the one source of the rules), read the stage's gates, apply the decision
// (acceptance.Apply), sign it and append it to the hash chain with a new
// signed checkpoint, and enqueue the webhooks it raises.

// registerRollouts adds the rollout workers (production watch, webhooks).
func registerRollouts(workers *river.Workers, d Deps) {
	river.AddWorker(workers, &WatchTickWorker{deps: d})
	river.AddWorker(workers, &WatchCheckWorker{deps: d})
	river.AddWorker(workers, &DeliverWebhookWorker{deps: d})
}

// WatchTick is how often River looks for production watches due a check;
// each watch has its own interval.
const WatchTick = 10 * time.Second

// rolloutPeriodic lists the rollout's periodic jobs (the production watch).
func rolloutPeriodic() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(WatchTick), func() (river.JobArgs, *river.InsertOpts) {
			return WatchTickArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}

// Inserter inserts a job in the caller's transaction: the handlers' River
// client, or a worker's (river.ClientFromContext).
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// workerInserter is the River client of the worker's context.
func workerInserter(ctx context.Context) (Inserter, error) {
	c, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return nil, fmt.Errorf("jobs: no River client in context: %w", err)
	}
	return c, nil
}

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

// LoadRollout reads a program's plan and decision log and replays them.
func LoadRollout(ctx context.Context, st *store.Store, programID int64) (Rollout, error) {
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

// GateReading is a stage's gates as they stand: the gate set version's
// verdict on each of the stage's profiles.
type GateReading struct {
	Stage    store.RolloutStage
	Profiles []ProfileEvidence
	Pass     bool
}

// ProfileEvidence is the run a stage's gates are judged on for one profile.
type ProfileEvidence struct {
	ProfileID   int64
	ProfileName string
	Pinned      bool       // chosen explicitly rather than the latest qualifying run
	Run         *store.Run // nil: no qualifying run
	Verdict     string     // the run's verdict by the stage's gate set version
	// EvaluationDigest is the digest of the evaluation behind the verdict.
	EvaluationDigest string
	// Problem says why there is no usable verdict.
	Problem string
}

// ReadGates judges a stage's gates on its profiles' evidence runs: the
// run chosen explicitly, or the latest finished run of the profile judged
// by the stage's gate set version. They pass when every profile has a run
// whose verdict is PASS.
func ReadGates(ctx context.Context, st *store.Store, stage store.RolloutStage) (GateReading, error) {
	g := GateReading{Stage: stage, Pass: len(stage.Profiles) > 0}
	for _, p := range stage.Profiles {
		ev := ProfileEvidence{ProfileID: p.ProfileID, ProfileName: p.ProfileName, Pinned: p.RunID != nil}
		var run store.Run
		var err error
		if p.RunID != nil {
			run, err = st.GetRun(ctx, stage.ProgramID, *p.RunID)
		} else {
			run, err = st.LatestJudgedRun(ctx, stage.ProgramID, p.ProfileID, stage.GateSetVersionID)
		}
		switch {
		case errors.Is(err, store.ErrNotFound) && p.RunID != nil:
			ev.Problem = fmt.Sprintf("the chosen run #%d no longer exists", *p.RunID)
		case errors.Is(err, store.ErrNotFound):
			ev.Problem = fmt.Sprintf("no finished run of %s judged by %s yet", p.ProfileName, stage.GateSetLabel())
		case err != nil:
			return g, err
		default:
			ev.Run = &run
			ev.Verdict = run.Verdict
			switch {
			case run.ProfileID == nil || *run.ProfileID != p.ProfileID:
				ev.Problem = fmt.Sprintf("run #%d is not a run of %s", run.ID, p.ProfileName)
			case run.GateSetVersionID == nil || *run.GateSetVersionID != stage.GateSetVersionID:
				ev.Problem = fmt.Sprintf("run #%d was not judged by %s", run.ID, stage.GateSetLabel())
			case run.State != store.RunDone || run.Verdict == "":
				ev.Problem = fmt.Sprintf("run #%d is %s without a verdict", run.ID, run.State)
			}
			if ev.Problem == "" {
				e, err := st.LatestEvaluation(ctx, run.ID)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return g, err
				}
				if err == nil && e.GateSetVersionID == stage.GateSetVersionID {
					ev.EvaluationDigest = e.Digest
				}
			}
		}
		if ev.Problem != "" || ev.Verdict != "PASS" {
			g.Pass = false
		}
		g.Profiles = append(g.Profiles, ev)
	}
	return g, nil
}

// Verdict is the gates' reading as one word.
func (g GateReading) Verdict() string {
	if g.Pass {
		return "PASS"
	}
	return "FAIL"
}

// Evidence is the reading as a decision record carries it: the runs, their
// verdicts and the digests of the gate set and the evaluations.
func (g GateReading) Evidence() attest.DecisionEvidence {
	e := attest.DecisionEvidence{RunIDs: []string{}, Verdicts: map[string]string{GatesKey: g.Verdict()}, Digests: map[string]string{}}
	e.Digests["gate_set_version/"+strconv.FormatInt(g.Stage.GateSetVersionID, 10)] = g.Stage.GateSetDigest
	for _, p := range g.Profiles {
		if p.Run == nil {
			e.Verdicts["profile/"+p.ProfileName] = "NO RUN"
			continue
		}
		id := strconv.FormatInt(p.Run.ID, 10)
		e.RunIDs = append(e.RunIDs, id)
		v := p.Verdict
		if p.Problem != "" {
			v = "UNUSABLE"
		}
		e.Verdicts[id] = v
		if p.EvaluationDigest != "" {
			e.Digests["evaluation/"+id] = p.EvaluationDigest
		}
	}
	return e
}

// Summary says the reading in one line, for the state machine's record.
func (g GateReading) Summary() string {
	parts := make([]string, 0, len(g.Profiles))
	for _, p := range g.Profiles {
		switch {
		case p.Problem != "":
			parts = append(parts, p.ProfileName+": "+p.Problem)
		default:
			parts = append(parts, fmt.Sprintf("%s: run %d %s", p.ProfileName, p.Run.ID, p.Verdict))
		}
	}
	return fmt.Sprintf("%s %s (%s)", g.Stage.GateSetLabel(), g.Verdict(), strings.Join(parts, "; "))
}

// DecisionInput is a decision someone (or Accord) asks to record.
type DecisionInput struct {
	ProgramID int64
	Kind      acceptance.DecisionKind
	Stage     string
	// Actor: UserID is the person's e-mail address in lower case (what the
	// record names), OrgKind their side, Approver their role.
	Actor       acceptance.Actor
	ActorUserID int64 // 0 for the system
	OrgName     string
	Reason      string
	At          time.Time
	// Extra adds to the evidence (a run's stop-loss breach, a watch's values).
	Extra *attest.DecisionEvidence
}

// DecisionEnv is what recording a decision needs besides the transaction.
type DecisionEnv struct {
	Keyring  *attest.Keyring
	Inserter Inserter
}

// DecisionOutcome is a recorded decision and what it did.
type DecisionOutcome struct {
	Record     attest.SignedDecision
	Before     acceptance.RolloutState
	After      acceptance.RolloutState
	Events     []string
	Deliveries int
}

// ErrNoPlan refuses a decision on a program without a rollout plan.
var ErrNoPlan = errors.New("the program has no rollout plan")

// RecordDecision applies a decision to a program's rollout and, when the
// rules accept it, appends it to the signed decision log, in tx. A refusal
// is an *acceptance.TransitionError (nothing is written).
func RecordDecision(ctx context.Context, tx *store.Store, env DecisionEnv, in DecisionInput) (DecisionOutcome, error) {
	var out DecisionOutcome
	chain, err := tx.LockDecisionChain(ctx, in.ProgramID)
	if err != nil {
		return out, err
	}
	ro, err := LoadRollout(ctx, tx, in.ProgramID)
	if err != nil {
		return out, err
	}
	if len(ro.Stages) == 0 {
		return out, fmt.Errorf("%w: %w", ErrNoPlan, &acceptance.TransitionError{Kind: in.Kind, Message: "the program has no rollout plan"})
	}
	if ro.ReplayErr != nil {
		return out, fmt.Errorf("rollout of program %d: the decision log does not replay on the plan: %w", in.ProgramID, ro.ReplayErr)
	}
	if !stopsTheRollout(in.Kind) {
		if err := verifyStoredLog(env.Keyring, in.ProgramID, ro.Decisions, chain); err != nil {
			return out, &acceptance.TransitionError{Kind: in.Kind, Message: "The decision log does not verify (" + err.Error() +
				"): the state it gives cannot be trusted, so nothing that moves the rollout on is recorded until the log is restored. Halting stays possible."}
		}
	}
	if in.At.IsZero() {
		in.At = time.Now()
	}
	in.At = in.At.UTC().Truncate(time.Microsecond)
	evidence := attest.DecisionEvidence{RunIDs: []string{}, Verdicts: map[string]string{}, Digests: map[string]string{}}
	summary := ""
	d := acceptance.Decision{Kind: in.Kind, Stage: in.Stage, Actor: in.Actor, Reason: in.Reason, At: in.At}
	if stage, ok := ro.Stage(in.Stage); ok {
		reading, err := ReadGates(ctx, tx, stage)
		if err != nil {
			return out, err
		}
		evidence = reading.Evidence()
		summary = reading.Summary()
		d.GatesPass = reading.Pass
	}
	if in.Extra != nil {
		mergeEvidence(&evidence, *in.Extra)
	}
	d.Evidence = summary
	next, err := acceptance.Apply(ro.State, d)
	if err != nil {
		return out, err
	}
	signer, err := env.Keyring.Active()
	if err != nil {
		return out, fmt.Errorf("rollout: signing key: %w", err)
	}
	rec, err := attest.NextDecision(chain.Head(), attest.Decision{
		Chain: chain.Chain, Kind: string(in.Kind), Actor: in.Actor.UserID, Organisation: Organisation(in.Actor.OrgKind, in.OrgName),
		Time: in.At, Stage: in.Stage, Evidence: evidence, Reason: in.Reason,
	})
	if err != nil {
		return out, err
	}
	signed, err := attest.SignDecision(signer, rec)
	if err != nil {
		return out, err
	}
	checkpoint, err := attest.SignCheckpoint(signer, chain.Chain, &signed, time.Now())
	if err != nil {
		return out, fmt.Errorf("rollout: sign checkpoint: %w", err)
	}
	if err := tx.AppendDecision(ctx, in.ProgramID, signed, in.ActorUserID, checkpoint); err != nil {
		return out, err
	}
	out = DecisionOutcome{Record: signed, Before: ro.State, After: next, Events: raisedEvents(ro.State, next, in.Kind)}
	if len(out.Events) > 0 {
		if out.Deliveries, err = enqueueWebhooks(ctx, tx, env.Inserter, in.ProgramID, ro, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// stopsTheRollout: decisions that only ever stop or hold a rollout. They
// are recorded even on a log that does not verify, as stopping is safe
// whatever the log says.
func stopsTheRollout(k acceptance.DecisionKind) bool {
	return k == acceptance.DecisionHalt || k == acceptance.DecisionStopLoss || k == acceptance.DecisionRollbackRequested
}

// verifyStoredLog checks the program's stored log and chain head as
// `accord verify` checks an export: every record's signature, the hash
// chain, and the signed checkpoint.
func verifyStoredLog(keyring *attest.Keyring, programID int64, ds []store.StoredDecision, chain store.DecisionChain) error {
	if len(ds) == 0 && chain.HeadSeq == 0 {
		return nil
	}
	keys, err := keyring.KeySet()
	if err != nil {
		return err
	}
	_, err = StoredLog(programID, ds, chain.Checkpoint).Verify(keys)
	return err
}

// StoredLog is a program's stored decision log in the form `accord verify`
// reads an export (checkpoint nil before the first decision).
func StoredLog(programID int64, ds []store.StoredDecision, checkpoint *dsse.Envelope) *attest.DecisionLog {
	signed := make([]attest.SignedDecision, len(ds))
	for i, d := range ds {
		signed[i] = d.Signed()
	}
	return attest.NewDecisionLog(store.ChainName(programID), signed, checkpoint)
}

func mergeEvidence(dst *attest.DecisionEvidence, src attest.DecisionEvidence) {
	for _, id := range src.RunIDs {
		if !containsString(dst.RunIDs, id) {
			dst.RunIDs = append(dst.RunIDs, id)
		}
	}
	for k, v := range src.Verdicts {
		dst.Verdicts[k] = v
	}
	for k, v := range src.Digests {
		dst.Digests[k] = v
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// raisedEvents are the webhook events a decision raises, the most
// specific first: a stop-loss is also a halt.
func raisedEvents(before, after acceptance.RolloutState, kind acceptance.DecisionKind) []string {
	var out []string
	if kind == acceptance.DecisionStopLoss {
		out = append(out, store.EventStopLoss)
	}
	if before.Current < len(before.Stages) {
		b, a := before.Stages[before.Current], after.Stages[before.Current]
		if a.State == acceptance.StageHalted && b.State != acceptance.StageHalted {
			out = append(out, store.EventStageHalted)
		}
		if a.State == acceptance.StageApproved && b.State != acceptance.StageApproved {
			out = append(out, store.EventStageApproved)
		}
	}
	return out
}

// onRunStopLoss runs in the transaction that ends a run stopped by a
// stop-loss line: it halts the rollout stage the run is evidence for and
// records the system's decision.
func onRunStopLoss(ctx context.Context, tx *store.Store, d Deps, run store.Run, breach *acceptance.StopLossBreach) error {
	ins, err := workerInserter(ctx)
	if err != nil {
		return err
	}
	_, err = haltForRunStopLoss(ctx, tx, DecisionEnv{Keyring: d.Keyring, Inserter: ins}, run, breach)
	return err
}

// haltForRunStopLoss records Accord's stop-loss decision when the run is
// evidence for the current stage (the stage's gate set version judged it,
// on one of the stage's profiles); it says what it did in the run's log.
// It returns whether a stage was halted.
func haltForRunStopLoss(ctx context.Context, tx *store.Store, env DecisionEnv, run store.Run, breach *acceptance.StopLossBreach) (bool, error) {
	if run.GateSetVersionID == nil || run.ProfileID == nil || breach == nil {
		return false, nil
	}
	// Lock first, so that the plan and the log read below stay as they are.
	if _, err := tx.LockDecisionChain(ctx, run.ProgramID); err != nil {
		return false, err
	}
	ro, err := LoadRollout(ctx, tx, run.ProgramID)
	if err != nil {
		return false, err
	}
	stage, status, ok := ro.CurrentStage()
	if !ok || stage.GateSetVersionID != *run.GateSetVersionID || !stageHasProfile(stage, *run.ProfileID) {
		return false, nil
	}
	if status.State != acceptance.StageAwaitingApproval {
		return false, tx.AddRunNote(ctx, run.ID, "info", fmt.Sprintf("stop-loss: rollout stage %s is already %s; no new decision", stage.Name, status.State))
	}
	runID := strconv.FormatInt(run.ID, 10)
	raw, err := json.Marshal(breach)
	if err != nil {
		return false, fmt.Errorf("stop-loss of run %d: %w", run.ID, err)
	}
	sum := sha256.Sum256(raw)
	extra := attest.DecisionEvidence{RunIDs: []string{runID},
		Verdicts: map[string]string{runID + "/" + breach.Name: "STOP-LOSS"},
		Digests:  map[string]string{"stop_loss/" + runID: "sha256:" + hex.EncodeToString(sum[:])}}
	reason := fmt.Sprintf("Run %d: %s", run.ID, breach.Explanation)
	_, err = RecordDecision(ctx, tx, env, DecisionInput{ProgramID: run.ProgramID, Kind: acceptance.DecisionStopLoss, Stage: stage.Name,
		Actor: SystemActor, Reason: reason, At: time.Now(), Extra: &extra})
	var refused *acceptance.TransitionError
	if errors.As(err, &refused) {
		return false, tx.AddRunNote(ctx, run.ID, "warn", "stop-loss: the rollout refused the halt: "+refused.Message)
	}
	if err != nil {
		return false, err
	}
	return true, tx.AddRunNote(ctx, run.ID, "warn", fmt.Sprintf("stop-loss: rollout stage %s halted; the decision is in the program's decision log", stage.Name))
}

func stageHasProfile(s store.RolloutStage, profileID int64) bool {
	for _, p := range s.Profiles {
		if p.ProfileID == profileID {
			return true
		}
	}
	return false
}

// AwaitedSide is a stage that waits for one side's sign-off.
type AwaitedSide struct {
	Stage  string
	Resume bool // the stage is halted: the side must agree to resume it
}

// Awaiting returns what the rollout waits for from a side (nothing when
// complete, rejected, rolled back or broken).
func (r Rollout) Awaiting(side acceptance.OrgKind) (AwaitedSide, bool) {
	if r.ReplayErr != nil || r.State.Rollback != nil {
		return AwaitedSide{}, false
	}
	st, ok := r.State.CurrentStage()
	if !ok {
		return AwaitedSide{}, false
	}
	for _, s := range st.MissingSides() {
		if s == side {
			return AwaitedSide{Stage: st.Name, Resume: st.State == acceptance.StageHalted}, true
		}
	}
	return AwaitedSide{}, false
}
