// Package jobs holds River's job kinds and their workers: executing a run
// on a lab host, evaluating it, signing it, checking hosts, watching
// production metrics, delivering webhooks and housekeeping. Handlers insert
// jobs in the same transaction as the rows they concern (InsertTx).
package jobs

import (
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/store"
)

// Queues used by Accord's jobs.
const (
	QueueDefault = river.QueueDefault
	QueueRuns    = "runs"
	QueueReports = "reports"
)

// Deps are what the workers need, built in main.
type Deps struct {
	Log   *slog.Logger
	Store *store.Store
}

// Register adds every worker to a new bundle.
func Register(d Deps) *river.Workers {
	workers := river.NewWorkers()
	river.AddWorker(workers, &PruneWorker{deps: d})
	return workers
}

// Periodic lists the jobs River schedules by itself.
func Periodic() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return PruneArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}
