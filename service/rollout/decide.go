package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/dsse"
	"github.com/accordlab/accord/service"
	"github.com/accordlab/accord/store"
)

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

// Env is what recording a decision needs besides the transaction.
type Env struct {
	Keyring *attest.Keyring
	// Queue enqueues the webhook deliveries a decision raises.
	Queue service.Queue
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
func RecordDecision(ctx context.Context, tx *store.Store, env Env, in DecisionInput) (DecisionOutcome, error) {
	var out DecisionOutcome
	chain, err := tx.LockDecisionChain(ctx, in.ProgramID)
	if err != nil {
		return out, err
	}
	ro, err := Load(ctx, tx, in.ProgramID)
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
		if err := VerifyStoredLog(env.Keyring, in.ProgramID, ro.Decisions, chain); err != nil {
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
	if in.Kind == acceptance.DecisionApprove {
		// An approval's comment is optional; when given it is a reason's
		// plain text (Apply checks only the reasons it requires).
		if err := acceptance.CheckReasonText(d); err != nil {
			return out, err
		}
	}
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
		if out.Deliveries, err = enqueueWebhooks(ctx, tx, env.Queue, in.ProgramID, out); err != nil {
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

// VerifyStoredLog checks the program's stored log and chain head as
// `accord verify` checks an export: every record's signature, the hash
// chain, and the signed checkpoint.
func VerifyStoredLog(keyring *attest.Keyring, programID int64, ds []store.StoredDecision, chain store.DecisionChain) error {
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
		if !slices.Contains(dst.RunIDs, id) {
			dst.RunIDs = append(dst.RunIDs, id)
		}
	}
	for k, v := range src.Verdicts {
		dst.Verdicts[k] = v
	}
	for k, v := range src.Digests {
		dst.Digests[k] = v
	}
	for k, v := range src.Figures {
		if dst.Figures == nil {
			dst.Figures = map[string]string{}
		}
		dst.Figures[k] = v
	}
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
