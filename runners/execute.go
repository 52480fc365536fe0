package runners

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
)

// Config is how runs reach hosts, the same for every run.
type Config struct {
	Options sshrun.Options
	// Backoff governs reconnects: before the launch (then the run may still
	// be retried whole) and while following (the measurement goes on, the
	// runner resumes from the offset).
	Backoff sshrun.Backoff
	Probe   sshrun.ProbeSource
	Limits  sshrun.Limits
	// FlushEvery bounds how long events wait before they are persisted.
	FlushEvery time.Duration
	// StopGrace is the time between SIGTERM and SIGKILL when stopping.
	StopGrace time.Duration
}

// RunTarget is one run on one host, with what is already known about it
// when a worker resumes it.
type RunTarget struct {
	Host     sshrun.Target
	RunID    int64
	Attempt  int // run folder attempt; the measurement is never started twice in one folder
	Plan     wire.Plan
	Launched bool   // the probe was launched already (by this or an earlier worker)
	Offset   int64  // events already persisted, as a byte offset
	Probe    string // the probe's path on the host from an earlier worker, if known
	// DirSuffix tells the run folders of a multi-host run's hosts apart
	// (BASE/runs/<run>-<attempt>-<suffix>), so that hosts sharing a file
	// system never share a folder.
	DirSuffix string
	// Abort is the cause of an abort an earlier worker asked for (and
	// recorded) but may not have carried out: the probe is then stopped,
	// its remaining events stored and its folder pulled, not followed.
	Abort string
}

// Hooks persist what happens. Each may return an error to stop the run;
// the error is returned by Execute (a stale lease returns the store's
// fencing error, which the worker recognises).
type Hooks struct {
	// State reports preparing, running and collecting, with what is being
	// done (a reason for every step: it is what the run's page says).
	State func(ctx context.Context, state, reason string) error
	// Launching is called before anything is sent that could start the
	// probe in dir: from its return on, the probe may be running there
	// (the answer of a launch can be lost), so it must record that durably,
	// or fail to stop the run.
	Launching func(ctx context.Context, dir string) error
	// Launched is called once the probe runs detached in dir (also when an
	// earlier worker launched it), before any event is read.
	Launched func(ctx context.Context, dir, probePath string) error
	// ProbeEnded is called once the probe is known to be gone from the
	// host: it wrote its status, its processes are gone, or a stop
	// confirmed that nothing of the run is left.
	ProbeEnded func(ctx context.Context) error
	// Events persists a batch of raw event lines and the byte offset after
	// them. Returning ErrAbort (wrapped), once the batch is stored, stops
	// the measurement early; the events the probe writes until it stops
	// are then passed on as well (and must not abort again).
	Events func(ctx context.Context, lines [][]byte, offset int64) error
	// Note adds a line of the server's own to the run's log.
	Note func(ctx context.Context, level, message string)
}

// ErrAbort, returned (wrapped) by Hooks.Events, stops the probe on the host
// and ends Execute with Outcome.Aborted set: the stop-loss check uses it.
var ErrAbort = errors.New("runners: run aborted")

// Outcome is how a run ended on the host.
type Outcome struct {
	Dir        string
	Status     *wire.Status // the probe's final status (nil when it crashed)
	Crashed    bool         // the probe's process group vanished without a status
	Aborted    error        // set when Events asked to stop (the cause)
	Collection *sshrun.Collection
	Reconnects int
}

// PermanentError marks a failure that retrying cannot fix (a changed host
// key, refused authentication, a missing probe binary): the run fails with
// its message.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Execute drives a run on its host: connect (retrying connection failures
// before the launch), upload the probe, write the plan, launch it detached
// unless it runs already, follow its events from the persisted offset
// across dropped connections, and pull the run folder. Collection temp
// files belong to the caller (Outcome.Collection.Remove).
func (c Config) Execute(ctx context.Context, rt RunTarget, h Hooks) (Outcome, error) {
	host := &sshrun.Host{Target: rt.Host, Options: c.Options, Backoff: c.Backoff, ProbePath: rt.Probe}
	defer host.Close()
	out := Outcome{}
	note := func(level, msg string) {
		if h.Note != nil {
			h.Note(ctx, level, msg)
		}
	}

	// Where the run stands while connecting: a launched run keeps running
	// (its probe measures on), any other is being prepared.
	phase := "preparing"
	if rt.Launched {
		phase = "running"
	}
	connecting := "connecting to the host"
	switch {
	case rt.Abort != "":
		connecting = "reconnecting to the host to stop the probe: " + rt.Abort
	case rt.Launched:
		connecting = "reconnecting to the host to follow the probe"
	}
	if err := h.State(ctx, phase, connecting); err != nil {
		return out, err
	}
	client, err := host.Client(ctx)
	if err != nil {
		return out, classify(err)
	}
	if err := h.State(ctx, phase, "checking the probe binary on the host"); err != nil {
		return out, err
	}
	probe, err := client.EnsureProbe(ctx, c.Probe)
	if err != nil {
		return out, classify(err)
	}
	host.ProbePath = probe.Path
	if probe.Uploaded {
		note("info", fmt.Sprintf("uploaded the probe (%s, %d bytes, sha256 %.12s…)", probe.Arch, probe.BytesSent, probe.SHA256))
	}
	out.Dir = client.RunDir(rt.RunID, max(rt.Attempt, 1))
	if rt.DirSuffix != "" {
		out.Dir += "-" + rt.DirSuffix
	}

	// From here on the probe may start: say so durably first.
	if err := h.Launching(ctx, out.Dir); err != nil {
		return out, err
	}
	if rt.Abort != "" {
		// Never launched here: a stop claims a folder no probe started in.
		return c.abort(ctx, host, out, fmt.Errorf("%w: %s", ErrAbort, rt.Abort), rt.Offset, h)
	}
	if !rt.Launched {
		if err := h.State(ctx, "preparing", "uploading the plan"); err != nil {
			return out, err
		}
		plan, err := json.Marshal(rt.Plan)
		if err != nil {
			return out, &PermanentError{fmt.Errorf("runners: encode plan: %w", err)}
		}
		if err := client.PrepareRun(ctx, out.Dir, plan); err != nil {
			return out, classify(err)
		}
		if err := h.State(ctx, "preparing", "launching the probe"); err != nil {
			return out, err
		}
	}
	launched, err := client.Launch(ctx, out.Dir)
	if err != nil {
		return out, classify(err)
	}
	if launched.Already && !rt.Launched {
		note("warn", "the probe was running already in "+out.Dir+": following it, not starting it again")
	}
	if err := h.Launched(ctx, out.Dir, probe.Path); err != nil {
		return out, err
	}
	if err := h.State(ctx, "running", "the probe is measuring on the host"); err != nil {
		return out, err
	}

	// Follow, persisting events with the offset after them. A persister
	// goroutine takes whatever lines have arrived, so that a quiet stream is
	// stored line by line at once and a burst (catching up after a
	// reconnect) in batches.
	p := newPersister(ctx, rt.Offset, h.Events)
	res, ferr := host.Follow(ctx, out.Dir, rt.Offset, p.add)
	out.Reconnects = res.Reconnects
	if err := p.close(); err != nil && (ferr == nil || errors.Is(ferr, errPersist)) {
		ferr = err
	}
	if ferr != nil {
		if errors.Is(ferr, ErrAbort) {
			return c.abort(ctx, host, out, ferr, p.stored, h)
		}
		return out, classify(ferr)
	}
	if res.Outcome == sshrun.ProbeCrashed {
		out.Crashed = true
		note("error", "the probe's processes are gone and it wrote no status: it crashed or was killed on the host")
	}
	return c.collect(ctx, host, out, h)
}

// abort stops the probe for cause (ErrAbort wrapped), stores the events
// it wrote from offset on until it stopped (the step's result, its
// "done"), so that the stored log is the probe's whole log, and pulls the
// run folder.
func (c Config) abort(ctx context.Context, host *sshrun.Host, out Outcome, cause error, offset int64, h Hooks) (Outcome, error) {
	out.Aborted = cause
	if err := h.State(ctx, "running", "stopping the probe: "+abortCause(cause)); err != nil {
		return out, err
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if _, err := c.stopOn(stopCtx, host, out.Dir); err != nil {
		return out, fmt.Errorf("runners: abort: stop the probe: %w", err)
	}
	if err := c.drain(ctx, host, out.Dir, offset, h); err != nil && h.Note != nil {
		h.Note(ctx, "warn", "the probe's events after the abort could not all be stored: "+err.Error())
	}
	return c.collect(ctx, host, out, h)
}

// drain stores the events of a stopped probe from offset to the end of its
// stream (the tail ends at once: the probe wrote its status).
func (c Config) drain(ctx context.Context, host *sshrun.Host, dir string, offset int64, h Hooks) error {
	p := newPersister(ctx, offset, h.Events)
	_, ferr := host.Follow(ctx, dir, offset, p.add)
	if err := p.close(); err != nil && !errors.Is(err, ErrAbort) {
		return err
	}
	if ferr != nil && !errors.Is(ferr, errPersist) {
		return ferr
	}
	return nil
}

// abortCause is the reason Events gave for an abort, without the wrapping.
func abortCause(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ErrAbort.Error()+": "); i >= 0 {
		return msg[i+len(ErrAbort.Error())+2:]
	}
	return msg
}

// collect runs once the probe is gone from the host: it says so, then
// pulls the run folder.
func (c Config) collect(ctx context.Context, host *sshrun.Host, out Outcome, h Hooks) (Outcome, error) {
	if err := h.ProbeEnded(ctx); err != nil {
		return out, err
	}
	if err := h.State(ctx, "collecting", "pulling the run folder"); err != nil {
		return out, err
	}
	client, err := host.Client(ctx)
	if err != nil {
		return out, classify(err)
	}
	if !out.Crashed {
		st, err := client.Status(ctx, out.Dir)
		if err != nil {
			return out, classify(err)
		}
		out.Status = st.Status
	}
	coll, err := client.Collect(ctx, out.Dir, c.Limits)
	if err != nil {
		return out, classify(err)
	}
	out.Collection = coll
	return out, nil
}

// Stop ends a run's probe on its host over a fresh connection and confirms
// that nothing of the run is left.
func (c Config) Stop(ctx context.Context, target sshrun.Target, dir, probePath string) (sshrun.Stopped, error) {
	host := &sshrun.Host{Target: target, Options: c.Options, Backoff: c.Backoff, ProbePath: probePath}
	defer host.Close()
	return c.stopOn(ctx, host, dir)
}

func (c Config) stopOn(ctx context.Context, host *sshrun.Host, dir string) (sshrun.Stopped, error) {
	client, err := host.Client(ctx)
	if err != nil {
		return sshrun.Stopped{}, classify(err)
	}
	if host.ProbePath == "" {
		p, err := client.EnsureProbe(ctx, c.Probe)
		if err != nil {
			return sshrun.Stopped{}, classify(err)
		}
		host.ProbePath = p.Path
	} else {
		client.UseProbe(host.ProbePath)
	}
	grace := c.StopGrace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	return client.Stop(ctx, dir, grace)
}

// CheckResult is what a host check learnt.
type CheckResult struct {
	Facts json.RawMessage
	RTT   time.Duration
	Probe sshrun.Probe
}

// Check connects, makes sure the probe is there, and takes the host's
// facts and the round-trip time of a trivial command.
func (c Config) Check(ctx context.Context, target sshrun.Target) (CheckResult, error) {
	client, err := sshrun.Dial(ctx, target, c.Options)
	if err != nil {
		return CheckResult{}, classify(err)
	}
	defer client.Close()
	p, err := client.EnsureProbe(ctx, c.Probe)
	if err != nil {
		return CheckResult{}, classify(err)
	}
	f, err := client.Facts(ctx)
	if err != nil {
		return CheckResult{}, classify(err)
	}
	return CheckResult{Facts: f.JSON, RTT: f.RTT, Probe: p}, nil
}

// CheckEndpoint connects, makes sure the probe is there, and has it send
// one small request to an inference endpoint from the host.
func (c Config) CheckEndpoint(ctx context.Context, target sshrun.Target, endpoint, model, api string, timeout time.Duration) (wire.EndpointCheck, error) {
	client, err := sshrun.Dial(ctx, target, c.Options)
	if err != nil {
		return wire.EndpointCheck{}, classify(err)
	}
	defer client.Close()
	if _, err := client.EnsureProbe(ctx, c.Probe); err != nil {
		return wire.EndpointCheck{}, classify(err)
	}
	check, err := client.CheckEndpoint(ctx, endpoint, model, api, timeout)
	return check, classify(err)
}

// classify marks failures that no retry can fix.
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var perm *PermanentError
	if errors.As(err, &perm) {
		return err
	}
	if !sshrun.IsRetryable(err) {
		return &PermanentError{err}
	}
	return err
}

// errPersist marks that the persister refused a line because an earlier
// write failed; the write's own error is what Execute returns.
var errPersist = errors.New("runners: persisting events failed")

// persister stores followed lines in order, batching what is pending.
type persister struct {
	ch     chan pendingLine
	done   chan struct{}
	err    error // set by the goroutine before done closes
	failed chan struct{}
	offset int64 // after the last line queued
	// stored is the offset after the last batch stored (also by a write
	// that stored its batch and then asked to abort); read after close.
	stored int64
}

type pendingLine struct {
	line []byte
	end  int64 // byte offset after the line
}

func newPersister(ctx context.Context, offset int64, write func(context.Context, [][]byte, int64) error) *persister {
	p := &persister{ch: make(chan pendingLine, 1024), done: make(chan struct{}), failed: make(chan struct{}), offset: offset, stored: offset}
	go func() {
		defer close(p.done)
		var lines [][]byte
		for first := range p.ch {
			lines = append(lines[:0], first.line)
			end := first.end
		drain:
			for len(lines) < 500 {
				select {
				case more, ok := <-p.ch:
					if !ok {
						break drain
					}
					lines = append(lines, more.line)
					end = more.end
				default:
					break drain
				}
			}
			if p.err == nil {
				err := write(ctx, lines, end)
				if err == nil || errors.Is(err, ErrAbort) {
					p.stored = end // an abort comes after its batch was stored
				}
				if err != nil {
					p.err = err
					close(p.failed)
				}
			}
		}
	}()
	return p
}

// add queues a line (copied: the slice is only valid during the call).
func (p *persister) add(line []byte) error {
	p.offset += int64(len(line)) + 1
	select {
	case <-p.failed:
		return errPersist
	case p.ch <- pendingLine{line: append([]byte(nil), line...), end: p.offset}:
		return nil
	}
}

// close waits until every queued line is stored and returns the first
// write error.
func (p *persister) close() error {
	close(p.ch)
	<-p.done
	return p.err
}
