package jobs

import (
	"context"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/store"
)

// StopRunArgs stops a run whose execute job is not running anywhere (it
// waits for a retry, or its worker died): the cancel a user asked for
// still reaches the host.
type StopRunArgs struct {
	RunID int64 `json:"run_id"`
}

func (StopRunArgs) Kind() string { return "stop_run" }

func (StopRunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueRuns, MaxAttempts: 5}
}

// StopRunWorker works StopRunArgs.
type StopRunWorker struct {
	river.WorkerDefaults[StopRunArgs]
	deps Deps
}

func (w *StopRunWorker) Work(ctx context.Context, job *river.Job[StopRunArgs]) error {
	st := w.deps.Store
	run, err := st.RunByID(ctx, job.Args.RunID)
	if err != nil {
		return fmt.Errorf("stop run %d: %w", job.Args.RunID, err)
	}
	if store.RunFinal(run.State) {
		return nil
	}
	if run.HostID == nil {
		by, err := st.CancelRequester(ctx, run.ID)
		if err != nil {
			return err
		}
		return st.SetRunState(ctx, run.ID, store.RunCancelled, "cancelled by "+by)
	}
	if run.MultiHost() {
		return stopMultiHostCancelled(ctx, w.deps, run, nil)
	}
	host, err := st.GetHost(ctx, run.ProgramID, *run.HostID)
	if err != nil {
		return err
	}
	return stopAndCancel(ctx, w.deps, run, host, nil, run.RemoteDir)
}
