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
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/service/stoploss"
	"github.com/accordlab/accord/store"
)

// ExecuteRunArgs executes one run on its lab host: the way of a run, steps
// 2 to 6 (docs/DESIGN.md).
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
	if run.RiverJobID != nil && *run.RiverJobID != job.ID {
		// Another job took the run over (this job's worker seemed gone): it
		// is the run's now, and this one leaves everything to it.
		w.deps.Log.Info("the run was taken over by another job", "run_id", run.ID, "job_id", job.ID, "run_job_id", *run.RiverJobID)
		return nil
	}
	if run.HostID == nil || run.ProfileVersionID == nil {
		return w.fail(ctx, run, nil, "the run has no host or profile")
	}
	if run.MultiHost() {
		return w.workMultiHost(ctx, job, run)
	}
	host, err := st.GetHost(ctx, run.ProgramID, *run.HostID)
	if err != nil {
		return fmt.Errorf("execute run %d: %w", run.ID, err)
	}

	if requested, err := st.CancelRequested(ctx, run.ID); err != nil {
		return err
	} else if requested {
		// A cancel no worker carried out: this job took the run over from
		// one that vanished first.
		return stopAndCancel(ctx, w.deps, run, host, nil, run.RemoteDir)
	}

	// Step 2: the host lease. A busy host snoozes the job.
	lease, busyRun, err := st.AcquireLease(ctx, host.ID, run.ID, w.deps.Holder, w.deps.leaseTTL())
	if errors.Is(err, store.ErrHostBusy) {
		reason := fmt.Sprintf("waiting for host %s (busy with run #%d)", host.Name, busyRun)
		if other, err := st.RunByID(ctx, busyRun); err == nil && store.RunFinal(other.State) && other.ProbeMayRun && other.ProbeDeadline != nil {
			reason = fmt.Sprintf("waiting for host %s: run #%d ended without its probe being stopped (the host could not be reached), so the host stays that probe's until it is stopped or its time limit passes (%s)",
				host.Name, busyRun, other.ProbeDeadline.UTC().Format("2006-01-02 15:04 UTC"))
		}
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
	stopHeartbeat := w.heartbeat(workCtx, cancelWork, []store.Lease{lease})
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
// measuring on it (a launch may have happened and its end was not seen:
// this process is stopping, or the attempt failed and will be retried).
// Such a lease just expires, and AcquireLease keeps the host for the run
// until its probe is seen to end.
func (w *ExecuteRunWorker) releaseLease(ctx context.Context, runID int64, lease store.Lease) {
	run, err := w.deps.Store.RunByID(ctx, runID)
	if err != nil {
		w.deps.Log.Warn("keeping the host for the run: whether its probe may still run there cannot be read", "run_id", runID, "host_id", lease.HostID, "err", err)
		return
	}
	if run.ProbeMayRun {
		w.deps.Log.Info("keeping the host for the run: its probe may still run there", "run_id", runID, "host_id", lease.HostID)
		return
	}
	if err := w.deps.Store.ReleaseLease(ctx, lease); err != nil {
		// The lease expires by itself within its lifetime.
		w.deps.Log.Warn("host lease not released", "run_id", runID, "host_id", lease.HostID, "err", err)
	}
}

// heartbeat renews the run's leases (every host's, for a multi-host run)
// until stopped, also while the work ends after its context was cancelled
// (stopping a probe takes a while, and a lapsed lease would have the run
// taken over). Losing the lease cancels
// the work with ErrFenced as the cause; a cancel the user asked for (which
// River may not have delivered: the job may have been taken over) cancels
// it with errCancelRequested.
func (w *ExecuteRunWorker) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, leases []store.Lease) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	ttl := w.deps.leaseTTL()
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer close(stopped)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				err := w.deps.Store.RenewLeases(ctx, leases, ttl)
				if errors.Is(err, store.ErrFenced) {
					cancel(store.ErrFenced)
					return
				}
				if err != nil {
					w.deps.Log.Warn("lease heartbeat failed", "run_id", leases[0].RunID, "err", err)
					continue
				}
				if requested, err := w.deps.Store.CancelRequested(ctx, leases[0].RunID); err == nil && requested {
					cancel(errCancelRequested)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// errCancelRequested ends the work of a run whose cancel was asked for.
var errCancelRequested = errors.New("the run's cancel was requested")

// createdLedger is where the probe records the files it created, relative
// to the run folder (BASE/runs/RUN-ATTEMPT): one ledger per installation
// and host login, so that a later run may write its own files again.
const createdLedger = "../../created-files.jsonl"

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
	watch, err := stoploss.NewWatch(ctx, st, run)
	if err != nil {
		return w.fail(ctx, run, &lease, "the gate set cannot be read: "+err.Error())
	}
	// A crossing an earlier attempt recorded (it may have died stopping
	// the probe), or the one the stored windows make: the probe is stopped
	// rather than followed.
	breach, err := watch.Resume(ctx, st)
	if err != nil {
		return err
	}
	queue, err := workerQueue(ctx)
	if err != nil {
		return err
	}
	env := rollout.Env{Keyring: w.deps.Keyring, Queue: queue}
	plan := wire.Plan{
		SchemaVersion: wire.PlanSchemaVersion, RunID: run.ID, Attempt: 1, Profile: profile,
		RunTimeout: acceptance.Duration(RunTimeout(profile)), AllowDestructive: host.AllowDestructive,
		WritePlaces: host.WritePlaces, CreatedLedger: createdLedger,
		Interim: acceptance.Duration(2 * time.Second),
	}
	plan.StopLossMetrics = watch.Metrics()
	rt := runners.RunTarget{Host: target, RunID: run.ID, Attempt: 1, Plan: plan, Launched: run.Launched, Offset: run.EventsOffset}

	fenced := func(fn func(tx *store.Store) error) error {
		return st.InTx(ctx, func(tx *store.Store) error {
			if err := tx.CheckFence(ctx, lease); err != nil {
				return err
			}
			return fn(tx)
		})
	}
	switch {
	case breach != nil:
		// Kept before anything else happens (Record keeps a run's first
		// crossing once), so that it is never lost again.
		err := fenced(func(tx *store.Store) error {
			if err := stoploss.Record(ctx, tx, env, run, breach); err != nil {
				return err
			}
			return tx.AddRunNote(ctx, run.ID, "warn", "resuming a run its stop-loss stopped: stopping the probe. "+breach.Explanation)
		})
		if err != nil {
			return err
		}
		rt.Abort = breach.Explanation
	case run.Launched:
		if err := st.AddRunNote(ctx, run.ID, "info", fmt.Sprintf("resuming: following the probe from byte %d of its event stream", run.EventsOffset)); err != nil {
			return err
		}
	}
	hooks := runners.Hooks{
		State: func(ctx context.Context, state, reason string) error {
			return fenced(func(tx *store.Store) error { return tx.SetRunState(ctx, run.ID, state, reason) })
		},
		Launching: func(ctx context.Context, dir string) error {
			return fenced(func(tx *store.Store) error { return tx.RecordLaunchIntent(ctx, run.ID, dir, probeDeadline(profile)) })
		},
		Launched: func(ctx context.Context, dir, probePath string) error {
			return fenced(func(tx *store.Store) error { return tx.MarkLaunched(ctx, run.ID, dir) })
		},
		ProbeEnded: func(ctx context.Context) error {
			return fenced(func(tx *store.Store) error { return tx.MarkProbeEnded(ctx, run.ID) })
		},
		Events: func(ctx context.Context, lines [][]byte, offset int64) error {
			update := store.FollowUpdate{Offset: offset}
			var snapshots []acceptance.InterimSnapshot
			var neighbours []store.SightedNeighbour
			for _, line := range lines {
				d, err := decodeEvent(line)
				if err != nil {
					update.Events = append(update.Events, store.RunEvent{At: time.Now(), Type: "log", Level: "warn", Message: "unreadable event line from the probe: " + err.Error()})
					continue
				}
				update.Events = append(update.Events, d.event)
				if d.progress != nil {
					update.Progress = d.progress
				}
				if d.snapshot != nil {
					snapshots = append(snapshots, *d.snapshot)
				}
				if d.neighbour != nil {
					neighbours = append(neighbours, *d.neighbour)
				}
			}
			// What the events say is kept with them, in their transaction: a
			// worker that dies after it (stopping the probe, say) leaves it
			// to the next attempt, which follows from after these events.
			// Step 5: a stop-loss crossing is kept before the probe is stopped.
			var crossed *acceptance.StopLossBreach
			err := st.InTx(ctx, func(tx *store.Store) error {
				if err := tx.AppendFollowed(ctx, run.ID, lease, update); err != nil {
					return err
				}
				if len(neighbours) > 0 {
					if err := recordNeighbours(ctx, tx, env, run, lease, neighbours); err != nil {
						return err
					}
				}
				var err error
				crossed, err = watch.Check(ctx, tx, env, "", snapshots)
				return err
			})
			if err != nil {
				watch.Retract(crossed)
				return err
			}
			return abortFor(crossed)
		},
		Note: func(ctx context.Context, level, msg string) { w.note(ctx, run.ID, level, msg) },
	}

	out, err := w.deps.Runner.Execute(ctx, rt, hooks)
	if out.Collection != nil {
		defer func() {
			if err := out.Collection.Remove(); err != nil {
				w.deps.Log.Warn("collected run folder not removed", "run_id", run.ID, "err", err)
			}
		}()
	}
	if err != nil {
		return w.handleFailure(ctx, job, run, host, lease, out, err)
	}
	return w.finish(ctx, run, host, lease, profile, out, watch.Crossed())
}

// abortFor is what an Events hook returns after its batch was stored: a
// stop-loss crossing stops the probe (runners.ErrAbort); none, nothing.
func abortFor(crossed *acceptance.StopLossBreach) error {
	if crossed == nil {
		return nil
	}
	return fmt.Errorf("%w: %s", runners.ErrAbort, crossed.Explanation)
}

// note adds a line to a run's log; one that cannot be stored is logged
// (the run goes on: a note is not worth failing it for).
func (w *ExecuteRunWorker) note(ctx context.Context, runID int64, level, msg string) {
	if err := w.deps.Store.AddRunNote(ctx, runID, level, msg); err != nil {
		w.deps.Log.Warn("run note not stored", "run_id", runID, "note", msg, "err", err)
	}
}

// handleFailure decides between cancelled, failed and "try again".
func (w *ExecuteRunWorker) handleFailure(ctx context.Context, job *river.Job[ExecuteRunArgs], run store.Run, host store.Host, lease store.Lease, out runners.Outcome, err error) error {
	st := w.deps.Store
	bg := context.WithoutCancel(ctx)
	if errors.Is(err, store.ErrFenced) || errors.Is(context.Cause(ctx), store.ErrFenced) {
		return err
	}
	if errors.Is(err, store.ErrRunFinal) && ctx.Err() == nil {
		// The run ended meanwhile (a user cancelled it as its probe was
		// launched, say): stop whatever may run of it; nothing to retry.
		return stopAndEnd(bg, w.deps, run, host, &lease, out.Dir, store.RunCancelled, "the run ended meanwhile")
	}
	if ctx.Err() != nil {
		// The job's context ended: a user's cancel, or this process stopping.
		requested, cerr := st.CancelRequested(bg, run.ID)
		if cerr != nil {
			return errors.Join(err, cerr) // River runs the job again, which looks again
		}
		if requested {
			return stopAndCancel(bg, w.deps, run, host, &lease, out.Dir)
		}
		return err // River runs the job again; it resumes from the offset
	}
	var perm *runners.PermanentError
	if errors.As(err, &perm) {
		return w.fail(bg, run, &lease, perm.Error())
	}
	if job.Attempt >= job.MaxAttempts {
		return w.fail(bg, run, &lease, fmt.Sprintf("gave up after %d attempts: %v", job.Attempt, err))
	}
	// Say so until the next attempt says what it does.
	if nerr := st.AddRunNote(bg, run.ID, "warn", "attempt failed, will retry: "+err.Error()); nerr != nil {
		w.deps.Log.Warn("run note not stored", "run_id", run.ID, "err", nerr)
	}
	retry := fmt.Sprintf("attempt %d of %d failed (%s); the next one starts at %s", job.Attempt, job.MaxAttempts, err,
		w.NextRetry(job).UTC().Format("15:04:05 UTC"))
	if serr := setReason(bg, st, run.ID, &lease, retry); serr != nil && !errors.Is(serr, store.ErrFenced) {
		w.deps.Log.Warn("run reason not updated", "run_id", run.ID, "err", serr)
	}
	return err
}

// setReason says what is happening to a run without changing its state
// (fenced when a lease is given).
func setReason(ctx context.Context, st *store.Store, runID int64, lease *store.Lease, reason string) error {
	return st.InTx(ctx, func(tx *store.Store) error {
		if lease != nil {
			if err := tx.CheckFence(ctx, *lease); err != nil {
				return err
			}
		}
		run, err := tx.RunByID(ctx, runID)
		if err != nil {
			return err
		}
		if store.RunFinal(run.State) {
			return nil
		}
		return tx.SetRunState(ctx, runID, run.State, reason)
	})
}

// stopAndCancel stops the probe (in the run's folder on the host, when one
// is known) and ends the run as cancelled by the user who asked.
func stopAndCancel(ctx context.Context, d Deps, run store.Run, host store.Host, lease *store.Lease, dir string) error {
	by, err := d.Store.CancelRequester(ctx, run.ID)
	if err != nil {
		return err
	}
	return stopAndEnd(ctx, d, run, host, lease, dir, store.RunCancelled, "cancelled by "+by)
}

// stopAndFail stops the probe (in the run's recorded folder, if any) and
// ends the run as failed with the reason.
func stopAndFail(ctx context.Context, d Deps, run store.Run, host store.Host, reason string) error {
	return stopAndEnd(ctx, d, run, host, nil, run.RemoteDir, store.RunFailed, reason)
}

// stopAndEnd stops the probe on the host over a fresh connection (when a
// run folder is known) and then ends the run in the final state, the
// reason saying what was stopped. A probe that was stopped, or found not
// running, has ended: the host is free once the run lets go of its lease.
// A stop that fails (the host unreachable) still ends the run, saying so:
// the probe may then measure on, and the host stays reserved for it until
// its own time limit has ended it (the reconciler keeps trying to stop it
// meanwhile).
func stopAndEnd(ctx context.Context, d Deps, run store.Run, host store.Host, lease *store.Lease, dir, state, reason string) error {
	st := d.Store
	ctx, done := context.WithTimeout(ctx, 2*time.Minute)
	defer done()
	if lease != nil {
		// A worker that lost the run to another must not stop its probe.
		if err := st.CheckFence(ctx, *lease); err != nil {
			return err
		}
	}
	fresh, err := st.RunByID(ctx, run.ID)
	if err != nil {
		return err
	}
	if dir == "" {
		dir = fresh.RemoteDir
	}
	// A run folder is known once the worker got that far (it is recorded
	// with the intent to launch): stop whatever runs there. The launch may
	// have happened without being recorded, so "not recorded as launched"
	// is not "not running"; stopping a folder with no probe in it does
	// nothing but claim it, so that a launch still on its way starts
	// nothing there.
	ended := dir == ""
	if dir != "" {
		// Stopping takes a while (a grace period, fault guardians): say so.
		if err := setReason(ctx, st, run.ID, lease, "stopping the probe on the host ("+reason+")"); err != nil {
			return err
		}
		stopped, err := stopProbe(ctx, d, host, dir)
		switch {
		case err != nil:
			if nerr := st.AddRunNote(ctx, run.ID, "error", "stopping the probe failed: "+err.Error()); nerr != nil {
				d.Log.Warn("run note not stored", "run_id", run.ID, "err", nerr) // the reason says it too
			}
			reason += "; the probe could not be stopped (" + err.Error() + ")"
			if fresh.ProbeMayRun && fresh.ProbeDeadline != nil {
				reason += fmt.Sprintf(": the host stays reserved for it until %s, when its own time limit has ended it",
					fresh.ProbeDeadline.UTC().Format("2006-01-02 15:04 UTC"))
			}
		case stopped.Signalled:
			reason += fmt.Sprintf("; the probe was stopped (%s), no process of the run is left", stopText(stopped.Killed))
			ended = true
		default:
			reason += "; no process of the run was running on the host"
			ended = true
		}
	}
	err = st.InTx(ctx, func(tx *store.Store) error {
		if lease != nil {
			if err := tx.CheckFence(ctx, *lease); err != nil {
				return err
			}
		}
		if ended {
			if err := tx.MarkProbeEnded(ctx, run.ID); err != nil {
				return err
			}
		}
		// A run that ended meanwhile keeps its end; its probe's is kept.
		if err := tx.SetRunState(ctx, run.ID, state, reason); !errors.Is(err, store.ErrRunFinal) {
			return err
		}
		return nil
	})
	return err
}

// stopProbe stops whatever runs in a run folder on the host.
func stopProbe(ctx context.Context, d Deps, host store.Host, dir string) (sshrun.Stopped, error) {
	target, err := labhost.Target(host, d.Sealer)
	if err != nil {
		return sshrun.Stopped{}, err
	}
	return d.Runner.Stop(ctx, target, dir, "")
}

func stopText(killed bool) string {
	if killed {
		return "SIGKILL after the grace period"
	}
	return "SIGTERM"
}

// fail ends the run as failed with a reason (fenced when a lease is held)
// and tells River not to retry. A probe that may be running (a launch was
// about to happen or happened) is stopped first: the run must not end,
// and give its host away, while its probe measures on.
func (w *ExecuteRunWorker) fail(ctx context.Context, run store.Run, lease *store.Lease, reason string) error {
	bg := context.WithoutCancel(ctx)
	fresh, err := w.deps.Store.RunByID(bg, run.ID)
	if err != nil {
		return err
	}
	if fresh.ProbeMayRun && fresh.RemoteDir != "" && fresh.HostID != nil {
		host, err := w.deps.Store.GetHost(bg, fresh.ProgramID, *fresh.HostID)
		if err != nil {
			return err
		}
		if err := stopAndEnd(bg, w.deps, fresh, host, lease, fresh.RemoteDir, store.RunFailed, reason); err != nil {
			return err
		}
		return river.JobCancel(errors.New(reason))
	}
	err = w.deps.Store.InTx(bg, func(tx *store.Store) error {
		if lease != nil {
			if err := tx.CheckFence(bg, *lease); err != nil {
				return err
			}
		}
		return tx.SetRunState(bg, run.ID, store.RunFailed, reason)
	})
	if err != nil && !errors.Is(err, store.ErrRunFinal) {
		return err
	}
	return river.JobCancel(errors.New(reason))
}

// recordNeighbours keeps, in tx, the other runs the probe saw active on
// the host: this run is contaminated, and so is each of them; one of this
// installation that was judged already is judged again (env's queue).
func recordNeighbours(ctx context.Context, tx *store.Store, env rollout.Env, run store.Run, lease store.Lease, seen []store.SightedNeighbour) error {
	fresh, err := tx.RunByID(ctx, run.ID)
	if err != nil {
		return err
	}
	return recordNeighboursOf(ctx, tx, env, run, lease, fresh.RemoteDir, "this host", seen)
}

// recordNeighboursOf records, in tx, what the probe in selfDir on host
// (for the run's log) saw, fenced by that host's lease.
func recordNeighboursOf(ctx context.Context, tx *store.Store, env rollout.Env, run store.Run, lease store.Lease, selfDir, host string, seen []store.SightedNeighbour) error {
	rejudge, err := tx.RecordNeighbours(ctx, run.ID, lease, selfDir, seen)
	if err != nil {
		return err
	}
	for _, n := range seen {
		who := n.Dir
		if n.RunID > 0 {
			who = fmt.Sprintf("run #%d (%s)", n.RunID, n.Dir)
		}
		if err := tx.AddRunNote(ctx, run.ID, "error", "another Accord run was active on "+host+" while this one measured: "+who+"; this run is contaminated and cannot pass"); err != nil {
			return err
		}
	}
	for _, id := range rejudge {
		if err := tx.AddRunNote(ctx, id, "error", fmt.Sprintf("run #%d's probe saw this run active on the host while it measured: this run is contaminated and is judged again", run.ID)); err != nil {
			return err
		}
		if err := env.Queue.EvaluateRun(ctx, tx, id); err != nil {
			return fmt.Errorf("judge run %d again: %w", id, err)
		}
	}
	return nil
}

// probeDeadline is how long after its launch a probe has surely ended by
// itself: the plan's time limit (RunTimeout), and time for the probe to
// stop its steps and write its status.
func probeDeadline(p acceptance.ProfileSpec) time.Duration {
	return RunTimeout(p) + 5*time.Minute
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
			levels := max(1, len(acceptance.StepLevels(s)))
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

// decodedEvent is a probe event line as stored, with what the worker acts
// on: an interim snapshot (stop-loss), the progress, another run seen on
// the host.
type decodedEvent struct {
	event     store.RunEvent
	snapshot  *acceptance.InterimSnapshot
	progress  json.RawMessage
	neighbour *store.SightedNeighbour
}

// decodeEvent turns a probe event line into a stored event, and extracts
// what it carries that the worker acts on.
func decodeEvent(line []byte) (decodedEvent, error) {
	var ev wire.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return decodedEvent{}, err
	}
	at, err := time.Parse(time.RFC3339Nano, ev.Time)
	if err != nil {
		at = time.Now()
	}
	seq := ev.Seq
	d := decodedEvent{event: store.RunEvent{Seq: &seq, At: at, Type: ev.Type, Level: ev.Level, Message: ev.Message}}
	if d.event.Level == "" {
		d.event.Level = "info"
	}
	// The event's payload is stored as the probe's fields decoded it (its
	// known fields only).
	var payload any
	switch {
	case ev.Progress != nil:
		payload = ev.Progress
	case ev.Interim != nil:
		payload = ev.Interim
	case ev.Result != nil:
		payload = ev.Result
	case ev.Barrier != nil:
		payload = ev.Barrier
	case ev.Status != nil:
		payload = ev.Status
	case ev.Neighbour != nil:
		payload = ev.Neighbour
	}
	if payload != nil {
		if d.event.Data, err = json.Marshal(payload); err != nil {
			return decodedEvent{}, fmt.Errorf("%s event: %w", ev.Type, err)
		}
	}
	switch {
	case ev.Progress != nil:
		d.progress = d.event.Data
	case ev.Interim != nil:
		s := ev.Interim.Snapshot(ev.Seq, at)
		d.snapshot = &s
	case ev.Neighbour != nil:
		n := store.SightedNeighbour{Dir: ev.Neighbour.Dir, PID: ev.Neighbour.PID, FirstSeen: at, LastSeen: at}
		if ev.Neighbour.SameInstallation {
			n.RunID = ev.Neighbour.RunID
		}
		if t, err := time.Parse(time.RFC3339Nano, ev.Neighbour.FirstSeen); err == nil {
			n.FirstSeen = t
		}
		if t, err := time.Parse(time.RFC3339Nano, ev.Neighbour.LastSeen); err == nil {
			n.LastSeen = t
		}
		d.neighbour = &n
	}
	return d, nil
}
