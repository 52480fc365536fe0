// Package jobs holds River's job kinds and their workers: executing a run
// on a lab host, evaluating it, signing it, checking hosts, stopping runs,
// watching production metrics, delivering webhooks and housekeeping.
// Handlers insert jobs in the same transaction as the rows they concern
// (InsertTx); workers insert their follow-up jobs the same way.
package jobs

import (
	"log/slog"
	"net/url"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/service/report"
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
	Log    *slog.Logger
	Store  *store.Store
	Runner runners.Config
	Sealer *runners.Sealer
	// LeaseTTL is how long a host lease lives without a heartbeat; the
	// heartbeat renews it every LeaseTTL/3.
	LeaseTTL time.Duration
	// Holder names this process in leases (host name and pid).
	Holder string
	// Version is the probe and engine build, recorded with results.
	Version string
	// Keyring holds the installation's signing keys (reports, decisions).
	Keyring *attest.Keyring
	// Report draws a signed run's human report (web.RenderReport).
	Report report.Renderer
	// BaseURL is the installation's public address, for the links report
	// bundles carry (nil: none).
	BaseURL *url.URL
	// AttemptBudget is how long one job attempt follows a run before it
	// hands over to the next attempt (default 10 minutes). (A run whose
	// worker vanished does not wait for it: TakeOverRunsArgs gives it to
	// another worker once its lease lapses.)
	AttemptBudget time.Duration
	// Egress says which addresses outbound calls to URLs users give (webhook
	// deliveries, production watches' Prometheus queries) may reach (nil:
	// none of the server's own networks).
	Egress *egress.Policy
}

func (d Deps) attemptBudget() time.Duration {
	if d.AttemptBudget <= 0 {
		return 10 * time.Minute
	}
	return d.AttemptBudget
}

func (d Deps) signer() report.Signer {
	return report.Signer{Log: d.Log, Store: d.Store, Keyring: d.Keyring, Render: d.Report, BaseURL: d.BaseURL}
}

func (d Deps) leaseTTL() time.Duration {
	if d.LeaseTTL <= 0 {
		return 30 * time.Second
	}
	return d.LeaseTTL
}

// Register adds every worker to a new bundle.
func Register(d Deps) *river.Workers {
	workers := river.NewWorkers()
	river.AddWorker(workers, &PruneWorker{deps: d})
	river.AddWorker(workers, &ExecuteRunWorker{deps: d})
	river.AddWorker(workers, &StopRunWorker{deps: d})
	river.AddWorker(workers, &ReconcileRunsWorker{deps: d})
	river.AddWorker(workers, &TakeOverRunsWorker{deps: d})
	river.AddWorker(workers, &CheckHostWorker{deps: d})
	river.AddWorker(workers, &EvaluateRunWorker{deps: d})
	river.AddWorker(workers, &SignRunWorker{deps: d})
	river.AddWorker(workers, &CarryLogsOverWorker{deps: d})
	// The rollout's: the production watch and webhook deliveries.
	river.AddWorker(workers, &WatchTickWorker{deps: d})
	river.AddWorker(workers, &WatchCheckWorker{deps: d, prom: NewPrometheusAPI(d.Egress, d.Log)})
	river.AddWorker(workers, &DeliverWebhookWorker{deps: d, client: webhookClient(d.Egress)})
	return workers
}

// WatchTick is how often River looks for production watches due a check
// (each watch has its own interval, at least WatchTick): a tick claims the
// watches due before the next one is half-way, so that each check comes
// within half a tick of its time, an interval after the one before.
const WatchTick = 5 * time.Second

// Periodic lists the jobs River schedules by itself (the takeover of runs
// as often as the lease's lifetime asks, the production watch's tick).
func Periodic(d Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(takeoverInterval(d.leaseTTL())), func() (river.JobArgs, *river.InsertOpts) {
			return TakeOverRunsArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return PruneArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(ReconcileInterval), func() (river.JobArgs, *river.InsertOpts) {
			return ReconcileRunsArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true}),
		CarryLogsOverPeriodic(),
		watchTickPeriodic(),
	}
}

// watchTickPeriodic schedules the production watch's tick.
func watchTickPeriodic() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(WatchTick), func() (river.JobArgs, *river.InsertOpts) {
		return WatchTickArgs{}, nil
	}, &river.PeriodicJobOpts{RunOnStart: true})
}
