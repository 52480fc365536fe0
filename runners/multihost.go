package runners

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
)

// HostRun is one host of a multi-host run, as ExecuteMany drives it.
type HostRun struct {
	Name   string // the host's name, for messages
	Target RunTarget
	Hooks  Hooks
	// WaitingAt is the barrier its probe waits at as its stored events say
	// (-1: none): a worker taking the run over releases it from there.
	WaitingAt int
}

// ManyRun is a multi-host run as ExecuteMany drives it.
type ManyRun struct {
	Hosts []HostRun
	// Started: the run's start barrier was released on every host before
	// (a worker takes the run over), so a host failing now did not fail
	// to start.
	Started bool
	// Fenced says of a host's error that this worker lost the run (its
	// lease was taken over): then nothing is stopped, the other hosts'
	// following ends, and ExecuteMany returns that error.
	Fenced func(error) bool
	Hooks  ManyHooks
}

// ManyHooks hear what happens to the run as a whole.
type ManyHooks struct {
	// Released is called once a barrier was released on every host, with
	// the spread of the releases: from the first host's release being
	// written to the last's. Barrier 0 is the start.
	Released func(ctx context.Context, b wire.Barrier, hosts int, spread time.Duration)
	// Note adds a line of the server's own to the run's log.
	Note func(ctx context.Context, level, message string)
}

// HostFailure is why a multi-host run cannot go on: a host could not
// start or be followed (Err), or its probe ended other than done. The
// other hosts' probes were stopped.
type HostFailure struct {
	Ordinal int
	Name    string
	// BeforeStart: the host failed before every host was released from
	// the start barrier (it could not start).
	BeforeStart bool
	// Err is the host's error (nil when its probe ended failed, crashed or
	// aborted: its Outcome says how).
	Err error
	// Reason says in words what happened to the host.
	Reason string
}

func (f *HostFailure) Error() string { return f.Reason }

// ExecuteMany drives a multi-host run: every host as Execute drives one
// (connect, upload, launch, follow, collect), at the same time, and the
// barriers of the run (wire.Barrier) released on every host at once when
// all of them wait at the same one. A host that fails (cannot start,
// cannot be followed, or its probe ends other than done: failed, crashed,
// or stopped by the stop-loss) stops the run: the other hosts' probes are
// stopped over their control connections, and each host's Execute then
// ends (collecting what its folder holds, where it can). The outcomes are
// per host, in order; the error is ctx's, or a *HostFailure naming the
// first host that failed.
func (c Config) ExecuteMany(ctx context.Context, run ManyRun) ([]Outcome, error) {
	hosts := run.Hosts
	n := len(hosts)
	ctx, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	co := &coordinator{c: c, hosts: hosts, mh: run.Hooks, fenced: run.Fenced, lose: lose, waiting: make([]int, n), ended: make([]bool, n), released: -1,
		controls: make([]*Control, n), dirs: make([]string, n)}
	if run.Started {
		co.released = 0
	}
	for i, h := range hosts {
		co.waiting[i] = h.WaitingAt
		co.controls[i] = c.Control(h.Target.Host)
		// A host waits at a barrier only once every earlier one was
		// released (all hosts were at it): those need no waiting for.
		co.released = max(co.released, h.WaitingAt-1)
	}
	defer func() {
		for _, k := range co.controls {
			k.Close()
		}
	}()
	outs := make([]Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range hosts {
		wg.Go(func() {
			outs[i], errs[i] = c.Execute(ctx, hosts[i].Target, co.hooks(ctx, i))
			co.hostEnded(ctx, i, outs[i], errs[i])
		})
	}
	wg.Wait()
	co.stops.Wait()
	if cause := context.Cause(ctx); cause != nil && co.fenced != nil && co.fenced(cause) {
		return outs, cause
	}
	if ctx.Err() != nil {
		return outs, ctx.Err()
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.failure != nil {
		return outs, co.failure
	}
	return outs, nil
}

// coordinator keeps where every host's probe stands at the barriers.
type coordinator struct {
	c     Config
	hosts []HostRun
	mh    ManyHooks

	mu       sync.Mutex
	waiting  []int // barrier each host waits at, -1: none
	ended    []bool
	released int      // the highest barrier released on every host (or passed by one)
	dirs     []string // run folders, once known
	controls []*Control
	failure  *HostFailure
	stops    sync.WaitGroup
	fenced   func(error) bool
	lose     context.CancelCauseFunc
}

// hooks wraps a host's hooks: the run folder is noted at launch, and the
// barrier events the host's Events hook stored are seen here after it.
func (co *coordinator) hooks(ctx context.Context, i int) Hooks {
	h := co.hosts[i].Hooks
	launching := h.Launching
	h.Launching = func(ctx context.Context, dir string) error {
		co.mu.Lock()
		failed := co.failure
		if failed == nil {
			co.dirs[i] = dir
		}
		co.mu.Unlock()
		if failed != nil {
			return fmt.Errorf("not launched: the run is stopping (%s)", failed.Reason)
		}
		return launching(ctx, dir)
	}
	launched := h.Launched
	h.Launched = func(ctx context.Context, dir, probePath string) error {
		if err := launched(ctx, dir, probePath); err != nil {
			return err
		}
		// Connect the control now, so that a release is one command away.
		if err := co.controls[i].Connect(ctx, probePath); err != nil {
			co.note(ctx, "warn", fmt.Sprintf("host %s: the control connection failed (%v); releases will retry it", co.hosts[i].Name, err))
		}
		return nil
	}
	events := h.Events
	h.Events = func(ctx context.Context, lines [][]byte, offset int64) error {
		err := events(ctx, lines, offset)
		if err != nil && !errors.Is(err, ErrAbort) {
			return err
		}
		for _, line := range lines {
			if b, ok := barrierOf(line); ok {
				co.observe(ctx, i, b)
			}
		}
		return err
	}
	return h
}

// barrierOf decodes a barrier event line.
func barrierOf(line []byte) (wire.Barrier, bool) {
	if !bytes.Contains(line, []byte(`"`+wire.EventBarrier+`"`)) {
		return wire.Barrier{}, false
	}
	var ev wire.Event
	if json.Unmarshal(line, &ev) != nil || ev.Type != wire.EventBarrier || ev.Barrier == nil {
		return wire.Barrier{}, false
	}
	return *ev.Barrier, true
}

func (co *coordinator) note(ctx context.Context, level, msg string) {
	if co.mh.Note != nil {
		co.mh.Note(ctx, level, msg)
	}
}

// observe records a host at or past a barrier and releases what is due:
// a barrier every host (still running) waits at, and, on a host that waits
// at a barrier already released elsewhere (a worker took the run over
// between two hosts' releases), that barrier again.
func (co *coordinator) observe(ctx context.Context, i int, b wire.Barrier) {
	co.mu.Lock()
	defer co.mu.Unlock()
	switch b.State {
	case wire.BarrierWaiting:
		co.waiting[i] = b.Index
	case wire.BarrierReleased:
		if co.waiting[i] == b.Index {
			co.waiting[i] = -1
		}
		co.released = max(co.released, b.Index)
	}
	co.releaseDue(ctx)
}

func (co *coordinator) releaseDue(ctx context.Context) {
	if co.failure != nil {
		return
	}
	var again []int
	all, at := true, -1
	for i, w := range co.waiting {
		if co.ended[i] {
			continue
		}
		switch {
		case w >= 0 && w <= co.released:
			again = append(again, i)
		case w < 0 || (at >= 0 && w != at):
			all = false
		default:
			at = w
		}
	}
	for _, i := range again {
		co.releaseOn(ctx, []int{i}, co.waiting[i], "")
	}
	if !all || at < 0 || len(again) > 0 {
		return
	}
	var targets []int
	for i := range co.waiting {
		if !co.ended[i] {
			targets = append(targets, i)
		}
	}
	co.released = at
	co.releaseOn(ctx, targets, at, "all")
}

// releaseOn writes barrier index's release on the hosts at once (called
// with mu held; the writes run without it).
func (co *coordinator) releaseOn(ctx context.Context, targets []int, index int, all string) {
	dirs := make([]string, len(targets))
	for k, i := range targets {
		dirs[k] = co.dirs[i]
		co.waiting[i] = -1 // released: no second release for the same sighting
	}
	co.stops.Add(1)
	go func() {
		defer co.stops.Done()
		start := time.Now()
		var mu sync.Mutex
		var first, last time.Duration = -1, 0
		var wg sync.WaitGroup
		for k, i := range targets {
			wg.Go(func() {
				err := co.controls[i].Release(ctx, dirs[k], index)
				at := time.Since(start)
				if err != nil {
					co.fail(ctx, i, false, err, fmt.Sprintf("host %s: releasing barrier %d failed: %v", co.hosts[i].Name, index, err))
					return
				}
				mu.Lock()
				if first < 0 || at < first {
					first = at
				}
				last = max(last, at)
				mu.Unlock()
			})
		}
		wg.Wait()
		if all != "" && co.mh.Released != nil && first >= 0 {
			co.mh.Released(ctx, wire.Barrier{Index: index, State: wire.BarrierReleased}, len(targets), last-first)
		}
	}()
}

// hostEnded notes a host's Execute ending: one that failed (or whose probe
// ended other than done) stops the run.
func (co *coordinator) hostEnded(ctx context.Context, i int, out Outcome, err error) {
	co.mu.Lock()
	co.ended[i] = true
	started := co.released >= 0
	co.mu.Unlock()
	name := co.hosts[i].Name
	switch {
	case ctx.Err() != nil:
		return
	case err != nil && co.fenced != nil && co.fenced(err):
		co.lose(err) // another worker has the run: follow no more, stop nothing
	case err != nil:
		what := "failed"
		if !started {
			what = "could not start"
		}
		co.fail(ctx, i, !started, err, fmt.Sprintf("host %s %s: %v", name, what, err))
	case out.Aborted != nil:
		co.fail(ctx, i, false, nil, fmt.Sprintf("host %s: %s", name, abortCause(out.Aborted)))
	case out.Crashed:
		co.fail(ctx, i, !started, nil, fmt.Sprintf("host %s: the probe stopped without writing a status (crashed or killed on the host)", name))
	case out.Status == nil:
		co.fail(ctx, i, !started, nil, fmt.Sprintf("host %s: the probe's status is missing", name))
	case out.Status.State != wire.StateDone:
		co.fail(ctx, i, !started, nil, fmt.Sprintf("host %s: the probe ended %s: %s", name, out.Status.State, out.Status.Reason))
	default:
		co.mu.Lock()
		co.releaseDue(ctx) // the others may wait for no one now
		co.mu.Unlock()
	}
}

// fail records the run's first failure and stops every other host's
// probe, so that nothing of the run goes on anywhere.
func (co *coordinator) fail(ctx context.Context, i int, beforeStart bool, err error, reason string) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.failure != nil {
		return
	}
	co.failure = &HostFailure{Ordinal: i, Name: co.hosts[i].Name, BeforeStart: beforeStart, Err: err, Reason: reason}
	co.note(ctx, "error", reason+": stopping the run on every host")
	for k := range co.hosts {
		// The failed host too when its probe may run on (it could not be
		// followed); not a host whose probe ended.
		if (k == i && err == nil) || (k != i && co.ended[k]) {
			continue
		}
		dir := co.dirs[k]
		if dir == "" {
			continue // nothing may run there yet; its Execute ends with the run
		}
		co.stops.Add(1)
		go func() {
			defer co.stops.Done()
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			if _, err := co.controls[k].Stop(stopCtx, dir); err != nil {
				co.note(ctx, "error", fmt.Sprintf("host %s: stopping the probe failed: %v", co.hosts[k].Name, err))
			}
		}()
	}
}

// Control is a second connection to a host of a multi-host run, beside
// the one following its probe: barrier releases and stops go through it,
// so that they never wait behind a follow or a reconnect.
type Control struct {
	c    Config
	mu   sync.Mutex
	host *sshrun.Host
}

// Control makes a host's control connection (connected on first use).
func (c Config) Control(target sshrun.Target) *Control {
	return &Control{c: c, host: &sshrun.Host{Target: target, Options: c.Options, Backoff: c.Backoff}}
}

// Connect dials the host, with the probe at probePath ("": look it up).
func (k *Control) Connect(ctx context.Context, probePath string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if probePath != "" {
		k.host.ProbePath = probePath
	}
	_, err := k.client(ctx)
	return err
}

// client returns the connection with the probe known (mu held).
func (k *Control) client(ctx context.Context) (*sshrun.Client, error) {
	client, err := k.host.Client(ctx)
	if err != nil {
		return nil, classify(err)
	}
	if k.host.ProbePath == "" {
		p, err := client.EnsureProbe(ctx, k.c.Probe)
		if err != nil {
			return nil, classify(err)
		}
		k.host.ProbePath = p.Path
	} else {
		client.UseProbe(k.host.ProbePath)
	}
	return client, nil
}

// Release releases barrier index of the run in dir.
func (k *Control) Release(ctx context.Context, dir string, index int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	client, err := k.client(ctx)
	if err != nil {
		return err
	}
	return client.Release(ctx, dir, index)
}

// Stop stops the run's probe in dir and confirms nothing of it is left.
func (k *Control) Stop(ctx context.Context, dir string) (sshrun.Stopped, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.c.stopOn(ctx, k.host, dir)
}

// Close closes the connection.
func (k *Control) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.host.Close()
}
