package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/accordlab/accord/store"
)

// TakeOverRunsArgs gives runs whose worker is gone to another worker. A
// worker renews its run's host lease every third of the lease's lifetime;
// a run whose lease lapsed while River still counts its job as running
// has lost its worker (killed, or cut off from the database). River itself
// would hand such a job over only after the job's time limit (an attempt's
// budget and a minute) and ACCORD_RESCUE_AFTER have both passed; the lease
// says it within its lifetime. The run gets a new execute job, which
// resumes following its probe; the old job, when River rescues it at last,
// finds the run taken over and ends.
type TakeOverRunsArgs struct{}

func (TakeOverRunsArgs) Kind() string { return "take_over_runs" }

func (TakeOverRunsArgs) InsertOpts() river.InsertOpts {
	// The default queue: the runs queue may be full of the very runs that
	// are waiting to be taken over.
	return river.InsertOpts{Queue: QueueDefault, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: time.Second}}
}

// takeoverInterval is how often River schedules the takeover: a third of
// the lease's lifetime, within 1 to 10 seconds.
func takeoverInterval(leaseTTL time.Duration) time.Duration {
	return min(max(leaseTTL/3, time.Second), 10*time.Second)
}

// TakeOverRunsWorker works TakeOverRunsArgs.
type TakeOverRunsWorker struct {
	river.WorkerDefaults[TakeOverRunsArgs]
	deps Deps
}

func (w *TakeOverRunsWorker) Work(ctx context.Context, job *river.Job[TakeOverRunsArgs]) error {
	client := river.ClientFromContext[pgx.Tx](ctx)
	runs, err := w.deps.Store.UnfollowedRuns(ctx)
	if err != nil || len(runs) == 0 {
		return err
	}
	byJob := map[int64]store.Run{}
	ids := make([]int64, 0, len(runs))
	for _, r := range runs {
		byJob[*r.RiverJobID] = r
		ids = append(ids, *r.RiverJobID)
	}
	// Of those, the runs whose job River counts as running: a job waiting
	// for its next attempt (or for the host) is no one's to take over.
	res, err := client.JobList(ctx, river.NewJobListParams().IDs(ids...).States(rivertype.JobStateRunning).First(len(ids)))
	if err != nil {
		return fmt.Errorf("take over runs: list their jobs: %w", err)
	}
	// A worker takes its lease within moments of starting the job: one
	// without a live lease for longer than the lease's lifetime is gone.
	quiet := w.deps.leaseTTL()
	var errs []error
	for _, j := range res.Jobs {
		if j.AttemptedAt == nil || time.Since(*j.AttemptedAt) < quiet {
			continue
		}
		if err := takeOver(ctx, w.deps, client, byJob[j.ID], j); err != nil {
			errs = append(errs, fmt.Errorf("run %d: %w", byJob[j.ID].ID, err))
		}
	}
	return errors.Join(errs...)
}

// takeOver gives the run a new execute job (or, when a cancel is pending,
// a stop job) in place of stale, in one transaction.
func takeOver(ctx context.Context, d Deps, client *river.Client[pgx.Tx], run store.Run, stale *rivertype.JobRow) error {
	lapsed := "it never took its host lease"
	if run.LeaseLapsedAt != nil {
		lapsed = "its host lease lapsed at " + run.LeaseLapsedAt.UTC().Format("15:04:05 UTC")
	}
	var args river.JobArgs = ExecuteRunArgs{RunID: run.ID}
	cancelPending, err := d.Store.CancelRequested(ctx, run.ID)
	if err != nil {
		return err
	}
	if cancelPending {
		args = StopRunArgs{RunID: run.ID}
	}
	var taken bool
	err = d.Store.InTx(ctx, func(tx *store.Store) error {
		res, err := client.InsertTx(ctx, tx.Tx(), args, nil)
		if err != nil {
			return err
		}
		if taken, err = tx.TakeOverRun(ctx, run.ID, stale.ID, res.Job.ID); err != nil || !taken {
			if err == nil {
				err = errNotTaken // roll the inserted job back
			}
			return err
		}
		if err := tx.SetRunState(ctx, run.ID, run.State, "no worker is following this run; taking over"); err != nil {
			return err
		}
		return tx.AddRunNote(ctx, run.ID, "warn", fmt.Sprintf(
			"no worker is following this run (job %d, attempt %d, %s): taking it over with job %d", stale.ID, stale.Attempt, lapsed, res.Job.ID))
	})
	if errors.Is(err, errNotTaken) || errors.Is(err, store.ErrRunFinal) {
		return nil // the run moved on meanwhile
	}
	if err == nil {
		d.Log.Warn("taking over a run whose worker is gone", "run_id", run.ID, "stale_job_id", stale.ID, "lapsed", lapsed)
	}
	return err
}

var errNotTaken = errors.New("the run moved on")
