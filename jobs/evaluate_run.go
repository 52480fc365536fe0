package jobs

import (
	"context"
	"errors"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/service/evaluation"
	"github.com/accordlab/accord/service/rollout"
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

// Work judges the run (service/evaluation), which enqueues sign_run.
func (w *EvaluateRunWorker) Work(ctx context.Context, job *river.Job[EvaluateRunArgs]) error {
	queue, err := workerQueue(ctx)
	if err != nil {
		return err
	}
	ev, stored, err := evaluation.Evaluate(ctx, w.deps.Store, rollout.Env{Keyring: w.deps.Keyring, Queue: queue}, job.Args.RunID)
	if errors.Is(err, evaluation.ErrCannotJudge) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	w.deps.Log.Info("run evaluated", "run_id", job.Args.RunID, "verdict", ev.Verdict, "evaluation_id", stored)
	return nil
}
