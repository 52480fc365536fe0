package acceptance

import (
	"fmt"
	"strings"
)

// What a deployer (an Argo Rollouts analysis, a Flagger webhook) is told of
// a rollout stage. A deployer moves traffic; Accord's two sides decide. So
// a deployer proceeds past a stage only when both sides approved it, rolls
// back when Accord stopped it, and otherwise holds.

// DeployState is a stage's state as a deployer reads it.
type DeployState string

const (
	// DeployApproved: both sides signed the stage off (approved or waived).
	DeployApproved DeployState = "approved"
	// DeployHalted: Accord stopped the stage (a stop-loss or a halt), an
	// approver rejected it, or a rollback was requested: do not go on,
	// roll back.
	DeployHalted DeployState = "halted"
	// DeployWaiting: not decided yet (an earlier stage is not approved, or
	// a side's approval is missing), or the decision log cannot be trusted.
	DeployWaiting DeployState = "waiting"
)

// DeployGate is the answer about one stage.
type DeployGate struct {
	Stage string
	State DeployState
	// StageState is Accord's own state of the stage (pending,
	// awaiting-approval, approved, rejected, halted); empty when the log
	// does not replay.
	StageState StageState
	// Current: decisions apply to this stage now.
	Current bool
	// ApprovedBy lists the sides that signed the stage off in its current
	// attempt (vendor first).
	ApprovedBy []OrgKind
	// Reason says why, in one sentence, with who decided.
	Reason string
	// LogBroken: the decision log does not replay, so nothing is answered yes.
	LogBroken bool
}

// DeployGateOf reads a stage of a replayed rollout; false when it has no
// such stage. replayErr is the error of replaying the decision log on the
// plan (nil when it replays): a log that does not replay tells a deployer
// to wait, whatever the state says, since no decision read from it can be
// trusted (the caller checks that the plan has the stage).
func DeployGateOf(s RolloutState, stage string, replayErr error) (DeployGate, bool) {
	if replayErr != nil {
		return DeployGate{Stage: stage, State: DeployWaiting, LogBroken: true,
			Reason: "Accord's decision log does not replay on the rollout plan, so no decision is read from it; ask the program's owners."}, true
	}
	i := s.stageIndex(stage)
	if i < 0 {
		return DeployGate{}, false
	}
	st := s.Stages[i]
	g := DeployGate{Stage: st.Name, StageState: st.State, Current: i == s.Current}
	for _, side := range []OrgKind{OrgVendor, OrgCustomer} {
		if signoffBySide(st.Approvals, side) != nil {
			g.ApprovedBy = append(g.ApprovedBy, side)
		}
	}
	switch {
	case s.Rollback != nil:
		g.State, g.Reason = DeployHalted, fmt.Sprintf("A rollback was requested by %s: %s", s.Rollback.Actor.label(), s.Rollback.Reason)
	case st.State == StageHalted && st.Halt != nil:
		what := "halted"
		if st.Halt.Kind == DecisionStopLoss {
			what = "stopped by a stop-loss"
		}
		g.State, g.Reason = DeployHalted, fmt.Sprintf("The stage was %s by %s: %s", what, st.Halt.Actor.label(), st.Halt.Reason)
	case st.State == StageHalted:
		g.State, g.Reason = DeployHalted, "The stage is halted."
	case st.State == StageRejected && st.Rejection != nil:
		g.State, g.Reason = DeployHalted, fmt.Sprintf("The stage was rejected by %s: %s", st.Rejection.Actor.label(), st.Rejection.Reason)
	case st.State == StageRejected:
		g.State, g.Reason = DeployHalted, "The stage was rejected."
	case st.State == StageApproved:
		names := make([]string, len(st.Approvals))
		for j, a := range st.Approvals {
			names[j] = fmt.Sprintf("%s (%s)", a.Actor.label(), a.Actor.OrgKind)
		}
		g.State, g.Reason = DeployApproved, "Approved by both sides: "+strings.Join(names, ", ")+"."
	case st.State == StageAwaitingApproval:
		missing := make([]string, 0, 2)
		for _, side := range st.MissingSides() {
			missing = append(missing, string(side))
		}
		g.State, g.Reason = DeployWaiting, "The stage awaits the approval of the "+strings.Join(missing, " and the ")+" side."
	default:
		cur := "every stage"
		if c, ok := s.CurrentStage(); ok {
			cur = c.Name
		}
		g.State, g.Reason = DeployWaiting, fmt.Sprintf("The stage is not reached yet: %s must be approved first.", cur)
	}
	return g, true
}

// FlaggerHook is a Flagger webhook type Accord answers.
type FlaggerHook string

const (
	// FlaggerConfirmRollout runs before the canary is scaled up.
	FlaggerConfirmRollout FlaggerHook = "confirm-rollout"
	// FlaggerConfirmPromotion runs before the canary is promoted.
	FlaggerConfirmPromotion FlaggerHook = "confirm-promotion"
	// FlaggerRollback runs during the analysis and while waiting: a yes
	// rolls the canary back.
	FlaggerRollback FlaggerHook = "rollback"
)

// FlaggerHooks lists the hooks Accord answers.
var FlaggerHooks = []FlaggerHook{FlaggerConfirmRollout, FlaggerConfirmPromotion, FlaggerRollback}

// Yes says whether Flagger's hook is answered yes (HTTP 200; anything else
// is no): a canary of the stage may start once the rollout reached the
// stage (it is current or approved) and it is not halted; it may be
// promoted once both sides approved the stage; it is rolled back once
// Accord stopped it.
func (g DeployGate) Yes(hook FlaggerHook) bool {
	if g.LogBroken {
		return false
	}
	switch hook {
	case FlaggerConfirmRollout:
		return g.State == DeployApproved || (g.State == DeployWaiting && g.Current && g.StageState == StageAwaitingApproval)
	case FlaggerConfirmPromotion:
		return g.State == DeployApproved
	case FlaggerRollback:
		return g.State == DeployHalted
	}
	return false
}
