package acceptance

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	vera   = Actor{UserID: "u-vera", Name: "Vera", OrgID: "acme-storage", OrgKind: OrgVendor, Approver: true}
	viktor = Actor{UserID: "u-viktor", Name: "Viktor", OrgID: "acme-storage", OrgKind: OrgVendor, Approver: true}
	chen   = Actor{UserID: "u-chen", Name: "Chen", OrgID: "bigcloud", OrgKind: OrgCustomer, Approver: true}
	carla  = Actor{UserID: "u-carla", Name: "Carla", OrgID: "bigcloud", OrgKind: OrgCustomer, Approver: true}
	cleo   = Actor{UserID: "u-cleo", Name: "Cleo", OrgID: "bigcloud", OrgKind: OrgCustomer} // member, not an approver
	accord = Actor{UserID: "accord", Name: "Accord", OrgKind: OrgSystem}
)

var rolloutPlan = RolloutPlan{Stages: []RolloutStage{
	{Name: "pilot", Description: "One inference node on NVMe-oF."},
	{Name: "canary", Description: "10 % of the fleet."},
	{Name: "fleet"},
}}

var decisionClock = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func decide(kind DecisionKind, who Actor, stage string, gatesPass bool, reason string) Decision {
	return Decision{Kind: kind, Stage: stage, Actor: who, GatesPass: gatesPass, Reason: reason, At: decisionClock}
}

func approve(who Actor, stage string) Decision { return decide(DecisionApprove, who, stage, true, "") }
func waive(who Actor, stage, reason string) Decision {
	return decide(DecisionWaive, who, stage, false, reason)
}
func halt(who Actor, stage string) Decision {
	return decide(DecisionHalt, who, stage, false, "TTFT spikes on the canary dashboard")
}
func stopLoss(who Actor, stage string) Decision {
	return decide(DecisionStopLoss, who, stage, false, "run 42: ttft-p99 4310 ms crossed the stop-loss line 4000 ms")
}
func resume(who Actor, stage string) Decision {
	return decide(DecisionResume, who, stage, false, "firmware 2.1.4 fixes the path flaps")
}
func reject(who Actor, stage string) Decision {
	return decide(DecisionReject, who, stage, false, "throughput uplift not shown")
}
func rollback(who Actor) Decision {
	return decide(DecisionRollbackRequested, who, "", false, "customer incident 7781")
}

func stageStates(st RolloutState) []StageState {
	out := make([]StageState, len(st.Stages))
	for i, s := range st.Stages {
		out[i] = s.State
	}
	return out
}

func TestRolloutTransitions(t *testing.T) {
	t.Parallel()
	approvedPilot := []Decision{approve(vera, "pilot"), approve(chen, "pilot")}
	complete := append(append(append([]Decision(nil), approvedPilot...), approve(vera, "canary"), approve(chen, "canary")), approve(vera, "fleet"), approve(chen, "fleet"))
	haltedPilot := []Decision{approve(vera, "pilot"), halt(cleo, "pilot")}
	rejectedPilot := []Decision{reject(chen, "pilot")}
	rolledBack := []Decision{rollback(chen)}

	type check func(t *testing.T, st RolloutState)
	states := func(want ...StageState) check {
		return func(t *testing.T, st RolloutState) { require.Equal(t, want, stageStates(st)) }
	}
	all := func(cs ...check) check {
		return func(t *testing.T, st RolloutState) {
			for _, c := range cs {
				c(t, st)
			}
		}
	}
	status := func(want RolloutStatus) check {
		return func(t *testing.T, st RolloutState) { require.Equal(t, want, st.Status()) }
	}
	missing := func(want ...OrgKind) check {
		return func(t *testing.T, st RolloutState) {
			cur, ok := st.CurrentStage()
			require.True(t, ok)
			require.Equal(t, want, cur.MissingSides())
		}
	}
	cases := []struct {
		name  string
		setup []Decision
		d     Decision
		err   string
		check check
	}{
		// Approvals.
		{name: "vendor approves first", d: approve(vera, "pilot"),
			check: all(states(StageAwaitingApproval, StagePending, StagePending), missing(OrgCustomer), status(RolloutInProgress))},
		{name: "customer approves first", d: approve(chen, "pilot"),
			check: all(states(StageAwaitingApproval, StagePending, StagePending), missing(OrgVendor))},
		{name: "second side approves: the stage is approved, the next awaits", setup: []Decision{approve(vera, "pilot")}, d: approve(chen, "pilot"),
			check: all(states(StageApproved, StageAwaitingApproval, StagePending), missing(OrgVendor, OrgCustomer),
				func(t *testing.T, st RolloutState) { require.Equal(t, 1, st.Current) })},
		{name: "last stage approved: complete", setup: complete[:5], d: approve(chen, "fleet"),
			check: all(states(StageApproved, StageApproved, StageApproved), status(RolloutComplete),
				func(t *testing.T, st RolloutState) {
					_, ok := st.CurrentStage()
					require.False(t, ok)
				})},
		{name: "approve with failing gates", d: decide(DecisionApprove, vera, "pilot", false, ""),
			err: `approve refused: the gates of stage "pilot" do not pass; approve them with a waiver and a written reason, or reject the stage`},
		{name: "same person twice", setup: []Decision{approve(vera, "pilot")}, d: approve(vera, "pilot"),
			err: `approve refused: Vera has already approved stage "pilot"`},
		{name: "one side twice is not two sides", setup: []Decision{approve(vera, "pilot")}, d: approve(viktor, "pilot"),
			err: `approve refused: the vendor side has already approved stage "pilot" (Vera); the customer side must do so too`},
		{name: "customer side twice", setup: []Decision{approve(chen, "pilot")}, d: approve(carla, "pilot"),
			err: `approve refused: the customer side has already approved stage "pilot" (Chen); the vendor side must do so too`},
		{name: "one person cannot be both sides", setup: []Decision{approve(vera, "pilot")},
			d:   approve(Actor{UserID: vera.UserID, Name: "Vera", OrgKind: OrgCustomer, Approver: true}, "pilot"),
			err: `approve refused: Vera has already approved stage "pilot"`},
		{name: "member who is not an approver", d: approve(cleo, "pilot"),
			err: `approve refused: Cleo is not an approver of this program`},
		{name: "Accord cannot approve", d: approve(accord, "pilot"),
			err: `approve refused: only a person of the vendor or the customer may approve`},
		{name: "stale page: another stage", setup: approvedPilot, d: approve(vera, "pilot"),
			err: `approve refused: the decision is about stage "pilot", but the current stage is "canary" (reload the page)`},
		{name: "no stage named", d: approve(vera, ""),
			err: `approve refused: the decision must name the stage; the current stage is "pilot"`},
		{name: "approve a halted stage", setup: haltedPilot, d: approve(chen, "pilot"),
			err: `approve refused: stage "pilot" is halted (halt); both sides must resume it first`},
		{name: "approve after completion", setup: complete, d: approve(vera, "fleet"),
			err: `approve refused: every stage is approved; the rollout is complete (request a rollback if it must be undone)`},

		// Waivers.
		{name: "both sides waive failing gates", setup: []Decision{waive(vera, "pilot", "p99.9 miss is a known fio bin artefact")},
			d: waive(chen, "pilot", "accepted for the pilot only"),
			check: all(states(StageApproved, StageAwaitingApproval, StagePending), func(t *testing.T, st RolloutState) {
				require.True(t, st.Stages[0].Waived())
				require.Equal(t, "accepted for the pilot only", st.Stages[0].Approvals[1].Reason)
			})},
		{name: "one approves, the other waives after gates failed", setup: []Decision{approve(vera, "pilot")},
			d:     waive(chen, "pilot", "re-run failed on a noisy neighbour; accepted"),
			check: states(StageApproved, StageAwaitingApproval, StagePending)},
		{name: "waiver needs a reason", d: waive(vera, "pilot", ""),
			err: `waive refused: a waive needs a written reason`},
		{name: "blank reason is no reason", d: waive(vera, "pilot", "  \n\t "),
			err: `waive refused: a waive needs a written reason`},
		{name: "waive passing gates", d: decide(DecisionWaive, vera, "pilot", true, "just in case"),
			err: `waive refused: the gates of stage "pilot" pass; approve it instead of waiving`},
		{name: "waive by a member", d: waive(cleo, "pilot", "x"),
			err: `waive refused: Cleo is not an approver of this program`},
		{name: "waive after the same side approved", setup: []Decision{approve(vera, "pilot")}, d: waive(viktor, "pilot", "x"),
			err: `waive refused: the vendor side has already approved stage "pilot" (Vera); the customer side must do so too`},

		// Rejection.
		{name: "customer rejects", d: reject(chen, "pilot"),
			check: all(states(StageRejected, StagePending, StagePending), status(RolloutRejected),
				func(t *testing.T, st RolloutState) { require.Equal(t, chen, st.Stages[0].Rejection.Actor) })},
		{name: "reject a halted stage", setup: haltedPilot, d: reject(vera, "pilot"),
			check: all(states(StageRejected, StagePending, StagePending), status(RolloutRejected))},
		{name: "reject needs a reason", d: decide(DecisionReject, chen, "pilot", false, ""),
			err: `reject refused: a reject needs a written reason`},
		{name: "reject by a member", d: reject(cleo, "pilot"),
			err: `reject refused: Cleo is not an approver of this program`},
		{name: "nothing after a rejection", setup: rejectedPilot, d: approve(vera, "pilot"),
			err: `approve refused: stage "pilot" was rejected by Chen; the rollout has ended`},
		{name: "no resume after a rejection", setup: rejectedPilot, d: resume(vera, "pilot"),
			err: `resume refused: stage "pilot" was rejected by Chen; the rollout has ended`},

		// Halts.
		{name: "any member halts at once, approvals void", setup: []Decision{approve(vera, "pilot")}, d: halt(cleo, "pilot"),
			check: all(states(StageHalted, StagePending, StagePending), status(RolloutHalted), missing(OrgVendor, OrgCustomer),
				func(t *testing.T, st RolloutState) {
					require.Empty(t, st.Stages[0].Approvals)
					require.Equal(t, DecisionHalt, st.Stages[0].Halt.Kind)
				})},
		{name: "stop-loss from a run's evaluation", d: stopLoss(accord, "pilot"),
			check: all(states(StageHalted, StagePending, StagePending), func(t *testing.T, st RolloutState) {
				require.Equal(t, DecisionStopLoss, st.Stages[0].Halt.Kind)
				require.Equal(t, accord, st.Stages[0].Halt.Actor)
			})},
		{name: "stop-loss recorded by a person", setup: approvedPilot, d: stopLoss(chen, "canary"),
			check: states(StageApproved, StageHalted, StagePending)},
		{name: "halt needs a reason", d: decide(DecisionHalt, cleo, "pilot", false, ""),
			err: `halt refused: a halt needs a written reason`},
		{name: "stop-loss needs a reason", d: decide(DecisionStopLoss, accord, "pilot", false, ""),
			err: `stop-loss-triggered refused: a stop-loss-triggered needs a written reason`},
		{name: "halt a halted stage", setup: haltedPilot, d: halt(vera, "pilot"),
			err: `halt refused: stage "pilot" is already halted (halt by Cleo)`},
		{name: "stop-loss on a halted stage", setup: haltedPilot, d: stopLoss(accord, "pilot"),
			err: `stop-loss-triggered refused: stage "pilot" is already halted (halt by Cleo)`},
		{name: "Accord cannot halt by hand", d: halt(accord, "pilot"),
			err: `halt refused: only a person of the vendor or the customer may halt`},
		{name: "halt after completion", setup: complete, d: halt(chen, "fleet"),
			err: `halt refused: every stage is approved; the rollout is complete (request a rollback if it must be undone)`},

		// Resuming.
		{name: "one side resumes: still halted", setup: haltedPilot, d: resume(vera, "pilot"),
			check: all(states(StageHalted, StagePending, StagePending), missing(OrgCustomer))},
		{name: "both sides resume: approvals needed again", setup: append(append([]Decision(nil), haltedPilot...), resume(vera, "pilot")), d: resume(chen, "pilot"),
			check: all(states(StageAwaitingApproval, StagePending, StagePending), missing(OrgVendor, OrgCustomer),
				func(t *testing.T, st RolloutState) {
					require.Equal(t, 2, st.Stages[0].Attempt)
					require.Nil(t, st.Stages[0].Halt)
					require.Empty(t, st.Stages[0].Resumes)
				})},
		{name: "vendor's pre-halt approval does not count after resuming",
			setup: append(append([]Decision(nil), haltedPilot...), resume(vera, "pilot"), resume(chen, "pilot"), approve(chen, "pilot")),
			d:     approve(vera, "pilot"),
			check: states(StageApproved, StageAwaitingApproval, StagePending)},
		{name: "resume what is not halted", d: resume(vera, "pilot"),
			err: `resume refused: stage "pilot" is not halted`},
		{name: "one side resuming twice", setup: append(append([]Decision(nil), haltedPilot...), resume(vera, "pilot")), d: resume(viktor, "pilot"),
			err: `resume refused: the vendor side has already agreed to resume stage "pilot" (Vera); the customer side must do so too`},
		{name: "resume by a member", setup: haltedPilot, d: resume(cleo, "pilot"),
			err: `resume refused: Cleo is not an approver of this program`},
		{name: "resume needs a reason", setup: haltedPilot, d: decide(DecisionResume, vera, "pilot", false, ""),
			err: `resume refused: a resume needs a written reason`},

		// Rollback.
		{name: "rollback while in progress halts the current stage", setup: approvedPilot, d: rollback(chen),
			check: all(states(StageApproved, StageHalted, StagePending), status(RolloutRollbackRequested),
				func(t *testing.T, st RolloutState) { require.Equal(t, DecisionRollbackRequested, st.Rollback.Kind) })},
		{name: "rollback after completion", setup: complete, d: rollback(vera),
			check: all(states(StageApproved, StageApproved, StageApproved), status(RolloutRollbackRequested))},
		{name: "rollback after a rejection", setup: rejectedPilot, d: rollback(vera),
			check: all(states(StageRejected, StagePending, StagePending), status(RolloutRollbackRequested))},
		{name: "rollback of a halted stage keeps its halt", setup: haltedPilot, d: rollback(vera),
			check: func(t *testing.T, st RolloutState) { require.Equal(t, DecisionHalt, st.Stages[0].Halt.Kind) }},
		{name: "rollback naming a stage", d: decide(DecisionRollbackRequested, chen, "pilot", false, "x"),
			check: status(RolloutRollbackRequested)},
		{name: "rollback naming an unknown stage", d: decide(DecisionRollbackRequested, chen, "prod", false, "x"),
			err: `rollback-requested refused: the rollout has no stage "prod"`},
		{name: "rollback needs a reason", d: decide(DecisionRollbackRequested, chen, "", false, ""),
			err: `rollback-requested refused: a rollback-requested needs a written reason`},
		{name: "rollback by a member", d: rollback(cleo),
			err: `rollback-requested refused: Cleo is not an approver of this program`},
		{name: "second rollback", setup: rolledBack, d: rollback(vera),
			err: `rollback-requested refused: a rollback was requested by Chen; the rollout takes no further decisions`},
		{name: "nothing after a rollback", setup: rolledBack, d: resume(vera, "pilot"),
			err: `resume refused: a rollback was requested by Chen; the rollout takes no further decisions`},

		// Malformed decisions.
		{name: "unknown kind", d: decide("veto", chen, "pilot", true, "x"),
			err: `veto refused: "veto" is not a decision kind`},
		{name: "no actor", d: approve(Actor{OrgKind: OrgVendor, Approver: true}, "pilot"),
			err: `approve refused: the decision has no actor`},
		{name: "actor of neither side", d: approve(Actor{UserID: "u-x", OrgKind: "auditor", Approver: true}, "pilot"),
			err: `approve refused: the actor's organisation is neither the vendor nor the customer ("auditor")`},
		{name: "reason too long", d: waive(vera, "pilot", strings.Repeat("r", MaxReasonLen+1)),
			err: `waive refused: the reason must be at most 4000 characters`},
		{name: "reason with NUL", d: waive(vera, "pilot", "ok\x00"),
			err: `waive refused: the reason must be plain text`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, err := ReplayRollout(rolloutPlan, tc.setup)
			require.NoError(t, err)
			before, err := json.Marshal(st)
			require.NoError(t, err)

			next, err := Apply(st, tc.d)

			// The input state is never changed, accepted or not.
			after, merr := json.Marshal(st)
			require.NoError(t, merr)
			require.JSONEq(t, string(before), string(after))
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				require.ErrorIs(t, err, ErrTransitionRefused)
				var te *TransitionError
				require.ErrorAs(t, err, &te)
				require.Equal(t, tc.d.Kind, te.Kind)
				require.Equal(t, st, next, "a refused decision returns the state unchanged")
				return
			}
			require.NoError(t, err)
			require.Equal(t, len(st.History)+1, len(next.History))
			require.Equal(t, tc.d, next.History[len(next.History)-1])
			tc.check(t, next)
		})
	}
}

func TestRolloutReplay(t *testing.T) {
	t.Parallel()
	ds := []Decision{
		approve(vera, "pilot"), approve(chen, "pilot"),
		stopLoss(accord, "canary"), resume(chen, "canary"), resume(vera, "canary"),
		waive(chen, "canary", "tail latency waived for canary"), waive(vera, "canary", "agreed"),
	}
	st, err := ReplayRollout(rolloutPlan, ds)
	require.NoError(t, err)
	require.Equal(t, []StageState{StageApproved, StageApproved, StageAwaitingApproval}, stageStates(st))
	require.Equal(t, 2, st.Stages[1].Attempt)
	require.Equal(t, ds, st.History)

	// The state survives a JSON round trip (it is stored as JSON).
	b, err := json.Marshal(st)
	require.NoError(t, err)
	var back RolloutState
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, st, back)

	_, err = ReplayRollout(rolloutPlan, append(ds, approve(vera, "pilot")))
	require.EqualError(t, err, `replay decision 8: approve refused: the decision is about stage "pilot", but the current stage is "fleet" (reload the page)`)
}

func TestRolloutPlanValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		plan RolloutPlan
		want string
	}{
		{RolloutPlan{}, "rollout plan: stages: a rollout plan needs at least one stage"},
		{RolloutPlan{Stages: []RolloutStage{{Name: "a"}, {Name: "a"}}}, `rollout plan: stages[1].name: "a" is already the name of stages[0]; stage names must be unique`},
		{RolloutPlan{Stages: []RolloutStage{{Name: "10 %"}}}, "rollout plan: stages[0].name: stage names may use only letters, digits, - and _"},
		{RolloutPlan{Stages: make([]RolloutStage, 21)}, "rollout plan: stages: must have at most 20 stages; stages[0].name: is required; " +
			"stages[1].name: is required; stages[2].name: is required; stages[3].name: is required; and 17 more"},
	}
	for _, tc := range cases {
		_, err := NewRollout(tc.plan)
		require.EqualError(t, err, tc.want)
	}
	st, err := NewRollout(rolloutPlan)
	require.NoError(t, err)
	require.Equal(t, []StageState{StageAwaitingApproval, StagePending, StagePending}, stageStates(st))
	require.Equal(t, RolloutInProgress, st.Status())

	_, err = Apply(RolloutState{}, approve(vera, "pilot"))
	require.EqualError(t, err, "approve refused: the rollout has no stages")
}

// A current stage whose gates do not pass is named for what it waits for;
// every other state keeps the machine's name.
func TestStageLabel(t *testing.T) {
	t.Parallel()
	require.Equal(t, "awaiting approval", StageLabel(StageAwaitingApproval, GatesMet))
	require.Equal(t, "gates not met", StageLabel(StageAwaitingApproval, GatesNotMet))
	require.Equal(t, "awaiting a qualifying run", StageLabel(StageAwaitingApproval, GatesAwaitRun))
	for _, s := range []StageState{StagePending, StageApproved, StageRejected, StageHalted} {
		for _, g := range []GatesStanding{GatesMet, GatesNotMet, GatesAwaitRun} {
			require.Equal(t, string(s), StageLabel(s, g))
		}
	}
}

// An approval's comment is optional; when given it obeys the rules of a
// reason, checked when it is recorded (not by Apply, so old records replay).
func TestCheckReasonText(t *testing.T) {
	t.Parallel()
	ok := approve(vera, "pilot")
	ok.Reason = "Checked the p99 tail with the customer's SRE."
	require.NoError(t, CheckReasonText(ok))
	long := ok
	long.Reason = strings.Repeat("é", MaxReasonLen+1)
	require.EqualError(t, CheckReasonText(long), "approve refused: the reason must be at most 4000 characters")
	nul := ok
	nul.Reason = "a\x00b"
	require.EqualError(t, CheckReasonText(nul), "approve refused: the reason must be plain text")
	st, err := NewRollout(rolloutPlan)
	require.NoError(t, err)
	_, err = Apply(st, long)
	require.NoError(t, err, "Apply leaves an approval's comment to the recorder")
}
