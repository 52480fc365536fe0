package jobs

import (
	"context"
	"fmt"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/service/ingest"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// finish is step 6 of a run: the run's state from how the probe ended,
// and its results kept by the ingest (service/ingest): the chart data
// computed first, then everything saved in one fenced transaction that
// also enqueues evaluate_run.
func (w *ExecuteRunWorker) finish(ctx context.Context, run store.Run, host store.Host, lease store.Lease, profile acceptance.ProfileSpec, out runners.Outcome, breach *acceptance.StopLossBreach) error {
	st := w.deps.Store
	res := ingest.Results{Files: out.Collection, HostID: &host.ID}
	var importErr error
	res.Measurements, res.Warnings, importErr = ingest.ReadFolder(ingest.CollectionFiles(out.Collection), profile, w.deps.Version)
	defer ingest.Release(res.Measurements)
	state, reason := store.RunEvaluating, "judging the results"
	switch {
	case breach != nil:
		state, reason = store.RunFailed, "stopped by the stop-loss: "+strings.TrimPrefix(breach.Explanation, "Stop-loss: ")
	case out.Crashed:
		state, reason = store.RunFailed, "the probe stopped without writing a status (crashed or killed on the host)"
	case out.Status == nil:
		state, reason = store.RunFailed, "the probe's status is missing"
	case out.Status.State != wire.StateDone:
		state, reason = store.RunFailed, fmt.Sprintf("the probe ended %s: %s", out.Status.State, out.Status.Reason)
	case importErr != nil:
		state, reason = store.RunFailed, "the results could not be read: "+importErr.Error()
	}
	if importErr == nil && len(res.Measurements) > 0 {
		var err error
		if res.Charts, err = ingest.Charts(ctx, st, profile, run.BaselineRunID, res); err != nil {
			return err
		}
	}
	queue, err := workerQueue(ctx)
	if err != nil {
		return err
	}
	env := rollout.Env{Keyring: w.deps.Keyring, Queue: queue}
	return st.InTx(ctx, func(tx *store.Store) error {
		if err := tx.CheckFence(ctx, lease); err != nil {
			return err
		}
		return ingest.Save(ctx, tx, env, run, res, ingest.Outcome{State: state, Reason: reason, Breach: breach})
	})
}
