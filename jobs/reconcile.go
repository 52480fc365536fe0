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

// ReconcileRunsArgs ends runs their execute job left behind: the job is
// finalized (cancelled from River's UI, cancelled by River's rescuer after
// its worker died with a cancel pending, discarded) or gone, yet the run
// is not final and its probe may still be measuring on the host, which
// keeps the host's lease (store.AcquireLease). The probe is stopped and
// the run ends cancelled (a user asked) or failed (nobody did).
type ReconcileRunsArgs struct{}

func (ReconcileRunsArgs) Kind() string { return "reconcile_runs" }

func (ReconcileRunsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueRuns, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: time.Minute}}
}

// ReconcileInterval is how often River schedules the reconciler.
const ReconcileInterval = time.Minute

// ReconcileRunsWorker works ReconcileRunsArgs.
type ReconcileRunsWorker struct {
	river.WorkerDefaults[ReconcileRunsArgs]
	deps Deps
}

func (w *ReconcileRunsWorker) Work(ctx context.Context, job *river.Job[ReconcileRunsArgs]) error {
	client := river.ClientFromContext[pgx.Tx](ctx)
	st := w.deps.Store
	ids, err := st.RunsInExecution(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		run, err := st.RunByID(ctx, id)
		if err != nil || run.RiverJobID == nil || store.RunFinal(run.State) {
			continue
		}
		state := "gone"
		j, err := client.JobGet(ctx, *run.RiverJobID)
		switch {
		case errors.Is(err, rivertype.ErrNotFound):
		case err != nil:
			errs = append(errs, err)
			continue
		case j.State == rivertype.JobStateCompleted || j.State == rivertype.JobStateCancelled || j.State == rivertype.JobStateDiscarded:
			state = string(j.State)
		default:
			continue // its job still owns it
		}
		if err := endLeftBehindRun(ctx, w.deps, run, state); err != nil {
			errs = append(errs, fmt.Errorf("run %d: %w", run.ID, err))
		}
	}
	if err := stopProbesLeftBehind(ctx, w.deps); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// stopProbesLeftBehind tries again to stop the probes of runs that ended
// while their probe could not be stopped (the host unreachable): each
// stop that succeeds frees the host before the probe's time limit would.
func stopProbesLeftBehind(ctx context.Context, d Deps) error {
	st := d.Store
	runs, err := st.ProbesLeftBehind(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, run := range runs {
		if run.MultiHost() {
			if err := stopMultiHostLeftBehind(ctx, d, run); err != nil {
				errs = append(errs, fmt.Errorf("run %d: %w", run.ID, err))
			}
			continue
		}
		host, err := st.GetHost(ctx, run.ProgramID, *run.HostID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
		stopped, err := stopProbe(stopCtx, d, host, run.RemoteDir)
		cancel()
		if err != nil {
			d.Log.Info("the probe of an ended run still cannot be stopped", "run_id", run.ID, "err", err)
			continue // the host stays reserved until the probe's deadline
		}
		note := "the probe left on the host was stopped (" + stopText(stopped.Killed) + "): the host is free"
		if !stopped.Signalled {
			note = "the probe left on the host is gone: the host is free"
		}
		if err := st.InTx(ctx, func(tx *store.Store) error {
			if err := tx.MarkProbeEnded(ctx, run.ID); err != nil {
				return err
			}
			return tx.AddRunNote(ctx, run.ID, "info", note)
		}); err != nil {
			errs = append(errs, fmt.Errorf("run %d: %w", run.ID, err))
		}
	}
	return errors.Join(errs...)
}

// endLeftBehindRun stops what may be left of the run on its host and ends
// it; jobState is what became of its execute job.
func endLeftBehindRun(ctx context.Context, d Deps, run store.Run, jobState string) error {
	st := d.Store
	d.Log.Warn("ending a run its job left behind", "run_id", run.ID, "job_state", jobState)
	if run.HostID == nil {
		return st.SetRunState(ctx, run.ID, store.RunFailed, "its job ended ("+jobState+") before the run started")
	}
	if run.MultiHost() {
		return endLeftBehindMultiHost(ctx, d, run, jobState)
	}
	host, err := st.GetHost(ctx, run.ProgramID, *run.HostID)
	if err != nil {
		return err
	}
	requested, err := st.CancelRequested(ctx, run.ID)
	if err != nil {
		return err // a cancel asked for must not end the run as failed
	}
	if requested {
		err = stopAndCancel(ctx, d, run, host, nil, run.RemoteDir)
	} else {
		err = stopAndFail(ctx, d, run, host, fmt.Sprintf("its job ended (%s) without finishing the run", jobState))
	}
	if err != nil {
		return err
	}
	return st.ReleaseRunLease(ctx, host.ID, run.ID)
}
