package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/loadgen"
	"github.com/accordlab/accord/runners/probe/promtext"
	"github.com/accordlab/accord/runners/probe/wire"
)

// childGrace is how long a child has between SIGTERM and SIGKILL when its
// step is stopped: long enough for fio to write its report.
const childGrace = 5 * time.Second

// fioStatusFile keeps fio's periodic status documents, one per line.
const fioStatusFile = "fio-status.jsonl"

func (r *runner) runFio(ctx context.Context, i int, s acceptance.StepSpec, rep int, rel string) error {
	res := r.newResult(i, s, rep, "", rel)
	res.Format = "fio-json"
	err := stepError(ctx, s.Name, r.fio(ctx, s, rep, filepath.Join(r.dir, rel)))
	r.emitResult(res, wire.FioOutputFile, err)
	return err
}

func (r *runner) fio(ctx context.Context, s acceptance.StepSpec, rep int, dir string) error {
	f := s.Fio
	if err := validateFio(f); err != nil {
		return err
	}
	fioPath, err := r.lookPath("fio")
	if err != nil {
		return errors.New("fio is not installed on this host")
	}
	target, err := r.prepareFioTarget(f)
	if err != nil {
		return err
	}
	checked := *f
	checked.Target = target.path // what was checked, symbolic links resolved
	f = &checked
	if err := os.WriteFile(filepath.Join(dir, wire.FioJobFile), []byte(fioJobFile(s.Name, f, r.plan.Profile.Warmup.D())), 0o644); err != nil {
		return err
	}
	tel, err := r.startTelemetry(ctx, dir, targetDevices(f.Target))
	if err != nil {
		return err
	}
	defer tel.stop()
	stderrF, err := os.Create(filepath.Join(dir, "fio.stderr.txt"))
	if err != nil {
		return err
	}
	defer stderrF.Close()
	statusSec := max(1, int(math.Round(r.interim.Seconds())))
	rawOut := filepath.Join(dir, wire.FioOutputFile)
	cmd := exec.CommandContext(ctx, fioPath, "--output-format=json+", "--output="+wire.FioOutputFile,
		fmt.Sprintf("--status-interval=%d", statusSec), wire.FioJobFile)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stderrF, stderrF
	commandCancel(cmd, childGrace)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start fio: %w", err)
	}
	stopFollow := make(chan struct{})
	followed := make(chan *fioStream, 1)
	go func() { followed <- r.followFio(rawOut, stopFollow, s.Name, rep, tel) }()
	waitErr := cmd.Wait()
	close(stopFollow)
	stream := <-followed
	if err := r.fioTargetDone(target); err != nil && waitErr == nil {
		return err
	}
	if splitErr := splitFioOutput(dir, stream); splitErr != nil && waitErr == nil {
		return splitErr
	}
	if ctx.Err() != nil {
		// Stopped (time limit, signal): fio may still exit 0 with a short report.
		return ctx.Err()
	}
	if waitErr != nil {
		return fmt.Errorf("fio failed: %v%s", waitErr, tailOf(filepath.Join(dir, "fio.stderr.txt")))
	}
	return fioJobErrors(stream)
}

// followFio reads fio's output file while fio writes it and turns each
// status document into an interim event.
func (r *runner) followFio(path string, stop <-chan struct{}, step string, rep int, tel *telemetry) *fioStream {
	stream := &fioStream{}
	var off int64
	var prev fioSnapshot // fio starts from zero
	handle := func(docs []json.RawMessage) {
		for _, doc := range docs {
			snap, err := parseFioSnapshot(doc)
			if err != nil {
				continue
			}
			// A window shorter than 0.2 s is the final report right after
			// the last status: too short to say anything.
			if metrics, window := fioInterim(prev, snap); window >= 0.2 {
				r.emitInterim(wire.Interim{Step: step, Repetition: rep, WindowSec: window, Metrics: metrics}, tel)
			}
			prev = snap
		}
	}
	read := func() {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		b, err := io.ReadAll(io.NewSectionReader(f, off, 1<<40))
		if err != nil {
			return
		}
		off += int64(len(b))
		handle(stream.feed(b))
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			read()
			handle(stream.finish())
			return stream
		case <-t.C:
			read()
		}
	}
}

// splitFioOutput leaves fio's final report alone in fio.json and keeps the
// status documents before it in fio-status.jsonl, one compact line each.
func splitFioOutput(dir string, stream *fioStream) error {
	if stream == nil || len(stream.docs) == 0 {
		return errors.New("fio wrote no JSON report")
	}
	last := stream.docs[len(stream.docs)-1]
	if len(stream.docs) > 1 {
		var lines bytes.Buffer
		for _, d := range stream.docs[:len(stream.docs)-1] {
			if err := json.Compact(&lines, d); err != nil {
				return fmt.Errorf("fio status: %w", err)
			}
			lines.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, fioStatusFile), lines.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return writeFileAtomic(filepath.Join(dir, wire.FioOutputFile), append(append([]byte(nil), last...), '\n'), 0o644)
}

// fioJobErrors reports jobs that fio says failed.
func fioJobErrors(stream *fioStream) error {
	if stream == nil || len(stream.docs) == 0 {
		return errors.New("fio wrote no JSON report")
	}
	var d struct {
		Jobs []struct {
			Name  string `json:"jobname"`
			Error int    `json:"error"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(stream.docs[len(stream.docs)-1], &d); err != nil {
		return fmt.Errorf("fio report: %w", err)
	}
	if len(d.Jobs) == 0 {
		return errors.New("fio report has no jobs")
	}
	for _, j := range d.Jobs {
		if j.Error != 0 {
			return fmt.Errorf("fio job %s ended with error %d (%s)", j.Name, j.Error, syscall.Errno(j.Error))
		}
	}
	return nil
}

// tailOf returns the last lines of a log file, for error messages.
func tailOf(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	s := strings.TrimSpace(string(b))
	lines := strings.Split(s, "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return ": " + truncate(strings.Join(lines, " | "), 500)
}

// commandOutputName is the file a command's standard output goes to when
// it is the result.
func commandOutputName(format string) string {
	if strings.HasSuffix(format, "-json") {
		return "output.json"
	}
	return "output.txt"
}

func (r *runner) runCommand(ctx context.Context, i int, s acceptance.StepSpec, rep int, rel string) error {
	res := r.newResult(i, s, rep, "", rel)
	c := s.Command
	res.Format = c.Format
	main := c.OutputFile
	if main == "" {
		main = commandOutputName(c.Format)
	}
	sum, err := r.command(ctx, s.Name, rep, c, filepath.Join(r.dir, rel), main)
	err = stepError(ctx, s.Name, err)
	res.Command = sum
	r.emitResult(res, filepath.ToSlash(main), err)
	return err
}

// command runs a command step's program and returns what the kernel
// accounted of it (nil when it did not run).
func (r *runner) command(ctx context.Context, step string, rep int, c *acceptance.CommandStep, dir, main string) (*wire.CommandSummary, error) {
	if err := validateCommand(c); err != nil {
		return nil, err
	}
	prog, err := r.lookPath(c.Program)
	if err != nil {
		return nil, fmt.Errorf("program %s was not found on this host", c.Program)
	}
	stdoutName := main
	if c.OutputFile != "" {
		stdoutName = "stdout.txt"
	}
	stdout, err := os.Create(filepath.Join(dir, stdoutName))
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(dir, "stderr.txt"))
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	tel, err := r.startTelemetry(ctx, dir, nvmeNamespaces())
	if err != nil {
		return nil, err
	}
	defer tel.stop()
	cmd := exec.CommandContext(ctx, prog, c.Args...)
	cmd.Dir = dir
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = stdout, stderr
	commandCancel(cmd, childGrace)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(r.interim)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r.emitInterim(wire.Interim{Step: step, Repetition: rep, WindowSec: r.interim.Seconds()}, tel)
			}
		}
	}()
	start := time.Now()
	err = cmd.Run()
	close(done)
	var sum *wire.CommandSummary
	if st := cmd.ProcessState; st != nil {
		// wait4's accounting: the program and the children it waited for.
		sum = &wire.CommandSummary{CPUSeconds: (st.UserTime() + st.SystemTime()).Seconds(), WallSeconds: time.Since(start).Seconds()}
	}
	if ctx.Err() != nil {
		return sum, ctx.Err()
	}
	if err != nil {
		return sum, fmt.Errorf("%s failed: %v%s", c.Program, err, tailOf(filepath.Join(dir, "stderr.txt")))
	}
	if c.OutputFile != "" {
		if _, err := os.Stat(filepath.Join(dir, c.OutputFile)); err != nil {
			return sum, fmt.Errorf("%s did not write its output file %s", c.Program, c.OutputFile)
		}
	}
	return sum, nil
}

// dropCaches writes dirty pages back and drops the page cache, dentries
// and inodes, so that the next step reads from storage.
func dropCaches(ctx context.Context) error {
	syscall.Sync()
	if err := ctx.Err(); err != nil {
		return err
	}
	err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o644)
	if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("drop-caches: writing /proc/sys/vm/drop_caches was refused (the probe must run as root with a writable /proc/sys): %w", err)
	}
	if err != nil {
		return fmt.Errorf("drop-caches: %w", err)
	}
	return nil
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// inferenceLevels are the load levels of an inference step, in order: its
// load sweep's, or, in a prefix-reuse sweep, its one load level at each
// share.
func inferenceLevels(s *acceptance.InferenceStep) ([]loadgen.Level, error) {
	shares := s.ReuseSweep()
	if len(shares) == 0 {
		return loadLevels(s)
	}
	if len(s.Load.Sweep) > 0 {
		return nil, errors.New("a step sweeps prefix reuse or its load, not both")
	}
	load, err := loadLevels(s)
	if err != nil {
		return nil, err
	}
	out := make([]loadgen.Level, len(shares))
	for i, v := range shares {
		if !(v >= 0 && v <= 1) {
			return nil, fmt.Errorf("reuse share %v must be between 0 and 1", v)
		}
		lv := load[0]
		lv.Label, lv.Reuse = acceptance.ReuseLevel(v), &shares[i]
		out[i] = lv
	}
	return out, nil
}

// loadLevels are the levels of an inference step's load.
func loadLevels(s *acceptance.InferenceStep) ([]loadgen.Level, error) {
	values := s.Load.Sweep
	switch s.Load.Mode {
	case "concurrency":
		if len(values) == 0 {
			values = []float64{float64(s.Load.Concurrency)}
		}
		var out []loadgen.Level
		for _, v := range values {
			if v < 1 || v > 100000 || v != math.Trunc(v) {
				return nil, fmt.Errorf("concurrency %v must be a whole number from 1 to 100000", v)
			}
			out = append(out, loadgen.Level{Concurrency: int(v), Label: acceptance.ConcurrencyLevel(int(v))})
		}
		return out, nil
	case "rate":
		if len(values) == 0 {
			values = []float64{s.Load.Rate}
		}
		var out []loadgen.Level
		for _, v := range values {
			if !(v > 0 && v <= 1e6) {
				return nil, fmt.Errorf("rate %v must be above 0 and at most 1000000 requests per second", v)
			}
			out = append(out, loadgen.Level{Rate: v, Label: acceptance.RateLevel(v)})
		}
		return out, nil
	}
	return nil, fmt.Errorf("load mode %q is not concurrency or rate", s.Load.Mode)
}

// lockedWriter serialises writes of request records from concurrent streams.
type lockedWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Flush()
}

func (r *runner) runInference(ctx context.Context, i int, s acceptance.StepSpec, rep int, rel string) error {
	levels, err := inferenceLevels(s.Inference)
	if err != nil {
		res := r.newResult(i, s, rep, "", rel)
		err = stepError(ctx, s.Name, err)
		r.emitResult(res, "", err)
		return err
	}
	// Alone in its phase in a multi-host run, the step's levels start on
	// every host together (the runner's phase waited for none).
	synced := r.plan.Sync && r.alone(i)
	for li, lv := range levels {
		if synced {
			if err := r.barrier(ctx, fmt.Sprintf("repetition %d, step %s, level %s", rep, s.Name, lv.Label)); err != nil {
				return err
			}
		}
		levelRel := filepath.Join(rel, lv.Label)
		if err := os.MkdirAll(filepath.Join(r.dir, levelRel), 0o755); err != nil {
			return stepError(ctx, s.Name, err)
		}
		r.setPosition(i, rep, lv.Label)
		r.ev.emit(wire.Event{Type: wire.EventProgress, Progress: r.progress(), Message: fmt.Sprintf("step %s level %s", s.Name, lv.Label)})
		res := r.newResult(i, s, rep, lv.Label, levelRel)
		res.Format = "probe-requests"
		// A reuse sweep's levels and repetitions send prompts of their own
		// (a salt each): the cache can then hit only what the share shares.
		var salt uint64
		if lv.Reuse != nil {
			salt = uint64(rep)<<16 | uint64(li+1)
		}
		err := stepError(ctx, s.Name, r.inferenceLevel(ctx, s, rep, lv, salt, filepath.Join(r.dir, levelRel), res))
		r.emitResult(res, wire.RequestsFile, err)
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) inferenceLevel(ctx context.Context, s acceptance.StepSpec, rep int, lv loadgen.Level, salt uint64, dir string, res *wire.StepResult) error {
	inf := s.Inference
	var before string
	if inf.MetricsURL != "" {
		before = r.scrapeTo(ctx, inf.MetricsURL, filepath.Join(dir, wire.PromBefore))
	}
	// A level's records go to segments of bounded size (a soak's would
	// otherwise be one file as long as the soak), every one kept.
	f, err := openSegments(dir, wire.RequestsFile, r.plan.RecordSegmentBytes)
	if err != nil {
		return err
	}
	defer f.Close()
	records := &lockedWriter{w: bufio.NewWriterSize(f, 64<<10)}
	tel, err := r.startTelemetry(ctx, dir, nvmeNamespaces())
	if err != nil {
		return err
	}
	summary, runErr := loadgen.Run(ctx, loadgen.Config{
		Step:    *inf,
		Level:   lv,
		Warmup:  r.plan.Profile.Warmup.D(),
		Records: records,
		Interim: func(in wire.Interim) {
			in.Step, in.Level, in.Repetition = s.Name, lv.Label, rep
			r.emitInterim(in, tel)
		},
		InterimEvery: r.interim,
		PromptSalt:   salt,
	})
	telErr := tel.stop()
	if err := records.flush(); err != nil && runErr == nil {
		runErr = fmt.Errorf("write %s: %w", wire.RequestsFile, err)
	}
	if err := f.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("write %s: %w", wire.RequestsFile, err)
	}
	res.Inference = summary
	if summary != nil && summary.SelfCheck != nil && summary.SelfCheck.Flagged {
		r.ev.log("warn", "step %s level %s: the load generator did not keep up: %s", s.Name, lv.Label, strings.Join(summary.SelfCheck.Reasons, "; "))
	}
	if inf.MetricsURL != "" && before != "" {
		// Scraped after the load even when it failed: the counters still tell
		// what the server did.
		after := r.scrapeTo(context.WithoutCancel(ctx), inf.MetricsURL, filepath.Join(dir, wire.PromAfter))
		if after != "" {
			delta, err := promDeltaText(before, after)
			if err != nil {
				r.ev.log("warn", "step %s level %s: metrics: %v", s.Name, lv.Label, err)
			} else {
				res.PromDelta = delta
			}
		}
	}
	if runErr != nil {
		return fmt.Errorf("load level %s: %w", lv.Label, runErr)
	}
	if telErr != nil {
		r.ev.log("warn", "step %s: %v", s.Name, telErr)
	}
	return nil
}

// scrapeTo saves a scrape of url into path and returns its text; a failed
// scrape is a warning (the measurement itself does not depend on it).
func (r *runner) scrapeTo(ctx context.Context, url, path string) string {
	text, err := promtext.Scrape(ctx, url, 10*time.Second)
	if err != nil {
		r.ev.log("warn", "%v", err)
		return ""
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		r.ev.log("warn", "save %s: %v", filepath.Base(path), err)
	}
	return text
}

func promDeltaText(before, after string) (map[string]float64, error) {
	b, err := promtext.Parse(before)
	if err != nil {
		return nil, fmt.Errorf("before: %w", err)
	}
	a, err := promtext.Parse(after)
	if err != nil {
		return nil, fmt.Errorf("after: %w", err)
	}
	return promtext.Delta(b, a), nil
}

// faultLogFile records what a fault applied and removed.
const faultLogFile = "fault.json"

type faultLog struct {
	Action  string          `json:"action"`
	Apply   *guardianReport `json:"apply,omitempty"`
	Undo    *guardianReport `json:"undo,omitempty"`
	Error   string          `json:"error,omitempty"`
	Applied string          `json:"applied_at,omitempty"`
	Removed string          `json:"removed_at,omitempty"`
}

// applyFault applies a fault through a guardian, holds it for its duration
// or until ctx ends, and always removes it.
func (r *runner) applyFault(ctx context.Context, f *acceptance.FaultStep, dir string, applied func()) (err error) {
	log := faultLog{Action: f.Action}
	defer func() {
		if err != nil {
			log.Error = err.Error()
		}
		b, _ := json.MarshalIndent(log, "", "  ")
		if werr := os.WriteFile(filepath.Join(dir, faultLogFile), append(b, '\n'), 0o644); werr != nil && err == nil {
			err = werr
		}
	}()
	spec, err := planFault(f)
	if err != nil {
		return err
	}
	g, err := startGuardian(r.dir, spec, f.Duration.D()+guardianMargin)
	if err != nil {
		return err
	}
	log.Apply, log.Applied = &g.apply, nowRFC3339()
	if applied != nil {
		applied()
	}
	holdErr := pause(ctx, f.Duration.D())
	undo, err := g.remove()
	log.Undo, log.Removed = &undo, nowRFC3339()
	if err != nil {
		return err
	}
	return holdErr
}

func (r *runner) runFault(ctx context.Context, i int, s acceptance.StepSpec, rep int, rel string) error {
	res := r.newResult(i, s, rep, "", rel)
	dir := filepath.Join(r.dir, rel)
	err := r.applyFault(ctx, s.Fault, dir, func() {
		r.ev.log("info", "fault %s applied (%s), removed after %s", s.Name, s.Fault.Action, s.Fault.Duration)
	})
	if err != nil {
		if cause := causeOf(ctx, err); cause != err || errors.Is(err, context.Canceled) {
			err = stepError(ctx, s.Name, cause)
		} else {
			err = &faultError{name: s.Name, err: err}
		}
	}
	r.emitResult(res, faultLogFile, err)
	return err
}

// duringFault applies fault step fi After into the load step it overlaps and
// removes it after its Duration or when that step ends (faultCtx ends with
// the step). A fault that cannot be applied stops the step: running the
// load without it would measure the wrong thing.
func (r *runner) duringFault(stepCtx, faultCtx context.Context, failStep context.CancelCauseFunc, fi, rep int) error {
	s := r.plan.Profile.Steps[fi]
	rel := filepath.Join(wire.OutputDir, stepDirName(fi, s.Name), fmt.Sprintf("rep-%d", rep))
	if err := os.MkdirAll(filepath.Join(r.dir, rel), 0o755); err != nil {
		return &faultError{s.Name, err}
	}
	res := r.newResult(fi, s, rep, "", rel)
	if err := pause(faultCtx, s.Fault.After.D()); err != nil {
		if stepCtx.Err() != nil {
			// The step was stopped (time limit, signal, another fault): that
			// is the reason, and this fault was never applied.
			r.emitResult(res, faultLogFile, causeOf(stepCtx, err))
			return nil
		}
		ferr := &faultError{s.Name, fmt.Errorf("not applied: step %s ended before %s into it", s.Fault.During, s.Fault.After)}
		r.emitResult(res, faultLogFile, ferr)
		return ferr
	}
	r.ev.emit(wire.Event{Type: wire.EventStepStart, Progress: r.progress(),
		Message: fmt.Sprintf("fault %s (%s) during %s, repetition %d/%d", s.Name, s.Fault.Action, s.Fault.During, rep, r.reps)})
	err := r.applyFault(faultCtx, s.Fault, filepath.Join(r.dir, rel), nil)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = nil // the step ended while the fault was held; it was removed
	}
	if err != nil {
		ferr := &faultError{s.Name, err}
		failStep(ferr)
		r.emitResult(res, faultLogFile, ferr)
		return ferr
	}
	r.emitResult(res, faultLogFile, nil)
	return nil
}

// truncate shortens s to n bytes for a message, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
