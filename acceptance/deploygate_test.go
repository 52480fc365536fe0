package acceptance

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func replayed(t *testing.T, ds ...Decision) RolloutState {
	t.Helper()
	st, err := NewRollout(rolloutPlan)
	require.NoError(t, err)
	for _, d := range ds {
		st, err = Apply(st, d)
		require.NoError(t, err, "%s by %s on %s", d.Kind, d.Actor.Name, d.Stage)
	}
	return st
}

// In every stage state a deployer gets the answer the two sides' decisions
// give: proceed past a stage both approved, roll back a stopped one, hold
// otherwise; and each Flagger hook answers yes exactly then.
func TestDeployGateInEveryStageState(t *testing.T) {
	t.Parallel()
	type hooks struct{ rollout, promotion, rollback bool }
	for _, tc := range []struct {
		name       string
		decisions  []Decision
		stage      string
		broken     error
		state      DeployState
		stageState StageState
		approvedBy []OrgKind
		reason     string
		yes        hooks
	}{
		{name: "current, nobody signed", stage: "pilot", state: DeployWaiting, stageState: StageAwaitingApproval,
			reason: "The stage awaits the approval of the vendor and the customer side.", yes: hooks{rollout: true}},
		{name: "current, one side signed", decisions: []Decision{approve(vera, "pilot")}, stage: "pilot", state: DeployWaiting,
			stageState: StageAwaitingApproval, approvedBy: []OrgKind{OrgVendor}, reason: "The stage awaits the approval of the customer side.", yes: hooks{rollout: true}},
		{name: "a later stage", decisions: []Decision{approve(vera, "pilot")}, stage: "canary", state: DeployWaiting, stageState: StagePending,
			reason: "The stage is not reached yet: pilot must be approved first."},
		{name: "approved by both", decisions: []Decision{approve(vera, "pilot"), approve(chen, "pilot")}, stage: "pilot", state: DeployApproved,
			stageState: StageApproved, approvedBy: []OrgKind{OrgVendor, OrgCustomer}, reason: "Approved by both sides: Vera (vendor), Chen (customer).",
			yes: hooks{rollout: true, promotion: true}},
		{name: "a waiver counts as a sign-off", decisions: []Decision{waive(vera, "pilot", "known firmware issue, fixed in 2.1"), approve(chen, "pilot")},
			stage: "pilot", state: DeployApproved, stageState: StageApproved, approvedBy: []OrgKind{OrgVendor, OrgCustomer},
			reason: "Approved by both sides: Vera (vendor), Chen (customer).", yes: hooks{rollout: true, promotion: true}},
		{name: "the next stage becomes current", decisions: []Decision{approve(vera, "pilot"), approve(chen, "pilot")}, stage: "canary",
			state: DeployWaiting, stageState: StageAwaitingApproval, reason: "The stage awaits the approval of the vendor and the customer side.",
			yes: hooks{rollout: true}},
		{name: "stopped by a stop-loss", decisions: []Decision{approve(vera, "pilot"), stopLoss(accord, "pilot")}, stage: "pilot", state: DeployHalted,
			stageState: StageHalted, // a halt clears the attempt's sign-offs
			reason:     "The stage was stopped by a stop-loss by Accord: run 42: ttft-p99 4310 ms crossed the stop-loss line 4000 ms", yes: hooks{rollback: true}},
		{name: "halted by a member", decisions: []Decision{halt(cleo, "pilot")}, stage: "pilot", state: DeployHalted, stageState: StageHalted,
			reason: "The stage was halted by Cleo: TTFT spikes on the canary dashboard", yes: hooks{rollback: true}},
		{name: "resumed by both sides", decisions: []Decision{halt(cleo, "pilot"), resume(vera, "pilot"), resume(chen, "pilot")}, stage: "pilot",
			state: DeployWaiting, stageState: StageAwaitingApproval, reason: "The stage awaits the approval of the vendor and the customer side.",
			yes: hooks{rollout: true}},
		{name: "rejected", decisions: []Decision{reject(chen, "pilot")}, stage: "pilot", state: DeployHalted, stageState: StageRejected,
			reason: "The stage was rejected by Chen: throughput uplift not shown", yes: hooks{rollback: true}},
		{name: "a rollback requested stops every stage", decisions: []Decision{approve(vera, "pilot"), approve(chen, "pilot"), rollback(chen)},
			stage: "pilot", state: DeployHalted, stageState: StageApproved, approvedBy: []OrgKind{OrgVendor, OrgCustomer},
			reason: "A rollback was requested by Chen: customer incident 7781", yes: hooks{rollback: true}},
		{name: "a log that does not replay answers nothing yes", decisions: []Decision{approve(vera, "pilot"), approve(chen, "pilot")}, stage: "pilot",
			broken: errors.New("record 3: bad signature"), state: DeployWaiting,
			reason: "Accord's decision log does not replay on the rollout plan, so no decision is read from it; ask the program's owners."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, ok := DeployGateOf(replayed(t, tc.decisions...), tc.stage, tc.broken)
			require.True(t, ok)
			require.Equal(t, tc.stage, g.Stage)
			require.Equal(t, tc.state, g.State)
			require.Equal(t, tc.stageState, g.StageState)
			require.Equal(t, tc.approvedBy, g.ApprovedBy)
			require.Equal(t, tc.reason, g.Reason)
			require.Equal(t, tc.yes, hooks{g.Yes(FlaggerConfirmRollout), g.Yes(FlaggerConfirmPromotion), g.Yes(FlaggerRollback)})
			require.False(t, g.Yes("confirm-traffic-increase"), "a hook Accord does not answer is never yes")
		})
	}
	_, ok := DeployGateOf(replayed(t), "no-such-stage", nil)
	require.False(t, ok)
}
