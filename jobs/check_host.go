package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
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

func (w *CheckHostWorker) Work(ctx context.Context, job *river.Job[CheckHostArgs]) error {
	st := w.deps.Store
	host, err := st.GetHost(ctx, job.Args.ProgramID, job.Args.HostID)
	if err != nil {
		return fmt.Errorf("check host %d: %w", job.Args.HostID, err)
	}
	res, err := w.check(ctx, host)
	if err != nil {
		msg := err.Error()
		var perm *runners.PermanentError
		switch {
		case sshrun.IsConnectFailure(err):
			// The socket's own error (refused, timed out, not SSH) would
			// tell what listens where: the page says only this.
			w.deps.Log.Info("host check could not connect", "host_id", host.ID, "err", err)
			msg = "could not connect"
		case !errors.As(err, &perm):
			msg = "could not reach the host: " + msg
		}
		return st.RecordHostCheck(context.WithoutCancel(ctx), host.ID, false, msg, nil)
	}
	sum := sha256.Sum256(res.Facts)
	rtt := float64(res.RTT.Microseconds()) / 1000
	return st.InTx(ctx, func(tx *store.Store) error {
		if _, err := tx.AddHostFacts(ctx, host.ID, nil, res.Facts, "sha256:"+hex.EncodeToString(sum[:])); err != nil {
			return err
		}
		return tx.RecordHostCheck(ctx, host.ID, true, fmt.Sprintf("connected; probe %s ready; facts taken", res.Probe.Arch), &rtt)
	})
}

func (w *CheckHostWorker) check(ctx context.Context, host store.Host) (runners.CheckResult, error) {
	target, err := labhost.Target(host, w.deps.Sealer)
	if err != nil {
		return runners.CheckResult{}, err
	}
	return w.deps.Runner.Check(ctx, target)
}
