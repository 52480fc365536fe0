package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/service/rollout"
)

// CarryLogsOverArgs signs again, with the active key, every program's
// decision log head that a revoked key signed (rollout.CarryLogsOver). A
// revocation carries the logs over at once; this job, at every start and
// every CarryLogsOverInterval, carries over those that failed then or that
// another process's revocation left.
type CarryLogsOverArgs struct{}

// CarryLogsOverInterval is how often the job looks for heads to carry.
const CarryLogsOverInterval = time.Minute

func (CarryLogsOverArgs) Kind() string { return "carry_logs_over" }

// CarryLogsOverPeriodic schedules the job at every start of River's leader
// and every CarryLogsOverInterval (one of Periodic's jobs).
func CarryLogsOverPeriodic() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(CarryLogsOverInterval), func() (river.JobArgs, *river.InsertOpts) {
		return CarryLogsOverArgs{}, nil
	}, &river.PeriodicJobOpts{RunOnStart: true})
}

func (CarryLogsOverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDefault, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByPeriod: CarryLogsOverInterval}}
}

// CarryLogsOverWorker works CarryLogsOverArgs.
type CarryLogsOverWorker struct {
	river.WorkerDefaults[CarryLogsOverArgs]
	deps Deps
}

func (w *CarryLogsOverWorker) Work(ctx context.Context, _ *river.Job[CarryLogsOverArgs]) error {
	if w.deps.Keyring == nil {
		return nil
	}
	carried, err := rollout.CarryLogsOver(ctx, w.deps.Store, w.deps.Keyring, time.Now())
	if carried > 0 {
		w.deps.Log.Info("decision logs carried over to the active key after a revocation", "logs", carried)
	}
	if err != nil {
		return fmt.Errorf("carry decision logs over: %w", err)
	}
	return nil
}
