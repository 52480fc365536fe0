package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/service/labhost"
)

// CheckHostArgs connects to a host, takes its facts and the round-trip
// time of a trivial command ("Check host" on the host's page).
type CheckHostArgs struct {
	ProgramID int64 `json:"program_id"`
	HostID    int64 `json:"host_id"`
}

func (CheckHostArgs) Kind() string { return "check_host" }

func (CheckHostArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDefault, MaxAttempts: 1}
}

// CheckHostWorker works CheckHostArgs.
type CheckHostWorker struct {
	river.WorkerDefaults[CheckHostArgs]
	deps Deps
}

func (w *CheckHostWorker) Timeout(*river.Job[CheckHostArgs]) time.Duration { return 3 * time.Minute }

// Work checks the host (labhost.Check), which records the outcome on the
// host's row.
func (w *CheckHostWorker) Work(ctx context.Context, job *river.Job[CheckHostArgs]) error {
	env := labhost.CheckEnv{Sealer: w.deps.Sealer, Runner: w.deps.Runner, Log: w.deps.Log}
	return labhost.Check(ctx, w.deps.Store, env, job.Args.ProgramID, job.Args.HostID)
}
