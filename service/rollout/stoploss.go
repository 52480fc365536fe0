package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/store"
)

// HaltForRunStopLoss records Accord's stop-loss decision when the run is
// evidence for the current stage (the stage's gate set version judged it,
// on one of the stage's profiles); it says what it did in the run's log.
// It returns whether a stage was halted.
func HaltForRunStopLoss(ctx context.Context, tx *store.Store, env Env, run store.Run, breach *acceptance.StopLossBreach) (bool, error) {
	if run.GateSetVersionID == nil || run.ProfileID == nil || breach == nil {
		return false, nil
	}
	// Lock first, so that the plan and the log read below stay as they are.
	if _, err := tx.LockDecisionChain(ctx, run.ProgramID); err != nil {
		return false, err
	}
	ro, err := Load(ctx, tx, run.ProgramID)
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
	return slices.ContainsFunc(s.Profiles, func(p store.StageProfile) bool { return p.ProfileID == profileID })
}
