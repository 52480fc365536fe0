package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// The production watch (service/rollout's watch.go says what it does):
// a periodic tick enqueues a check of each watch due one, and the check
// asks the watch's Prometheus-compatible API for its value.

// WatchTickArgs looks for watches due a check (a periodic job).
type WatchTickArgs struct{}

// Kind implements river.JobArgs.
func (WatchTickArgs) Kind() string { return "rollout_watch_tick" }

// InsertOpts keeps ticks from piling up.
func (WatchTickArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDefault, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: WatchTick}}
}

// WatchTickWorker claims the due watches and enqueues a check of each one
// whose stage is current.
type WatchTickWorker struct {
	river.WorkerDefaults[WatchTickArgs]
	deps Deps
}

// Work claims due watches in one transaction.
func (w *WatchTickWorker) Work(ctx context.Context, job *river.Job[WatchTickArgs]) error {
	ins, err := workerInserter(ctx)
	if err != nil {
		return err
	}
	_, err = scheduleWatchChecks(ctx, w.deps.Store, ins, time.Now())
	return err
}

// scheduleWatchChecks claims the watches due at now and enqueues a check
// for each whose stage is current and awaits approval; the others start
// their count afresh. It returns the ids of the watches it enqueued.
func scheduleWatchChecks(ctx context.Context, st *store.Store, ins Inserter, now time.Time) ([]int64, error) {
	var enqueued []int64
	err := st.InTx(ctx, func(tx *store.Store) error {
		due, err := tx.ClaimDueWatches(ctx, now, WatchTick/2, 200)
		if err != nil {
			return err
		}
		rollouts := map[int64]rollout.Rollout{}
		for _, wt := range due {
			ro, ok := rollouts[wt.ProgramID]
			if !ok {
				if ro, err = rollout.Load(ctx, tx, wt.ProgramID); err != nil {
					return err
				}
				rollouts[wt.ProgramID] = ro
			}
			if !rollout.WatchActive(ro, wt) {
				if err := tx.ResetWatch(ctx, wt.ID); err != nil {
					return err
				}
				continue
			}
			if _, err := ins.InsertTx(ctx, tx.Tx(), WatchCheckArgs{WatchID: wt.ID}, nil); err != nil {
				return fmt.Errorf("watch %d: enqueue check: %w", wt.ID, err)
			}
			enqueued = append(enqueued, wt.ID)
		}
		return nil
	})
	return enqueued, err
}

// WatchCheckArgs checks one watch once.
type WatchCheckArgs struct {
	WatchID int64 `json:"watch_id"`
}

// Kind implements river.JobArgs.
func (WatchCheckArgs) Kind() string { return "rollout_watch_check" }

// InsertOpts: a missed check is not repeated late; the next one comes.
func (WatchCheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDefault, MaxAttempts: 2}
}

// WatchCheckWorker queries a watch's endpoint and counts breaches.
type WatchCheckWorker struct {
	river.WorkerDefaults[WatchCheckArgs]
	deps Deps
	prom PrometheusAPI // through deps.Egress, one client for every check
}

// Timeout bounds a check.
func (w *WatchCheckWorker) Timeout(*river.Job[WatchCheckArgs]) time.Duration { return time.Minute }

// Work runs one check.
func (w *WatchCheckWorker) Work(ctx context.Context, job *river.Job[WatchCheckArgs]) error {
	ins, err := workerInserter(ctx)
	if err != nil {
		return err
	}
	prom := w.prom
	if prom.Client == nil {
		prom = NewPrometheusAPI(w.deps.Egress, w.deps.Log)
	}
	_, err = rollout.CheckWatch(ctx, w.deps.Store, rollout.Env{Keyring: w.deps.Keyring, Queue: NewQueue(ins)}, prom, job.Args.WatchID, time.Now())
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
