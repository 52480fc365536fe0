package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/service/ingest"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/service/stoploss"
	"github.com/accordlab/accord/store"
)

// A multi-host run (store.RunHosts) goes the same way as a one-host run,
// with every host at once: its worker takes every host's lease, all or
// none (store.AcquireLeases); launches every probe; releases them
// together at every barrier (runners.ExecuteMany); follows every event
// stream; and, once every probe ended, keeps every host's results and
// the hosts combined. One host failing stops the run on every host.

// multiHost is what a multi-host run's worker knows of its hosts.
type multiHost struct {
	rows  []store.RunHost
	hosts []store.Host
}

func (m multiHost) ids() []int64 {
	ids := make([]int64, len(m.hosts))
	for i, h := range m.hosts {
		ids[i] = h.ID
	}
	return ids
}

// hostNames are the run's hosts' names, in order.
func (m multiHost) hostNames() []string {
	names := make([]string, len(m.rows))
	for i, r := range m.rows {
		names[i] = r.HostName
	}
	return names
}

// watchedHosts are the run's hosts as its stop-loss watch judges them.
func (m multiHost) watchedHosts() []stoploss.Host {
	hosts := make([]stoploss.Host, len(m.rows))
	for i, r := range m.rows {
		hosts[i] = stoploss.Host{Ordinal: r.Ordinal, Name: r.HostName}
	}
	return hosts
}

func (m multiHost) names() string { return strings.Join(m.hostNames(), ", ") }

func loadMultiHost(ctx context.Context, st *store.Store, run store.Run) (multiHost, error) {
	var m multiHost
	var err error
	if m.rows, err = st.RunHosts(ctx, run.ID); err != nil {
		return m, err
	}
	for _, r := range m.rows {
		h, err := st.GetHost(ctx, run.ProgramID, r.HostID)
		if err != nil {
			return m, fmt.Errorf("run %d host %d: %w", run.ID, r.HostID, err)
		}
		m.hosts = append(m.hosts, h)
	}
	return m, nil
}

// workMultiHost is Work for a run across several hosts.
func (w *ExecuteRunWorker) workMultiHost(ctx context.Context, job *river.Job[ExecuteRunArgs], run store.Run) error {
	st := w.deps.Store
	mh, err := loadMultiHost(ctx, st, run)
	if err != nil {
		return fmt.Errorf("execute run %d: %w", run.ID, err)
	}
	if requested, err := st.CancelRequested(ctx, run.ID); err != nil {
		return err
	} else if requested {
		return stopMultiHostCancelled(ctx, w.deps, run, nil)
	}
	// Step 2: every host's lease, all or none.
	leases, busyHost, busyRun, err := st.AcquireLeases(ctx, mh.ids(), run.ID, w.deps.Holder, w.deps.leaseTTL())
	if errors.Is(err, store.ErrHostBusy) {
		name := fmt.Sprint(busyHost)
		for _, r := range mh.rows {
			if r.HostID == busyHost {
				name = r.HostName
			}
		}
		reason := fmt.Sprintf("waiting for host %s (busy with run #%d); the run takes all its %d hosts together", name, busyRun, len(mh.rows))
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
	stopHeartbeat := w.heartbeat(workCtx, cancelWork, leases)
	defer stopHeartbeat()
	budgetCtx, cancelBudget := context.WithTimeoutCause(workCtx, w.deps.attemptBudget(), errHandOver)
	defer cancelBudget()

	err = w.executeMultiHost(budgetCtx, job, run, mh, leases)
	switch {
	case errors.Is(context.Cause(workCtx), store.ErrFenced) || errors.Is(err, store.ErrFenced):
		w.deps.Log.Warn("run lease lost: another worker has the run", "run_id", run.ID)
		return nil
	case errors.Is(context.Cause(budgetCtx), errHandOver) && ctx.Err() == nil && err != nil:
		w.deps.Log.Debug("handing the run over to the next attempt", "run_id", run.ID)
		return river.JobSnooze(time.Second)
	}
	bg := context.WithoutCancel(ctx)
	if fresh, ferr := st.RunByID(bg, run.ID); ferr != nil || fresh.ProbeMayRun {
		w.deps.Log.Info("keeping the hosts for the run: its probes may still run there", "run_id", run.ID)
	} else if rerr := st.ReleaseLeases(bg, leases); rerr != nil {
		// The leases expire by themselves within their lifetime.
		w.deps.Log.Warn("host leases not released", "run_id", run.ID, "err", rerr)
	}
	return err
}

func (w *ExecuteRunWorker) executeMultiHost(ctx context.Context, job *river.Job[ExecuteRunArgs], run store.Run, mh multiHost, leases []store.Lease) error {
	st := w.deps.Store
	pv, err := st.GetSpecVersionByID(ctx, store.KindProfile, run.ProgramID, *run.ProfileVersionID)
	if err != nil {
		return err
	}
	var profile acceptance.ProfileSpec
	if err := json.Unmarshal(pv.Spec, &profile); err != nil {
		return w.failMultiHost(ctx, run, leases, "the profile version cannot be read: "+err.Error())
	}
	// A write that finds the run taken over ends the attempt (workMultiHost
	// sees ErrFenced), also from a hook that cannot return it.
	ctx, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	fenced := func(ctx context.Context, fn func(tx *store.Store) error) error {
		return st.InTx(ctx, func(tx *store.Store) error {
			if err := tx.CheckFences(ctx, leases); err != nil {
				return err
			}
			return fn(tx)
		})
	}
	queue, err := workerQueue(ctx)
	if err != nil {
		return err
	}
	env := rollout.Env{Keyring: w.deps.Keyring, Queue: queue}
	watch, err := stoploss.NewWatch(ctx, st, run, mh.watchedHosts()...)
	if err != nil {
		return w.failMultiHost(ctx, run, leases, "the gate set cannot be read: "+err.Error())
	}
	// A crossing an earlier attempt recorded (it may have died stopping
	// the probes): every host's probe is stopped rather than followed.
	resumed, err := watch.Resume(ctx, st)
	if err != nil {
		return err
	}
	switch {
	case resumed != nil:
		err := fenced(ctx, func(tx *store.Store) error {
			if err := stoploss.Record(ctx, tx, env, run, resumed); err != nil {
				return err
			}
			return tx.AddRunNote(ctx, run.ID, "warn", "resuming a run its stop-loss stopped: stopping the probe on every host. "+resumed.Explanation)
		})
		if err != nil {
			return err
		}
	case !run.Launched:
		err := fenced(ctx, func(tx *store.Store) error {
			return tx.SetRunState(ctx, run.ID, store.RunPreparing, fmt.Sprintf("preparing %d hosts (%s): connecting, uploading the probe, launching; they start together", len(mh.rows), mh.names()))
		})
		if err != nil {
			return err
		}
	default:
		if err := st.AddRunNote(ctx, run.ID, "info", "resuming: following every host's probe from where its events were stored"); err != nil {
			return err
		}
	}

	hostRuns := make([]runners.HostRun, len(mh.rows))
	for i, rh := range mh.rows {
		host := mh.hosts[i]
		target, err := labhost.Target(host, w.deps.Sealer)
		if err != nil {
			return w.failMultiHost(ctx, run, leases, fmt.Sprintf("host %s: %v", rh.HostName, err))
		}
		plan := wire.Plan{
			SchemaVersion: wire.PlanSchemaVersion, RunID: run.ID, Attempt: 1, Profile: profile,
			RunTimeout: acceptance.Duration(RunTimeout(profile)), AllowDestructive: host.AllowDestructive,
			WritePlaces: host.WritePlaces, CreatedLedger: createdLedger,
			Interim: acceptance.Duration(2 * time.Second), StopLossMetrics: watch.Metrics(),
			Role: rh.Role, Host: rh.HostName, Sync: true,
		}
		ord, name := rh.Ordinal, rh.HostName
		var launchedDir string // set before any event is read, in the host's own goroutine
		hostDir := func() string { return launchedDir }
		hooks := runners.Hooks{
			State: func(ctx context.Context, state, reason string) error {
				return fenced(ctx, func(tx *store.Store) error { return tx.SetRunHostState(ctx, run.ID, ord, state, reason) })
			},
			Launching: func(ctx context.Context, dir string) error {
				return fenced(ctx, func(tx *store.Store) error {
					return tx.RecordRunHostIntent(ctx, run.ID, ord, dir, probeDeadline(profile))
				})
			},
			Launched: func(ctx context.Context, dir, probePath string) error {
				launchedDir = dir
				return fenced(ctx, func(tx *store.Store) error { return tx.MarkRunHostLaunched(ctx, run.ID, ord, dir) })
			},
			ProbeEnded: func(ctx context.Context) error {
				return fenced(ctx, func(tx *store.Store) error { return tx.MarkRunHostProbeEnded(ctx, run.ID, ord) })
			},
			Events: func(ctx context.Context, lines [][]byte, offset int64) error {
				u := store.HostFollowUpdate{FollowUpdate: store.FollowUpdate{Offset: offset}}
				var snapshots []acceptance.InterimSnapshot
				var neighbours []store.SightedNeighbour
				var waitState string
				for _, line := range lines {
					d, err := decodeEvent(line)
					if err != nil {
						u.Events = append(u.Events, store.RunEvent{At: time.Now(), Type: "log", Level: "warn", Message: name + ": unreadable event line from the probe: " + err.Error()})
						continue
					}
					if d.event.Message != "" {
						d.event.Message = name + ": " + d.event.Message // the run's log holds every host's lines
					}
					u.Events = append(u.Events, d.event)
					if d.progress != nil {
						u.Progress = d.progress
					}
					if d.snapshot != nil {
						snapshots = append(snapshots, *d.snapshot)
					}
					if d.neighbour != nil {
						neighbours = append(neighbours, *d.neighbour)
					}
					if b, ok := barrierOfEvent(d.event); ok {
						at := -1
						waitState = store.RunHostRunning
						if b.State == wire.BarrierWaiting {
							at, waitState = b.Index, store.RunHostWaiting
						}
						u.WaitingAt = &at
					}
				}
				// The events, where the host waits and a stop-loss crossing
				// are kept together (step 5: the crossing before the probe is
				// stopped), as for a one-host run.
				var crossed *acceptance.StopLossBreach
				err := st.InTx(ctx, func(tx *store.Store) error {
					if err := tx.AppendHostFollowed(ctx, run.ID, ord, leases, u); err != nil {
						return err
					}
					if waitState != "" {
						if err := tx.SetRunHostState(ctx, run.ID, ord, waitState, hostWaitReason(waitState)); err != nil {
							return err
						}
					}
					var err error
					crossed, err = watch.Check(ctx, tx, env, name, snapshots)
					return err
				})
				if err != nil {
					watch.Retract(crossed)
					return err
				}
				if len(neighbours) > 0 {
					err := st.InTx(ctx, func(tx *store.Store) error {
						return recordNeighboursOf(ctx, tx, env, run, leaseOf(leases, host.ID), hostDir(), "host "+name, neighbours)
					})
					if err != nil {
						return err
					}
				}
				return abortFor(crossed)
			},
			Note: func(ctx context.Context, level, msg string) { w.note(ctx, run.ID, level, "host "+name+": "+msg) },
		}
		hostRuns[i] = runners.HostRun{
			Name: name, Hooks: hooks, WaitingAt: rh.WaitingAt,
			Target: runners.RunTarget{Host: target, RunID: run.ID, Attempt: 1, Plan: plan, Launched: rh.Launched, Offset: rh.EventsOffset,
				DirSuffix: fmt.Sprintf("h%d", host.ID)},
		}
		if resumed != nil {
			hostRuns[i].Target.Abort = resumed.Explanation
		}
	}

	outs, err := w.deps.Runner.ExecuteMany(ctx, runners.ManyRun{
		Hosts: hostRuns, Started: run.State == store.RunRunning || run.State == store.RunCollecting,
		Fenced: func(err error) bool { return errors.Is(err, store.ErrFenced) },
		Hooks: runners.ManyHooks{
			Released: func(ctx context.Context, b wire.Barrier, n int, spread time.Duration) {
				msg := fmt.Sprintf("barrier %d released on all %d hosts; the releases landed within %s of each other", b.Index, n, spread.Round(time.Millisecond))
				if b.Index == 0 {
					err := fenced(ctx, func(tx *store.Store) error {
						return tx.SetRunState(ctx, run.ID, store.RunRunning, fmt.Sprintf("measuring on %d hosts; they were released from the start barrier together (within %s)", n, spread.Round(time.Millisecond)))
					})
					w.fencedWriteFailed(run.ID, "run state", err, lose)
				}
				w.note(ctx, run.ID, "info", msg)
			},
			Note: func(ctx context.Context, level, msg string) { w.note(ctx, run.ID, level, msg) },
		},
	})
	for _, out := range outs {
		if out.Collection != nil {
			defer out.Collection.Remove() //nolint:errcheck
		}
	}
	var failure *runners.HostFailure
	switch {
	case err == nil:
	case errors.As(err, &failure) && failure.Err == nil:
		// A probe ended failed (or was stopped by the stop-loss): every
		// other host was stopped and collected; the results are kept.
	case errors.As(err, &failure):
		return stopMultiHost(context.WithoutCancel(ctx), w.deps, run, leases, store.RunFailed, failure.Reason)
	case errors.Is(err, store.ErrFenced):
		return err
	case errors.Is(context.Cause(ctx), store.ErrFenced):
		return context.Cause(ctx) // a fenced write of a hook lost the run
	case ctx.Err() != nil:
		requested, cerr := st.CancelRequested(context.WithoutCancel(ctx), run.ID)
		if cerr != nil {
			return errors.Join(err, cerr)
		}
		if requested {
			return stopMultiHostCancelled(context.WithoutCancel(ctx), w.deps, run, leases)
		}
		return err // River runs the job again; every host resumes from its offset
	default:
		return err
	}
	return w.finishMultiHost(ctx, run, mh, leases, profile, outs, watch.Crossed(), failure)
}

// hostWaitReason says what a host does at or past a barrier.
func hostWaitReason(state string) string {
	if state == store.RunHostWaiting {
		return "waiting at a barrier for the other hosts"
	}
	return "measuring"
}

// fencedWriteFailed deals with a fenced write that a hook cannot return:
// a run taken over by another worker ends the attempt (lose); any other
// failure is logged (the write says where the run stands, and the next
// one says it again).
func (w *ExecuteRunWorker) fencedWriteFailed(runID int64, what string, err error, lose context.CancelCauseFunc) {
	switch {
	case err == nil:
	case errors.Is(err, store.ErrFenced):
		lose(err)
	default:
		w.deps.Log.Warn(what+" not stored", "run_id", runID, "err", err)
	}
}

// leaseOf is the run's lease of a host.
func leaseOf(leases []store.Lease, hostID int64) store.Lease {
	for _, l := range leases {
		if l.HostID == hostID {
			return l
		}
	}
	return store.Lease{HostID: hostID} // none: its fenced writes are refused
}

// barrierOfEvent reads a stored barrier event.
func barrierOfEvent(ev store.RunEvent) (wire.Barrier, bool) {
	if ev.Type != wire.EventBarrier || len(ev.Data) == 0 {
		return wire.Barrier{}, false
	}
	var b wire.Barrier
	if json.Unmarshal(ev.Data, &b) != nil {
		return wire.Barrier{}, false
	}
	return b, true
}

// failMultiHost ends a multi-host run as failed, stopping its probes
// first where they may run, and tells River not to retry.
func (w *ExecuteRunWorker) failMultiHost(ctx context.Context, run store.Run, leases []store.Lease, reason string) error {
	if err := stopMultiHost(context.WithoutCancel(ctx), w.deps, run, leases, store.RunFailed, reason); err != nil {
		return err
	}
	return river.JobCancel(errors.New(reason))
}

// stopMultiHost stops the probe on every host of the run that may have one
// (over fresh connections, all at once), confirms nothing of the run is
// left on each, and ends the run in the final state with the reason
// saying what was stopped where. A host whose probe cannot be stopped
// stays reserved for it (store.AcquireLease) until its time limit, as for
// a one-host run; the reconciler keeps trying.
func stopMultiHost(ctx context.Context, d Deps, run store.Run, leases []store.Lease, state, reason string) error {
	st := d.Store
	ctx, done := context.WithTimeout(ctx, 2*time.Minute)
	defer done()
	if leases != nil {
		if err := st.CheckFences(ctx, leases); err != nil {
			return err
		}
	}
	mh, err := loadMultiHost(ctx, st, run)
	if err != nil {
		return err
	}
	type result struct {
		text  string
		ended bool
	}
	results := make([]result, len(mh.rows))
	var wg sync.WaitGroup
	for i, rh := range mh.rows {
		if rh.ProbeEndedAt != nil {
			results[i] = result{rh.HostName + " (its probe had ended)", true}
			continue
		}
		if rh.RemoteDir == "" {
			results[i] = result{rh.HostName + " (nothing was launched there)", true}
			continue
		}
		wg.Go(func() {
			stopped, err := stopProbe(ctx, d, mh.hosts[i], rh.RemoteDir)
			switch {
			case err != nil:
				results[i] = result{fmt.Sprintf("%s (could not be stopped: %v)", rh.HostName, err), false}
			case stopped.Signalled:
				results[i] = result{fmt.Sprintf("%s (stopped, %s; no process of the run is left)", rh.HostName, stopText(stopped.Killed)), true}
			default:
				results[i] = result{rh.HostName + " (no process of the run was running)", true}
			}
		})
	}
	wg.Wait()
	var parts []string
	for _, r := range results {
		parts = append(parts, r.text)
	}
	reason += "; hosts: " + strings.Join(parts, ", ")
	err = st.InTx(ctx, func(tx *store.Store) error {
		if leases != nil {
			if err := tx.CheckFences(ctx, leases); err != nil {
				return err
			}
		}
		// Every ended host at once: the hosts' rows are locked before the
		// run's (MarkRunHostProbeEnded), as a host's own hook locks them.
		var ended []int
		for i, r := range results {
			if r.ended {
				ended = append(ended, mh.rows[i].Ordinal)
			}
		}
		if len(ended) > 0 {
			if err := tx.MarkRunHostProbeEnded(ctx, run.ID, ended...); err != nil {
				return err
			}
		}
		for i, r := range results {
			if r.ended {
				if mh.rows[i].ProbeEndedAt == nil {
					if err := tx.SetRunHostState(ctx, run.ID, mh.rows[i].Ordinal, store.RunHostStopped, r.text); err != nil {
						return err
					}
				}
			}
		}
		return tx.SetRunState(ctx, run.ID, state, reason)
	})
	if errors.Is(err, store.ErrRunFinal) {
		return nil
	}
	return err
}

// finishMultiHost is step 6 of a multi-host run: the run's state from how
// its hosts' probes ended, every host's results and the hosts combined
// kept by the ingest (service/ingest), in one transaction fenced by every
// lease, which also enqueues evaluate_run.
func (w *ExecuteRunWorker) finishMultiHost(ctx context.Context, run store.Run, mh multiHost, leases []store.Lease, profile acceptance.ProfileSpec,
	outs []runners.Outcome, breach *acceptance.StopLossBreach, failure *runners.HostFailure) error {
	st := w.deps.Store
	folders := make([]ingest.HostFolder, len(mh.rows))
	missing := ""
	for i, rh := range mh.rows {
		folders[i] = ingest.HostFolder{Ordinal: rh.Ordinal, Role: rh.Role, Name: rh.HostName, HostID: rh.HostID, Files: outs[i].Collection}
		if outs[i].Collection == nil && missing == "" {
			missing = rh.HostName
		}
	}
	res := ingest.Results{Files: ingest.MergeFolders(folders)}
	var importErr error
	if missing == "" {
		res.Measurements, res.Warnings, importErr = ingest.ReadHostFolders(folders, profile, w.deps.Version)
	}
	defer ingest.Release(res.Measurements)
	state, reason := store.RunEvaluating, fmt.Sprintf("judging the results of %d hosts, combined", len(mh.rows))
	switch {
	case breach != nil:
		state, reason = store.RunFailed, "stopped by the stop-loss "+breach.Explanation+"; stopped on every host"
	case failure != nil:
		state, reason = store.RunFailed, failure.Reason+"; the other hosts were stopped"
	case missing != "":
		state, reason = store.RunFailed, "the run folder of host "+missing+" was not collected"
	case importErr != nil:
		state, reason = store.RunFailed, "the results could not be read: "+importErr.Error()
	}
	if importErr == nil && len(res.Measurements) > 0 {
		var combined []acceptance.Measurement
		for _, m := range res.Measurements {
			if m.Host == "" {
				combined = append(combined, m)
			}
		}
		var err error
		if res.Charts, err = ingest.MultiHostCharts(ctx, st, profile, run.BaselineRunID, folders, combined); err != nil {
			return err
		}
	}
	queue, err := workerQueue(ctx)
	if err != nil {
		return err
	}
	env := rollout.Env{Keyring: w.deps.Keyring, Queue: queue}
	return st.InTx(ctx, func(tx *store.Store) error {
		if err := tx.CheckFences(ctx, leases); err != nil {
			return err
		}
		for _, rh := range mh.rows {
			hostState, hostReason := store.RunHostEnded, "its probe ended and its folder was collected"
			if failure != nil && failure.Ordinal == rh.Ordinal {
				hostState, hostReason = store.RunHostFailed, failure.Reason
			}
			if err := tx.SetRunHostState(ctx, run.ID, rh.Ordinal, hostState, hostReason); err != nil {
				return err
			}
		}
		if err := ingest.SaveHostFacts(ctx, tx, run.ID, folders); err != nil {
			return err
		}
		return ingest.Save(ctx, tx, env, run, res, ingest.Outcome{State: state, Reason: reason, Breach: breach})
	})
}

// endLeftBehindMultiHost is endLeftBehindRun for a multi-host run: every
// host's probe is stopped, the run ends, and its hosts are given back.
func endLeftBehindMultiHost(ctx context.Context, d Deps, run store.Run, jobState string) error {
	st := d.Store
	requested, err := st.CancelRequested(ctx, run.ID)
	if err != nil {
		return err // a cancel asked for must not end the run as failed
	}
	if requested {
		err = stopMultiHostCancelled(ctx, d, run, nil)
	} else {
		err = stopMultiHost(ctx, d, run, nil, store.RunFailed, fmt.Sprintf("its job ended (%s) without finishing the run", jobState))
	}
	if err != nil {
		return err
	}
	rows, err := st.RunHosts(ctx, run.ID)
	if err != nil {
		return err
	}
	for _, rh := range rows {
		if err := st.ReleaseRunLease(ctx, rh.HostID, run.ID); err != nil {
			return err
		}
	}
	return nil
}

// stopMultiHostLeftBehind tries again to stop the probes of an ended
// multi-host run that could not be stopped on some host: each stop that
// succeeds frees that host.
func stopMultiHostLeftBehind(ctx context.Context, d Deps, run store.Run) error {
	st := d.Store
	mh, err := loadMultiHost(ctx, st, run)
	if err != nil {
		return err
	}
	for i, rh := range mh.rows {
		if rh.ProbeEndedAt != nil {
			continue
		}
		if rh.RemoteDir != "" {
			stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
			_, err := stopProbe(stopCtx, d, mh.hosts[i], rh.RemoteDir)
			cancel()
			if err != nil {
				d.Log.Info("the probe of an ended run still cannot be stopped", "run_id", run.ID, "host", rh.HostName, "err", err)
				continue
			}
		}
		if err := st.InTx(ctx, func(tx *store.Store) error {
			if err := tx.MarkRunHostProbeEnded(ctx, run.ID, rh.Ordinal); err != nil {
				return err
			}
			return tx.AddRunNote(ctx, run.ID, "info", "the probe left on host "+rh.HostName+" is gone: the host is free")
		}); err != nil {
			return err
		}
	}
	return nil
}

// stopMultiHostCancelled stops every host's probe of a multi-host run and
// ends it as cancelled by the user who asked.
func stopMultiHostCancelled(ctx context.Context, d Deps, run store.Run, leases []store.Lease) error {
	by, err := d.Store.CancelRequester(ctx, run.ID)
	if err != nil {
		return err
	}
	return stopMultiHost(ctx, d, run, leases, store.RunCancelled, "cancelled by "+by)
}
