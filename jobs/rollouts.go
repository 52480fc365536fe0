package jobs

import (
	"context"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/riverqueue/river"
)

// registerRollouts adds the rollout workers (production watch, webhooks).
func registerRollouts(workers *river.Workers, d Deps) {
	river.AddWorker(workers, &WatchTickWorker{deps: d})
	river.AddWorker(workers, &WatchCheckWorker{deps: d})
	river.AddWorker(workers, &DeliverWebhookWorker{deps: d})
}

// WatchTick is how often River looks for production watches due a check;
// each watch has its own interval.
const WatchTick = 10 * time.Second

// rolloutPeriodic lists the rollout's periodic jobs (the production watch).
func rolloutPeriodic() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(WatchTick), func() (river.JobArgs, *river.InsertOpts) {
			return WatchTickArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}

// onRunStopLoss runs in the transaction that ends a run stopped by a
// stop-loss line: it halts the rollout stage the run is evidence for and
// records the system's decision.
func onRunStopLoss(ctx context.Context, tx *store.Store, d Deps, run store.Run, breach *acceptance.StopLossBreach) error {
	queue, err := workerQueue(ctx)
	if err != nil {
		return err
	}
	_, err = rollout.HaltForRunStopLoss(ctx, tx, rollout.Env{Keyring: d.Keyring, Queue: queue}, run, breach)
	return err
}
