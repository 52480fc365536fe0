package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
)

// EvaluateRunArgs applies a run's gate set (step 7 of a run).
type EvaluateRunArgs struct {
	RunID int64 `json:"run_id"`
}

func (EvaluateRunArgs) Kind() string { return "evaluate_run" }

func (EvaluateRunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueReports, MaxAttempts: 5}
}

// EvaluateRunWorker works EvaluateRunArgs.
type EvaluateRunWorker struct {
	river.WorkerDefaults[EvaluateRunArgs]
	deps Deps
}

func (w *EvaluateRunWorker) Work(ctx context.Context, job *river.Job[EvaluateRunArgs]) error {
	ev, stored, err := EvaluateRun(ctx, w.deps, job.Args.RunID)
	if err != nil {
		return err
	}
	w.deps.Log.Info("run evaluated", "run_id", job.Args.RunID, "verdict", ev.Verdict, "evaluation_id", stored)
	return nil
}

// EvaluateRun judges a run against its gate set and its baseline, stores
// the evaluation (a new row each time; the bytes are the same for the same
// inputs) and, for a run still evaluating, ends it as done. A stop-loss
// line crossed by the final numbers is recorded on the run and halts the
// rollout stage the run is evidence for, as an interim crossing would.
func EvaluateRun(ctx context.Context, d Deps, runID int64) (acceptance.Evaluation, int64, error) {
	st := d.Store
	run, err := st.RunByID(ctx, runID)
	if err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	if run.GateSetVersionID == nil || run.ProfileVersionID == nil {
		return acceptance.Evaluation{}, 0, river.JobCancel(fmt.Errorf("run %d has no gate set", runID))
	}
	gv, err := st.GetSpecVersionByID(ctx, store.KindGateSet, run.ProgramID, *run.GateSetVersionID)
	if err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	pv, err := st.GetSpecVersionByID(ctx, store.KindProfile, run.ProgramID, *run.ProfileVersionID)
	if err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	var gates acceptance.GateSetSpec
	if err := json.Unmarshal(gv.Spec, &gates); err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	in := acceptance.EvaluationInput{Gates: gates, ProfileDigest: pv.Digest, GateDigest: gv.Digest}
	if in.Candidate, err = st.LoadMeasurements(ctx, run.ID); err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	// Unreadable facts fail the run as bad inputs do (below); a database
	// error is retried.
	var factsErr error
	if in.CandidateFacts, _, err = comparableFacts(ctx, st, run.ID); errors.Is(err, errUnreadableFacts) {
		factsErr = err
	} else if err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	if run.BaselineRunID != nil {
		if in.Baseline, err = st.LoadMeasurements(ctx, *run.BaselineRunID); err != nil {
			return acceptance.Evaluation{}, 0, err
		}
		if in.BaselineFacts, _, err = comparableFacts(ctx, st, *run.BaselineRunID); errors.Is(err, errUnreadableFacts) {
			factsErr = cmp.Or(factsErr, err)
		} else if err != nil {
			return acceptance.Evaluation{}, 0, err
		}
	}
	var ev acceptance.Evaluation
	err = factsErr
	if err == nil {
		ev, err = acceptance.Evaluate(in)
	}
	if err != nil {
		// Bad inputs never get better by retrying.
		_ = st.AddRunNote(ctx, run.ID, "error", "the gate set could not be applied: "+err.Error())
		if serr := st.SetRunState(ctx, run.ID, store.RunFailed, "the gate set could not be applied: "+err.Error()); serr != nil && !errors.Is(serr, store.ErrRunFinal) {
			return ev, 0, serr
		}
		return ev, 0, river.JobCancel(err)
	}
	canon, err := ev.CanonicalJSON()
	if err != nil {
		return ev, 0, err
	}
	var id int64
	err = st.InTx(ctx, func(tx *store.Store) error {
		var err error
		id, err = tx.SaveEvaluation(ctx, store.StoredEvaluation{
			RunID: run.ID, BaselineRunID: run.BaselineRunID, GateSetVersionID: *run.GateSetVersionID,
			Overall: string(ev.Verdict), Result: canon, Canonical: canon, Digest: ev.Inputs.Digest, EngineVersion: ev.EngineVersion,
		})
		if err != nil {
			return err
		}
		if run.State == store.RunEvaluating {
			if err := tx.SetRunState(ctx, run.ID, store.RunDone, "verdict: "+string(ev.Verdict)); err != nil && !errors.Is(err, store.ErrRunFinal) {
				return err
			}
		}
		if err := stopLossFromEvaluation(ctx, tx, d, run, gates, ev); err != nil {
			return err
		}
		return afterEvaluation(ctx, tx, run, ev)
	})
	return ev, id, err
}

// errUnreadableFacts: a run's host facts are there but do not decode, so
// comparability cannot be judged.
var errUnreadableFacts = errors.New("the host facts cannot be read")

// comparableFacts reads the facts that decide comparability from a run's
// host facts, or, for an imported run, from the facts file among its
// artifacts: an empty map and false when the run has neither. Facts that
// do not decode are an error, not "no facts".
func comparableFacts(ctx context.Context, st *store.Store, runID int64) (map[string]string, bool, error) {
	raw, err := runFactsJSON(ctx, st, runID)
	if err != nil {
		return nil, false, err
	}
	if raw == nil {
		return map[string]string{}, false, nil
	}
	var f facts.Facts
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, false, fmt.Errorf("facts of run %d: %w: %w", runID, errUnreadableFacts, err)
	}
	return f.Comparable(), true, nil
}

// runFactsJSON returns the host facts taken for a run, or, for an imported
// run, the facts file among its artifacts (nil when there are none).
func runFactsJSON(ctx context.Context, st *store.Store, runID int64) (json.RawMessage, error) {
	hf, err := st.RunFacts(ctx, runID)
	if err == nil {
		return hf.Facts, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	a, err := st.RunArtifactByPath(ctx, runID, wire.FactsFile)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rc, _, err := st.Artifacts().Open(ctx, a.SHA256)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("facts of run %d: %w", runID, err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("facts of run %d: %w: %s is not valid JSON", runID, errUnreadableFacts, wire.FactsFile)
	}
	return b, nil
}

// stopLossFromEvaluation records a stop-loss line crossed by the final
// evaluation, unless the run already has one (its interim check aborted it,
// or an earlier evaluation found it).
func stopLossFromEvaluation(ctx context.Context, tx *store.Store, d Deps, run store.Run, gates acceptance.GateSetSpec, ev acceptance.Evaluation) error {
	breach, err := acceptance.FinalStopLoss(gates, ev)
	if err != nil || breach == nil {
		return err
	}
	if prior, err := tx.RunStopLoss(ctx, run.ID); err != nil || len(prior) > 0 {
		return err
	}
	if err := tx.RecordStopLoss(ctx, run.ID, breach); err != nil {
		return err
	}
	if err := tx.AddRunNote(ctx, run.ID, "warn", breach.Explanation); err != nil {
		return err
	}
	return onRunStopLoss(ctx, tx, d, run, breach)
}
