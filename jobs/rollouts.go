package jobs

import (
	"time"

	"github.com/riverqueue/river"
)

// registerRollouts adds the rollout workers (production watch, webhooks).
func registerRollouts(workers *river.Workers, d Deps) {
	river.AddWorker(workers, &WatchTickWorker{deps: d})
	river.AddWorker(workers, &WatchCheckWorker{deps: d, prom: NewPrometheusAPI(d.Egress, d.Log)})
	river.AddWorker(workers, &DeliverWebhookWorker{deps: d, client: webhookClient(d.Egress)})
}

// WatchTick is how often River looks for production watches due a check
// (each watch has its own interval, at least WatchTick): a tick claims the
// watches due before the next one is half-way, so that each check comes
// within half a tick of its time, an interval after the one before.
const WatchTick = 5 * time.Second

// rolloutPeriodic lists the rollout's periodic jobs (the production watch).
func rolloutPeriodic() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(WatchTick), func() (river.JobArgs, *river.InsertOpts) {
			return WatchTickArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}
