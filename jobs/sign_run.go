package jobs

import (
	"context"

	"github.com/riverqueue/river"
)

// SignRunArgs signs a run's evaluated results (step 8 of a run).
type SignRunArgs struct {
	RunID int64 `json:"run_id"`
}

func (SignRunArgs) Kind() string { return "sign_run" }

func (SignRunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueReports, MaxAttempts: 5}
}

// SignRunWorker works SignRunArgs.
type SignRunWorker struct {
	river.WorkerDefaults[SignRunArgs]
	deps Deps
}

func (w *SignRunWorker) Work(ctx context.Context, job *river.Job[SignRunArgs]) error {
	return nil
}
