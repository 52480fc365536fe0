package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/wire"
)

// runTimeoutError is the cause of the run's context when its limit passes.
type runTimeoutError struct{ limit time.Duration }

func (e *runTimeoutError) Error() string {
	return fmt.Sprintf("the run exceeded its time limit of %s", acceptance.Duration(e.limit))
}

// stepTimeoutError is the cause of a step's context when its limit passes.
type stepTimeoutError struct {
	name  string
	limit acceptance.Duration
}

func (e *stepTimeoutError) Error() string {
	return fmt.Sprintf("step %s exceeded its time limit of %s", e.name, e.limit)
}

// errCancelled is reported when a signal stopped the run.
var errCancelled = errors.New("the probe was asked to stop (SIGTERM or SIGINT)")

// runner is one `probe run`.
type runner struct {
	dir     string
	plan    *wire.Plan
	ev      *eventLog
	started time.Time
	reps    int
	interim time.Duration
	est     []time.Duration // per step and repetition
	total   time.Duration
	during  map[int][]int // step index → fault steps that overlap it
	// hostRunner reads the host's files and tools (tests give it a fake
	// root and tools); nil is the real host.
	hostRunner *facts.Runner
	// lookPath finds the programs the run starts: fio, gdsio, the vendor
	// tools, a command step's program (exec.LookPath; tests put fake
	// vendor tools in front of PATH with Host).
	lookPath func(string) (string, error)

	// nextBarrier numbers the barriers passed (Plan.Sync).
	nextBarrier int

	mu        sync.Mutex
	doneEst   time.Duration
	curStep   int
	curRep    int
	curLevel  string
	stepStart time.Time
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("run", stderr)
	dirFlag := fl.String("dir", "", "run folder")
	if err := parseFlags(fl, args); err != nil {
		return usageError(stderr, err)
	}
	dir, err := absDir(*dirFlag)
	if err != nil {
		return usageError(stderr, err)
	}
	return runIn(ctx, dir, Host{}, stderr)
}

// Host is what a run finds on its host beyond its folder. The zero value
// is the real host; tests use it to put recorded vendor tools in front of
// PATH without changing the test process's environment.
type Host struct {
	// LookPath finds the programs the run starts (exec.LookPath when nil).
	LookPath func(string) (string, error)
}

// RunIn runs the plan in dir as `accord probe run --dir DIR` does, on
// host, and returns the command's exit code.
func RunIn(ctx context.Context, dir string, host Host, stderr io.Writer) int {
	dir, err := absDir(dir)
	if err != nil {
		return usageError(stderr, err)
	}
	return runIn(ctx, dir, host, stderr)
}

func runIn(ctx context.Context, dir string, host Host, stderr io.Writer) int {
	if fi, err := os.Stat(filepath.Join(dir, wire.EventsFile)); err == nil && fi.Size() > 0 {
		return fail(stderr, ExitLaunched, "run folder %s was already used by a run (%s is not empty); a measurement is never started twice", dir, wire.EventsFile)
	}
	if _, err := os.Stat(filepath.Join(dir, wire.StatusFile)); err == nil {
		return fail(stderr, ExitLaunched, "run folder %s already has a %s", dir, wire.StatusFile)
	}
	ev, err := openEventLog(dir)
	if err != nil {
		return fail(stderr, ExitError, "%v", err)
	}
	started := time.Now()
	// Other Accord runs measuring on this host meanwhile would contaminate
	// this one's numbers (and this one theirs): look for them until the end.
	neighbours := startNeighbourWatch(dir, ev)
	plan, err := loadPlan(dir)
	if err != nil {
		ev.log("error", "%v", err)
		neighbours.stop()
		return finishRun(ev, dir, started, wire.StateFailed, err.Error(), stderr)
	}
	r := newRunner(dir, plan, ev, started)
	if host.LookPath != nil {
		r.lookPath = host.LookPath
	}
	state, reason := r.run(ctx)
	neighbours.stop()
	return finishRun(ev, dir, started, state, reason, stderr)
}

func newRunner(dir string, plan *wire.Plan, ev *eventLog, started time.Time) *runner {
	r := &runner{dir: dir, plan: plan, ev: ev, started: started, reps: repetitions(plan), interim: interimEvery(plan), during: map[int][]int{},
		lookPath: exec.LookPath}
	index := map[string]int{}
	for i, s := range plan.Profile.Steps {
		index[s.Name] = i
	}
	for i, s := range plan.Profile.Steps {
		e := max(estimateStep(s, plan.Profile.Warmup.D()), time.Second)
		if s.Kind == acceptance.StepFault && s.Fault.During != "" {
			if r.runs(i) {
				r.during[index[s.Fault.During]] = append(r.during[index[s.Fault.During]], i)
			}
			e = 0
		}
		r.est = append(r.est, e)
		r.total += e
	}
	r.total *= time.Duration(r.reps)
	return r
}

// exitCodeOf maps an end state to the exit code of `probe run`.
func exitCodeOf(state string) int {
	switch state {
	case wire.StateDone:
		return ExitOK
	case wire.StateTimeout:
		return ExitTimeout
	case wire.StateCancelled:
		return ExitCancelled
	default:
		return ExitFailed
	}
}

// finishRun appends the done event and then writes StatusFile atomically:
// a follower that sees StatusFile and reads to the end has the done event.
func finishRun(ev *eventLog, dir string, started time.Time, state, reason string, stderr io.Writer) int {
	st := wire.Status{State: state, ExitCode: exitCodeOf(state), Reason: reason,
		StartedAt: started.Format(time.RFC3339Nano), FinishedAt: nowRFC3339()}
	msg := "run " + state
	if reason != "" {
		msg += ": " + reason
	}
	ev.emit(wire.Event{Type: wire.EventDone, Message: msg, Status: &st})
	evErr := ev.close()
	if err := writeJSONAtomic(filepath.Join(dir, wire.StatusFile), st); err != nil {
		return fail(stderr, ExitError, "write status: %v", err)
	}
	if evErr != nil {
		return fail(stderr, ExitError, "%v", evErr)
	}
	fmt.Fprintf(stderr, "accord probe: %s\n", msg)
	return st.ExitCode
}

func (r *runner) run(ctx context.Context) (state, reason string) {
	limit := runTimeout(r.plan)
	runCtx, cancel := context.WithTimeoutCause(ctx, limit, &runTimeoutError{limit})
	defer cancel()
	r.ev.log("info", "probe started: run %d attempt %d, profile %q, %d steps × %d repetitions, time limit %s, pid %d",
		r.plan.RunID, r.plan.Attempt, r.plan.Profile.Name, len(r.plan.Profile.Steps), r.reps, acceptance.Duration(limit), os.Getpid())
	if r.plan.Role != "" {
		r.ev.log("info", "host %s plays role %s of a multi-host run", r.plan.Host, r.plan.Role)
	}
	r.takeFacts(runCtx)
	wear := startDriveWear(runCtx, r.host(), r.dir)
	err := r.execute(runCtx, func(rep int) { wear.afterRepetition(runCtx, rep) })
	if msg, werr := wear.finish(); werr != nil {
		r.ev.log("warn", "%v", werr)
	} else {
		r.ev.log("info", "%s", msg)
	}
	var rt *runTimeoutError
	switch {
	case ctx.Err() != nil:
		return wire.StateCancelled, errCancelled.Error()
	case errors.As(context.Cause(runCtx), &rt):
		return wire.StateTimeout, rt.Error()
	case err != nil:
		return wire.StateFailed, err.Error()
	}
	return wire.StateDone, ""
}

// host is the runner of the host's files and tools.
func (r *runner) host() *facts.Runner {
	if r.hostRunner != nil {
		return r.hostRunner
	}
	return &facts.Runner{}
}

func (r *runner) takeFacts(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f, err := facts.Collect(ctx, facts.Options{Runner: &facts.Runner{LookPath: r.lookPath}})
	if err != nil {
		r.ev.log("warn", "host facts: %v", err)
		return
	}
	if err := writeJSONAtomic(filepath.Join(r.dir, wire.FactsFile), f); err != nil {
		r.ev.log("warn", "host facts: write %s: %v", wire.FactsFile, err)
		return
	}
	msg := "host facts taken"
	if absent := f.Absent(); len(absent) > 0 {
		msg += "; absent: " + strings.Join(absent, ", ")
	}
	r.ev.log("info", "%s", msg)
}

// execute runs every repetition of the steps, phase by phase; afterRep
// is called when a repetition ends, however it ended.
func (r *runner) execute(ctx context.Context, afterRep func(rep int)) error {
	for rep := 1; rep <= r.reps; rep++ {
		if err := r.repetition(ctx, rep); err != nil {
			afterRep(rep)
			return err
		}
		afterRep(rep)
	}
	return nil
}

// repetition runs the steps once, in order, phase by phase (a step on
// its own, or a parallel group together).
func (r *runner) repetition(ctx context.Context, rep int) error {
	for _, ph := range r.plan.Profile.Phases() {
		if ctx.Err() != nil {
			return causeOf(ctx, ctx.Err())
		}
		if err := r.phase(ctx, ph, rep); err != nil {
			return err
		}
	}
	return nil
}

// alone reports whether step i is a phase of its own (no parallel group).
func (r *runner) alone(i int) bool {
	for _, ph := range r.plan.Profile.Phases() {
		if slices.Contains(ph.Steps, i) {
			return len(ph.Steps) == 1
		}
	}
	return false
}

// runs reports whether this host runs step i: every step in a one-host
// run, its role's steps in a multi-host one.
func (r *runner) runs(i int) bool {
	if r.plan.Role == "" {
		return true
	}
	role, ok := r.plan.Profile.Role(r.plan.Role)
	return ok && role.RunsStep(r.plan.Profile.Steps[i].Name)
}

// phase runs one phase of a repetition: after its barrier (a multi-host
// run), the phase's steps this host runs, a parallel group's at the same
// time. An inference step alone in its phase waits at a barrier before
// each load level instead, so that the hosts load the server level by
// level together.
func (r *runner) phase(ctx context.Context, ph acceptance.Phase, rep int) error {
	var mine []int
	for _, i := range ph.Steps {
		if r.runs(i) {
			mine = append(mine, i)
		} else {
			defer r.finishUnit(i) // its time passes here too, waiting
		}
	}
	first := r.plan.Profile.Steps[ph.Steps[0]]
	if r.plan.Sync && len(ph.Steps) == 1 && first.Kind == acceptance.StepInference {
		if len(mine) == 1 {
			return r.step(ctx, mine[0], rep) // runInference waits at each level's barrier
		}
		levels, err := inferenceLevels(first.Inference)
		if err != nil {
			return stepError(ctx, first.Name, err)
		}
		for _, lv := range levels {
			if err := r.barrier(ctx, fmt.Sprintf("repetition %d, step %s, level %s", rep, first.Name, lv.Label)); err != nil {
				return err
			}
		}
		return nil
	}
	if r.plan.Sync {
		label := fmt.Sprintf("repetition %d, step %s", rep, first.Name)
		if ph.Group != "" {
			label = fmt.Sprintf("repetition %d, group %s", rep, ph.Group)
		}
		if err := r.barrier(ctx, label); err != nil {
			return err
		}
	}
	switch len(mine) {
	case 0:
		return nil
	case 1:
		return r.step(ctx, mine[0], rep)
	}
	// A parallel group: its steps start together, and the first to fail
	// stops the others.
	gctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	errs := make([]error, len(mine))
	var wg sync.WaitGroup
	for k, i := range mine {
		wg.Go(func() {
			if err := r.step(gctx, i, rep); err != nil {
				errs[k] = err
				stop(err)
			}
		})
	}
	wg.Wait()
	if cause := context.Cause(gctx); cause != nil && !errors.Is(cause, context.Canceled) && ctx.Err() == nil {
		return cause
	}
	return errors.Join(errs...)
}

// causeOf explains why a context-bound operation failed: the step's or the
// run's time limit, a fault that could not be applied, a signal, or the
// operation's own error.
func causeOf(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) {
		return errCancelled
	}
	if errors.Is(cause, context.DeadlineExceeded) {
		return err
	}
	return cause
}

// faultError is the cause of a step's context when a fault overlapping it
// could not be applied.
type faultError struct {
	name string
	err  error
}

func (e *faultError) Error() string { return fmt.Sprintf("fault %s: %v", e.name, e.err) }

// stepError names the step in an error, unless the error is one of the
// run's own reasons (a time limit, a fault, a signal), which stand alone.
func stepError(ctx context.Context, name string, err error) error {
	err = causeOf(ctx, err)
	if err == nil {
		return nil
	}
	var st *stepTimeoutError
	var rt *runTimeoutError
	var fe *faultError
	if errors.As(err, &st) || errors.As(err, &rt) || errors.As(err, &fe) || errors.Is(err, errCancelled) {
		return err
	}
	return fmt.Errorf("step %s: %w", name, err)
}

func (r *runner) setPosition(step, rep int, level string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if level == "" || step != r.curStep || rep != r.curRep {
		r.stepStart = time.Now()
	}
	r.curStep, r.curRep, r.curLevel = step, rep, level
}

func (r *runner) finishUnit(step int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.doneEst += r.est[step]
}

func (r *runner) progress() *wire.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.plan.Profile.Steps[r.curStep]
	elapsed := time.Since(r.started)
	in := min(time.Since(r.stepStart), r.est[r.curStep])
	p := &wire.Progress{
		Step: r.curStep + 1, Steps: len(r.plan.Profile.Steps), StepName: s.Name,
		Repetition: r.curRep, Repetitions: r.reps, Level: r.curLevel,
		ElapsedSec: elapsed.Seconds(),
	}
	if r.total > 0 {
		p.Fraction = min(max(float64(r.doneEst+in)/float64(r.total), 0), 1)
		p.EstimateSec = (elapsed + max(r.total-r.doneEst-in, 0)).Seconds()
	}
	return p
}

// step runs one repetition of one step, with its time limit, its progress
// ticker and the faults that overlap it.
func (r *runner) step(ctx context.Context, i, rep int) error {
	s := r.plan.Profile.Steps[i]
	rel := filepath.Join(wire.OutputDir, stepDirName(i, s.Name), fmt.Sprintf("rep-%d", rep))
	if err := os.MkdirAll(filepath.Join(r.dir, rel), 0o755); err != nil {
		return fmt.Errorf("step %s: %w", s.Name, err)
	}
	r.setPosition(i, rep, "")
	// Its own step, even when a parallel group's other steps move the
	// position meanwhile.
	at := r.progress()
	at.Step, at.StepName = i+1, s.Name
	r.ev.emit(wire.Event{Type: wire.EventStepStart, Progress: at,
		Message: fmt.Sprintf("step %d/%d %s (%s), repetition %d/%d", i+1, len(r.plan.Profile.Steps), s.Name, s.Kind, rep, r.reps)})

	stepCtx, failStep := context.WithCancelCause(ctx)
	defer failStep(nil)
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		stepCtx, cancel = context.WithTimeoutCause(stepCtx, s.Timeout.D(), &stepTimeoutError{s.Name, s.Timeout})
		defer cancel()
	}

	tickDone := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		t := time.NewTicker(r.interim)
		defer t.Stop()
		for {
			select {
			case <-tickDone:
				return
			case <-t.C:
				r.ev.emit(wire.Event{Type: wire.EventProgress, Progress: r.progress()})
			}
		}
	})

	faultCtx, endFaults := context.WithCancel(stepCtx)
	faultErrs := make(chan error, len(r.during[i]))
	for _, fi := range r.during[i] {
		bg.Go(func() { faultErrs <- r.duringFault(stepCtx, faultCtx, failStep, fi, rep) })
	}

	err := r.runKind(stepCtx, i, s, rep, rel)
	endFaults()
	close(tickDone)
	bg.Wait()
	close(faultErrs)
	for ferr := range faultErrs {
		if ferr != nil && err == nil {
			err = ferr
		}
	}
	r.finishUnit(i)
	if err != nil {
		return err
	}
	return nil
}

func (r *runner) runKind(ctx context.Context, i int, s acceptance.StepSpec, rep int, rel string) error {
	switch s.Kind {
	case acceptance.StepFio:
		return r.runFio(ctx, i, s, rep, rel)
	case acceptance.StepInference:
		return r.runInference(ctx, i, s, rep, rel)
	case acceptance.StepCommand:
		return r.runCommand(ctx, i, s, rep, rel)
	case acceptance.StepDropCaches:
		return r.simple(ctx, i, s, rep, rel, dropCaches)
	case acceptance.StepPause:
		return r.simple(ctx, i, s, rep, rel, func(ctx context.Context) error { return pause(ctx, s.Pause.Duration.D()) })
	case acceptance.StepFault:
		return r.runFault(ctx, i, s, rep, rel)
	case acceptance.StepGPUPath:
		return r.runGPUPath(ctx, i, s, rep, rel)
	}
	return fmt.Errorf("step %s: unknown kind %q", s.Name, s.Kind)
}

func (r *runner) newResult(i int, s acceptance.StepSpec, rep int, level, rel string) *wire.StepResult {
	return &wire.StepResult{Step: s.Name, Kind: s.Kind, Index: i, Repetition: rep, Level: level,
		Dir: filepath.ToSlash(rel), Format: "none", StartedAt: nowRFC3339()}
}

// emitResult lists the folder's files (main output first), writes
// result.json beside them and appends the step_result event.
func (r *runner) emitResult(res *wire.StepResult, mainFile string, err error) {
	res.EndedAt = nowRFC3339()
	if err != nil {
		res.Error = err.Error()
	}
	dir := filepath.Join(r.dir, filepath.FromSlash(res.Dir))
	var files []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != wire.StepResultFile && !strings.HasPrefix(e.Name(), ".") {
			files = append(files, e.Name())
		}
	}
	files = append(files, wire.StepResultFile)
	sort.SliceStable(files, func(a, b int) bool {
		if (files[a] == mainFile) != (files[b] == mainFile) {
			return files[a] == mainFile
		}
		return files[a] < files[b]
	})
	res.Files = res.Files[:0]
	for _, f := range files {
		res.Files = append(res.Files, res.Dir+"/"+f)
	}
	if werr := writeJSONAtomic(filepath.Join(dir, wire.StepResultFile), res); werr != nil {
		r.ev.log("error", "step %s: write %s: %v", res.Step, wire.StepResultFile, werr)
	}
	r.ev.emit(wire.Event{Type: wire.EventStepResult, Result: res})
}

// emitInterim sends an interim event, adding the system metrics the
// server's stop-loss rules watch.
func (r *runner) emitInterim(in wire.Interim, tel *telemetry) {
	if sys := tel.takeWindow(r.plan.StopLossMetrics); len(sys) > 0 {
		// A copy: the caller (the load generator) may reuse its map.
		merged := make(map[string]wire.InterimStats, len(in.Metrics)+len(sys))
		for k, v := range in.Metrics {
			merged[k] = v
		}
		for k, v := range sys {
			merged[k] = v
		}
		in.Metrics = merged
	}
	if len(in.Metrics) == 0 {
		return
	}
	r.ev.emit(wire.Event{Type: wire.EventInterim, Interim: &in})
}

// simple runs a step that has no output of its own.
func (r *runner) simple(ctx context.Context, i int, s acceptance.StepSpec, rep int, rel string, fn func(context.Context) error) error {
	res := r.newResult(i, s, rep, "", rel)
	err := stepError(ctx, s.Name, fn(ctx))
	r.emitResult(res, "", err)
	return err
}
