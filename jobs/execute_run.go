package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/service/stoploss"
	"github.com/accordlab/accord/store"
)

// ExecuteRunArgs executes one run on its lab host: the way of a run, steps
// 2 to 6 (DESIGN.md).
type ExecuteRunArgs struct {
	RunID int64 `json:"run_id"`
}

func (ExecuteRunArgs) Kind() string { return "execute_run" }

func (ExecuteRunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueRuns, MaxAttempts: 10}
}

// ExecuteRunWorker works ExecuteRunArgs.
type ExecuteRunWorker struct {
	river.WorkerDefaults[ExecuteRunArgs]
	deps Deps
}

// Timeout bounds one attempt: an attempt hands over to the next one after
// the attempt budget (the run goes on, followed from its offset), so the
// timeout only matters when a worker vanished: River then rescues the job.
func (w *ExecuteRunWorker) Timeout(*river.Job[ExecuteRunArgs]) time.Duration {
	b := w.deps.attemptBudget()
	return b + min(b, time.Minute)
}

// errHandOver ends an attempt at its budget; the next attempt resumes.
var errHandOver = errors.New("attempt budget reached: handing the run over to the next attempt")

// NextRetry waits a little longer each time, up to two minutes.
func (w *ExecuteRunWorker) NextRetry(job *river.Job[ExecuteRunArgs]) time.Time {
	return time.Now().Add(min(time.Duration(job.Attempt*job.Attempt)*5*time.Second, 2*time.Minute))
}

// hostBusySnooze is how long a run waits before asking for its host again.
const hostBusySnooze = 3 * time.Second

func (w *ExecuteRunWorker) Work(ctx context.Context, job *river.Job[ExecuteRunArgs]) error {
	st := w.deps.Store
	run, err := st.RunByID(ctx, job.Args.RunID)
	if err != nil {
		return fmt.Errorf("execute run %d: %w", job.Args.RunID, err)
	}
	if store.RunFinal(run.State) || run.State == store.RunEvaluating {
		return nil // finished by an earlier attempt
	}
	if run.HostID == nil || run.ProfileVersionID == nil {
		return w.fail(ctx, run, nil, "the run has no host or profile")
	}
	host, err := st.GetHost(ctx, run.ProgramID, *run.HostID)
	if err != nil {
		return fmt.Errorf("execute run %d: %w", run.ID, err)
	}

	// Step 2: the host lease. A busy host snoozes the job.
	lease, busyRun, err := st.AcquireLease(ctx, host.ID, run.ID, w.deps.Holder, w.deps.leaseTTL())
	if errors.Is(err, store.ErrHostBusy) {
		reason := fmt.Sprintf("waiting for host %s (busy with run #%d)", host.Name, busyRun)
		if run.State == store.RunQueued || run.State == store.RunWaitingForHost {
			if err := st.SetRunState(ctx, run.ID, store.RunWaitingForHost, reason); err != nil && !errors.Is(err, store.ErrRunFinal) {
				return err
			}
		}
		return river.JobSnooze(hostBusySnooze)
	}
	if err != nil {
		return err
	}
	workCtx, cancelWork := context.WithCancelCause(ctx)
	defer cancelWork(nil)
	stopHeartbeat := w.heartbeat(workCtx, cancelWork, lease)
	defer stopHeartbeat()
	budgetCtx, cancelBudget := context.WithTimeoutCause(workCtx, w.deps.attemptBudget(), errHandOver)
	defer cancelBudget()

	err = w.execute(budgetCtx, job, run, host, lease)
	switch {
	case errors.Is(context.Cause(workCtx), store.ErrFenced):
		w.deps.Log.Warn("run lease lost: another worker has the run", "run_id", run.ID)
		return nil
	case errors.Is(context.Cause(budgetCtx), errHandOver) && ctx.Err() == nil && err != nil:
		// Keep the lease: the run's next attempt takes it over at once.
		w.deps.Log.Debug("handing the run over to the next attempt", "run_id", run.ID)
		return river.JobSnooze(time.Second)
	}
	w.releaseLease(context.WithoutCancel(ctx), run.ID, lease)
	return err
}

// releaseLease gives the host back unless the run's probe may still be
// measuring on it (launched, run not final: this process is stopping, or
// the attempt failed and will be retried). Such a lease just expires, and
// AcquireLease keeps the host for the run until it is final.
func (w *ExecuteRunWorker) releaseLease(ctx context.Context, runID int64, lease store.Lease) {
	run, err := w.deps.Store.RunByID(ctx, runID)
	if err == nil && run.ProbeMayRun() {
		w.deps.Log.Info("keeping the host for the run: its probe may still run there", "run_id", runID, "host_id", lease.HostID)
		return
	}
	_ = w.deps.Store.ReleaseLease(ctx, lease)
}

// heartbeat renews the lease until stopped; losing it cancels the work
// with ErrFenced as the cause.
func (w *ExecuteRunWorker) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, lease store.Lease) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	ttl := w.deps.leaseTTL()
	go func() {
		defer close(stopped)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				err := w.deps.Store.RenewLease(ctx, lease, ttl)
				if errors.Is(err, store.ErrFenced) {
					cancel(store.ErrFenced)
					return
				}
				if err != nil {
					w.deps.Log.Warn("lease heartbeat failed", "host_id", lease.HostID, "err", err)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

func (w *ExecuteRunWorker) execute(ctx context.Context, job *river.Job[ExecuteRunArgs], run store.Run, host store.Host, lease store.Lease) error {
	st := w.deps.Store
	target, err := labhost.Target(host, w.deps.Sealer)
	if err != nil {
		return w.fail(ctx, run, &lease, err.Error())
	}
	profileVersion, err := st.GetSpecVersionByID(ctx, store.KindProfile, run.ProgramID, *run.ProfileVersionID)
	if err != nil {
		return err
	}
	var profile acceptance.ProfileSpec
	if err := json.Unmarshal(profileVersion.Spec, &profile); err != nil {
		return w.fail(ctx, run, &lease, "the profile version cannot be read: "+err.Error())
	}
	interim, err := stoploss.ForRun(ctx, st, run)
	if err != nil {
		return w.fail(ctx, run, &lease, "the gate set cannot be read: "+err.Error())
	}
	monitor := interim.Monitor
	plan := wire.Plan{
		SchemaVersion: wire.PlanSchemaVersion, RunID: run.ID, Attempt: 1, Profile: profile,
		RunTimeout: acceptance.Duration(RunTimeout(profile)), AllowDestructive: host.AllowDestructive,
		Interim: acceptance.Duration(2 * time.Second),
	}
	plan.StopLossMetrics = interim.Metrics
	rt := runners.RunTarget{Host: target, RunID: run.ID, Attempt: 1, Plan: plan, Launched: run.Launched, Offset: run.EventsOffset}
	if run.Launched {
		_ = st.AddRunNote(ctx, run.ID, "info", fmt.Sprintf("resuming: following the probe from byte %d of its event stream", run.EventsOffset))
	}

	fenced := func(fn func(tx *store.Store) error) error {
		return st.InTx(ctx, func(tx *store.Store) error {
			if err := tx.CheckFence(ctx, lease); err != nil {
				return err
			}
			return fn(tx)
		})
	}
	var breach *acceptance.StopLossBreach
	hooks := runners.Hooks{
		State: func(ctx context.Context, state, reason string) error {
			return fenced(func(tx *store.Store) error { return tx.SetRunState(ctx, run.ID, state, reason) })
		},
		Launched: func(ctx context.Context, dir, probePath string) error {
			return fenced(func(tx *store.Store) error { return tx.MarkLaunched(ctx, run.ID, dir) })
		},
		Events: func(ctx context.Context, lines [][]byte, offset int64) error {
			update := store.FollowUpdate{Offset: offset}
			var snapshots []acceptance.InterimSnapshot
			for _, line := range lines {
				ev, snap, progress, err := decodeEvent(line)
				if err != nil {
					update.Events = append(update.Events, store.RunEvent{At: time.Now(), Type: "log", Level: "warn", Message: "unreadable event line from the probe: " + err.Error()})
					continue
				}
				update.Events = append(update.Events, ev)
				if progress != nil {
					update.Progress = progress
				}
				if snap != nil {
					snapshots = append(snapshots, *snap)
				}
			}
			if err := st.AppendFollowed(ctx, run.ID, lease, update); err != nil {
				return err
			}
			// Step 5: interim results feed the stop-loss check.
			for _, snap := range snapshots {
				if monitor == nil {
					break
				}
				if b, hit := monitor.Observe(snap); hit {
					breach = b
					return fmt.Errorf("%w: %s", runners.ErrAbort, b.Explanation)
				}
			}
			return nil
		},
		Note: func(ctx context.Context, level, msg string) { _ = st.AddRunNote(ctx, run.ID, level, msg) },
	}

	out, err := w.deps.Runner.Execute(ctx, rt, hooks)
	if out.Collection != nil {
		defer out.Collection.Remove() //nolint:errcheck
	}
	if err != nil {
		return w.handleFailure(ctx, job, run, host, lease, out, err)
	}
	return w.finish(ctx, run, host, lease, profile, out, breach)
}

// handleFailure decides between cancelled, failed and "try again".
func (w *ExecuteRunWorker) handleFailure(ctx context.Context, job *river.Job[ExecuteRunArgs], run store.Run, host store.Host, lease store.Lease, out runners.Outcome, err error) error {
	st := w.deps.Store
	bg := context.WithoutCancel(ctx)
	if errors.Is(err, store.ErrFenced) || errors.Is(context.Cause(ctx), store.ErrFenced) {
		return err
	}
	if ctx.Err() != nil {
		// The job's context ended: a user's cancel, or this process stopping.
		if requested, _ := st.CancelRequested(bg, run.ID); requested {
			return stopAndCancel(bg, w.deps, run, host, &lease, out.Dir)
		}
		return err // River runs the job again; it resumes from the offset
	}
	var perm *runners.PermanentError
	if errors.As(err, &perm) {
		return w.fail(bg, run, &lease, perm.Error())
	}
	_ = st.AddRunNote(bg, run.ID, "warn", "attempt failed, will retry: "+err.Error())
	if job.Attempt >= job.MaxAttempts {
		return w.fail(bg, run, &lease, fmt.Sprintf("gave up after %d attempts: %v", job.Attempt, err))
	}
	return err
}

// stopAndCancel stops the probe (in the run's folder on the host, when one
// is known) and ends the run as cancelled by a user.
func stopAndCancel(ctx context.Context, d Deps, run store.Run, host store.Host, lease *store.Lease, dir string) error {
	return stopAndEnd(ctx, d, run, host, lease, dir, store.RunCancelled, "cancelled by a user")
}

// stopAndFail stops the probe (in the run's recorded folder, if any) and
// ends the run as failed with the reason.
func stopAndFail(ctx context.Context, d Deps, run store.Run, host store.Host, reason string) error {
	return stopAndEnd(ctx, d, run, host, nil, run.RemoteDir, store.RunFailed, reason)
}

// stopAndEnd stops the probe on the host over a fresh connection (when a
// run folder is known) and then ends the run in the final state, the
// reason saying what was stopped.
func stopAndEnd(ctx context.Context, d Deps, run store.Run, host store.Host, lease *store.Lease, dir, state, reason string) error {
	st := d.Store
	ctx, done := context.WithTimeout(ctx, 2*time.Minute)
	defer done()
	fresh, err := st.RunByID(ctx, run.ID)
	if err != nil {
		return err
	}
	if dir == "" {
		dir = fresh.RemoteDir
	}
	// A run folder is known once the worker got that far (or the launch was
	// recorded): stop whatever runs there. A cancel can land between the
	// probe's launch and its record, so "not recorded as launched" is not
	// "not running"; stopping a folder with no probe in it does nothing.
	if dir != "" {
		target, err := labhost.Target(host, d.Sealer)
		if err != nil {
			return err
		}
		stopped, err := d.Runner.Stop(ctx, target, dir, "")
		if err != nil {
			_ = st.AddRunNote(ctx, run.ID, "error", "stopping the probe failed: "+err.Error())
			return fmt.Errorf("stop run %d: %w", run.ID, err)
		}
		if stopped.Signalled {
			reason += fmt.Sprintf("; the probe was stopped (%s), no process of the run is left", stopText(stopped.Killed))
		} else {
			reason += "; no process of the run was running on the host"
		}
	}
	err = st.InTx(ctx, func(tx *store.Store) error {
		if lease != nil {
			if err := tx.CheckFence(ctx, *lease); err != nil {
				return err
			}
		}
		return tx.SetRunState(ctx, run.ID, state, reason)
	})
	if errors.Is(err, store.ErrRunFinal) {
		return nil
	}
	return err
}

func stopText(killed bool) string {
	if killed {
		return "SIGKILL after the grace period"
	}
	return "SIGTERM"
}

// fail ends the run as failed with a reason (fenced when a lease is held)
// and tells River not to retry.
func (w *ExecuteRunWorker) fail(ctx context.Context, run store.Run, lease *store.Lease, reason string) error {
	err := w.deps.Store.InTx(context.WithoutCancel(ctx), func(tx *store.Store) error {
		if lease != nil {
			if err := tx.CheckFence(ctx, *lease); err != nil {
				return err
			}
		}
		return tx.SetRunState(ctx, run.ID, store.RunFailed, reason)
	})
	if err != nil && !errors.Is(err, store.ErrRunFinal) {
		return err
	}
	return river.JobCancel(errors.New(reason))
}

// RunTimeout bounds a run on its host: the profile's own limit, or the
// steps' durations times the repetitions, doubled, plus ten minutes.
func RunTimeout(p acceptance.ProfileSpec) time.Duration {
	if p.RunTimeout > 0 {
		return p.RunTimeout.D()
	}
	var per time.Duration
	for _, s := range p.Steps {
		switch {
		case s.Timeout > 0:
			per += s.Timeout.D()
		case s.Fio != nil:
			per += s.Fio.Runtime.D() + p.Warmup.D()
		case s.Inference != nil:
			levels := max(1, len(s.Inference.Load.Sweep))
			d := s.Inference.Duration.D()
			if d == 0 {
				d = 10 * time.Minute
			}
			per += time.Duration(levels) * (d + p.Warmup.D())
		case s.Pause != nil:
			per += s.Pause.Duration.D()
		case s.Fault != nil && s.Fault.During == "":
			per += s.Fault.Duration.D()
		default:
			per += time.Minute
		}
	}
	return 2*per*time.Duration(max(1, p.Repetitions)) + 10*time.Minute
}

// decodeEvent turns a probe event line into a stored event, and extracts
// an interim snapshot and the progress when it carries them.
func decodeEvent(line []byte) (store.RunEvent, *acceptance.InterimSnapshot, json.RawMessage, error) {
	var ev wire.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return store.RunEvent{}, nil, nil, err
	}
	at, err := time.Parse(time.RFC3339Nano, ev.Time)
	if err != nil {
		at = time.Now()
	}
	seq := ev.Seq
	out := store.RunEvent{Seq: &seq, At: at, Type: ev.Type, Level: ev.Level, Message: ev.Message}
	if out.Level == "" {
		out.Level = "info"
	}
	var progress json.RawMessage
	var snap *acceptance.InterimSnapshot
	switch {
	case ev.Progress != nil:
		progress, _ = json.Marshal(ev.Progress)
		out.Data = progress
	case ev.Interim != nil:
		out.Data, _ = json.Marshal(ev.Interim)
		s := acceptance.InterimSnapshot{Step: ev.Interim.Step, Level: ev.Interim.Level, Repetition: ev.Interim.Repetition, Seq: ev.Seq, At: at,
			Metrics: map[string]acceptance.InterimValue{}}
		for k, v := range ev.Interim.Metrics {
			s.Metrics[k] = acceptance.InterimValue{N: v.N, Mean: v.Mean, P50: v.P50, P95: v.P95, P99: v.P99, Max: v.Max, Rate: v.Rate}
		}
		snap = &s
	case ev.Result != nil:
		out.Data, _ = json.Marshal(ev.Result)
	case ev.Status != nil:
		out.Data, _ = json.Marshal(ev.Status)
	}
	return out, snap, progress, nil
}
