package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/accordlab/accord/service/report"
	"github.com/riverqueue/river"
)

// SignRunArgs signs a run's evaluated results (step 8 of a run): in-toto
// statements in DSSE envelopes, and the report bundle, made once and kept,
// so that every download is the same signed bytes.
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

// Timeout allows large bundles (raw outputs of long runs).
func (w *SignRunWorker) Timeout(*river.Job[SignRunArgs]) time.Duration { return 30 * time.Minute }

func (w *SignRunWorker) Work(ctx context.Context, job *river.Job[SignRunArgs]) error {
	_, err := w.deps.signer().Sign(ctx, job.Args.RunID)
	if errors.Is(err, report.ErrNoKeyring) || errors.Is(err, report.ErrLogDoesNotVerify) {
		return river.JobCancel(err)
	}
	return err
}
