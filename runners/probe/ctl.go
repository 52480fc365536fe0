package probe

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/wire"
)

func cmdFacts(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("facts", stderr)
	out := fl.String("out", "", "write the facts to this file and print a summary")
	if err := parseFlags(fl, args); err != nil {
		return usageError(stderr, err)
	}
	f, err := facts.Collect(ctx, facts.Options{})
	if err != nil {
		return fail(stderr, ExitError, "facts: %v", err)
	}
	if *out == "" {
		if err := printJSON(stdout, f); err != nil {
			return fail(stderr, ExitError, "facts: %v", err)
		}
		return ExitOK
	}
	if err := writeJSONAtomic(*out, f); err != nil {
		return fail(stderr, ExitError, "facts: %v", err)
	}
	absent := f.Absent()
	if absent == nil {
		absent = []string{}
	}
	if err := printJSON(stdout, map[string]any{"out": *out, "collected_at": f.CollectedAt, "absent": absent}); err != nil {
		return fail(stderr, ExitError, "facts: %v", err)
	}
	return ExitOK
}

// launchRecord is LaunchFile: who was started, when, for which attempt.
type launchRecord struct {
	PID        int    `json:"pid"`
	PGID       int    `json:"pgid"`
	StartTicks uint64 `json:"start_ticks"` // /proc/PID/stat starttime, guards against a recycled pid
	LaunchedAt string `json:"launched_at"`
	RunID      int64  `json:"run_id"`
	Attempt    int    `json:"attempt"`
	Executable string `json:"executable"`
	// StoppedBeforeLaunch marks a folder that `probe stop` claimed before
	// any launch: a launch still on its way (its request in flight when the
	// run was stopped) then finds the folder taken and starts nothing.
	StoppedBeforeLaunch bool `json:"stopped_before_launch,omitempty"`
}

func readLaunch(dir string) (*launchRecord, error) {
	b, err := os.ReadFile(filepath.Join(dir, wire.LaunchFile))
	if err != nil {
		return nil, err
	}
	var l launchRecord
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("parse %s: %w", wire.LaunchFile, err)
	}
	if l.PGID <= 1 && !l.StoppedBeforeLaunch {
		return nil, fmt.Errorf("%s has no process group", wire.LaunchFile)
	}
	return &l, nil
}

// claimStopped writes the LaunchFile of a folder no probe was launched in
// (O_EXCL, as a launch does), so that no launch can start there any more.
// If a launch claimed the folder first, its record is returned instead,
// once it is complete (the launcher writes it right after starting the
// probe).
func claimStopped(dir string) (*launchRecord, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, wire.LaunchFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		var l *launchRecord
		for end := time.Now().Add(5 * time.Second); ; {
			if l, err = readLaunch(dir); err == nil || time.Now().After(end) {
				return l, err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err != nil {
		return nil, err
	}
	l := &launchRecord{LaunchedAt: nowRFC3339(), StoppedBeforeLaunch: true}
	b, _ := json.Marshal(l)
	_, werr := f.Write(append(b, '\n'))
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return l, werr
}

func cmdLaunch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("launch", stderr)
	dirFlag := fl.String("dir", "", "run folder holding plan.json")
	if err := parseFlags(fl, args); err != nil {
		return usageError(stderr, err)
	}
	dir, err := absDir(*dirFlag)
	if err != nil {
		return usageError(stderr, err)
	}
	plan, err := loadPlan(dir)
	if err != nil {
		return fail(stderr, ExitUsage, "%v", err)
	}
	// Claim the attempt first: O_EXCL makes a second launch fail even when
	// two race.
	lf, err := os.OpenFile(filepath.Join(dir, wire.LaunchFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) || errors.Is(err, os.ErrExist) {
		return fail(stderr, ExitLaunched, "run %d attempt %d was already launched in %s (%s exists)", plan.RunID, plan.Attempt, dir, wire.LaunchFile)
	}
	if err != nil {
		return fail(stderr, ExitError, "launch: %v", err)
	}
	unclaim := func() {
		lf.Close()
		os.Remove(filepath.Join(dir, wire.LaunchFile))
	}
	exe, err := os.Executable()
	if err != nil {
		unclaim()
		return fail(stderr, ExitError, "launch: %v", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, wire.LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		unclaim()
		return fail(stderr, ExitError, "launch: %v", err)
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		unclaim()
		return fail(stderr, ExitError, "launch: %v", err)
	}
	defer devnull.Close()
	cmd := exec.Command(exe, "probe", "run", "--dir", dir)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		unclaim()
		return fail(stderr, ExitError, "launch: start probe run: %v", err)
	}
	pid := cmd.Process.Pid
	rec := launchRecord{PID: pid, PGID: pid, LaunchedAt: nowRFC3339(), RunID: plan.RunID, Attempt: plan.Attempt, Executable: exe}
	if st, err := readProcStat(pid); err == nil {
		rec.StartTicks = st.StartTime
	}
	b, _ := json.MarshalIndent(rec, "", "  ")
	_, werr := lf.Write(append(b, '\n'))
	if werr == nil {
		werr = lf.Sync()
	}
	if cerr := lf.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = writeFileAtomic(filepath.Join(dir, wire.PIDFile), []byte(strconv.Itoa(pid)+"\n"), 0o644)
	}
	_ = cmd.Process.Release()
	if werr != nil {
		// The probe runs; say so, but report the bookkeeping failure.
		return fail(stderr, ExitError, "launch: probe started as pid %d but its records could not be written: %v", pid, werr)
	}
	if err := printJSON(stdout, map[string]int{"pid": pid}); err != nil {
		return ExitError
	}
	return ExitOK
}

// running reports whether any process of the launched run is alive.
func (l *launchRecord) running() bool {
	return l.PGID > 1 && len(runProcesses(l.PGID, l.StartTicks)) > 0
}

// statusAnswer is what `probe status` prints.
type statusAnswer struct {
	Launched    bool         `json:"launched"`
	Running     bool         `json:"running"`
	PID         int          `json:"pid"`
	EventsBytes int64        `json:"events_bytes"`
	Status      *wire.Status `json:"status"`
	// Waiting is the barrier the probe waits at (a multi-host run).
	Waiting *wire.Barrier `json:"waiting,omitempty"`
}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("status", stderr)
	dirFlag := fl.String("dir", "", "run folder")
	if err := parseFlags(fl, args); err != nil {
		return usageError(stderr, err)
	}
	dir, err := absDir(*dirFlag)
	if err != nil {
		return usageError(stderr, err)
	}
	if _, err := os.Stat(dir); err != nil {
		return fail(stderr, ExitError, "status: %v", err)
	}
	var a statusAnswer
	if l, err := readLaunch(dir); err == nil {
		a.Launched, a.PID, a.Running = !l.StoppedBeforeLaunch, l.PID, l.running()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fail(stderr, ExitError, "status: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, wire.EventsFile)); err == nil {
		a.EventsBytes = fi.Size()
	}
	st, err := readStatus(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(stderr, ExitError, "status: %v", err)
	}
	a.Status = st
	if b, err := os.ReadFile(filepath.Join(dir, wire.WaitingFile)); err == nil && st == nil {
		var w wire.Barrier
		if json.Unmarshal(b, &w) == nil {
			a.Waiting = &w
		}
	}
	if err := printJSON(stdout, a); err != nil {
		return ExitError
	}
	return ExitOK
}

func cmdTail(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("tail", stderr)
	dirFlag := fl.String("dir", "", "run folder")
	offset := fl.Int64("offset", 0, "byte offset in events.jsonl to start from")
	poll := fl.Duration("poll", 200*time.Millisecond, "how often to look for new events")
	if err := parseFlags(fl, args); err != nil {
		return usageError(stderr, err)
	}
	dir, err := absDir(*dirFlag)
	if err != nil {
		return usageError(stderr, err)
	}
	if *offset < 0 {
		return fail(stderr, ExitUsage, "tail: offset must not be negative")
	}
	events := filepath.Join(dir, wire.EventsFile)
	off := *offset
	// copyNew copies whatever was appended since off.
	copyNew := func() error {
		f, err := os.Open(events)
		if errors.Is(err, fs.ErrNotExist) {
			if off > 0 {
				return fmt.Errorf("offset %d is past the end of %s (it does not exist)", off, wire.EventsFile)
			}
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if off > fi.Size() {
			return fmt.Errorf("offset %d is past the end of %s (%d bytes)", off, wire.EventsFile, fi.Size())
		}
		n, err := io.Copy(stdout, io.NewSectionReader(f, off, fi.Size()-off))
		off += n
		return err
	}
	launch, launchErr := readLaunch(dir)
	// A fault guardian outlives its probe on purpose, to remove the fault
	// once the probe is gone (killed, say): until it has, something of the
	// run is still on the host, and the tail does not end (its end frees
	// the host for the next run).
	faultLeft := func() bool { return len(guardianProcesses(dir)) > 0 }
	for {
		if err := copyNew(); err != nil {
			return fail(stderr, ExitError, "tail: %v", err)
		}
		_, statusErr := os.Stat(filepath.Join(dir, wire.StatusFile))
		switch {
		case statusErr == nil && !faultLeft():
			// StatusFile is written after the done event: drain and finish.
			if err := copyNew(); err != nil {
				return fail(stderr, ExitError, "tail: %v", err)
			}
			return ExitOK
		case statusErr == nil:
			// Finished, its fault not yet removed: wait.
		case launchErr != nil:
			if errors.Is(launchErr, fs.ErrNotExist) {
				return fail(stderr, ExitError, "tail: no probe was launched in %s", dir)
			}
			return fail(stderr, ExitError, "tail: %v", launchErr)
		case !launch.running() && !faultLeft():
			// Gone: one last look, since it may have finished just now.
			if _, err := os.Stat(filepath.Join(dir, wire.StatusFile)); err == nil {
				continue
			}
			if err := copyNew(); err != nil {
				return fail(stderr, ExitError, "tail: %v", err)
			}
			return fail(stderr, ExitCrashed, "tail: the probe (process group %d) is gone without writing %s; it crashed or was killed", launch.PGID, wire.StatusFile)
		}
		select {
		case <-ctx.Done():
			return fail(stderr, ExitError, "tail: interrupted at offset %d", off)
		case <-time.After(*poll):
		}
	}
}

// stopAnswer is what `probe stop` prints.
type stopAnswer struct {
	Signalled bool `json:"signalled"`
	Killed    bool `json:"killed"`
	Remaining int  `json:"remaining"`
}

// guardianWait is how long stop waits for fault guardians to remove their
// faults after the probe is gone.
const guardianWait = 30 * time.Second

func cmdStop(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("stop", stderr)
	dirFlag := fl.String("dir", "", "run folder")
	grace := fl.Duration("grace", 5*time.Second, "time between SIGTERM and SIGKILL")
	if err := parseFlags(fl, args); err != nil {
		return usageError(stderr, err)
	}
	dir, err := absDir(*dirFlag)
	if err != nil {
		return usageError(stderr, err)
	}
	var a stopAnswer
	l, err := readLaunch(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// Nothing was launched here (yet): claim the folder so that
		// nothing will be.
		l, err = claimStopped(dir)
	}
	if err != nil {
		return fail(stderr, ExitError, "stop: %v", err)
	}
	if l.PGID > 1 {
		a = stopGroup(l, *grace)
	}
	// Guardians outlive the probe on purpose: wait for them to remove
	// their faults rather than killing them.
	deadline := time.Now().Add(guardianWait)
	for len(guardianProcesses(dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if l.PGID > 1 {
		a.Remaining = len(runProcesses(l.PGID, l.StartTicks))
	}
	a.Remaining += len(guardianProcesses(dir))
	if a.Remaining == 0 {
		if err := recordStopped(dir, l); err != nil {
			return fail(stderr, ExitError, "stop: %v", err)
		}
	}
	if err := printJSON(stdout, a); err != nil {
		return ExitError
	}
	if a.Remaining > 0 {
		return ExitError
	}
	return ExitOK
}

// stopGroup sends SIGTERM to the run's process group (and any process of
// its session that left the group), SIGKILL after grace, and waits until
// none is left.
func stopGroup(l *launchRecord, grace time.Duration) stopAnswer {
	var a stopAnswer
	signalAll := func(sig syscall.Signal) int {
		procs := runProcesses(l.PGID, l.StartTicks)
		if len(procs) == 0 {
			return 0
		}
		_ = syscall.Kill(-l.PGID, sig)
		for _, p := range procs {
			if p.PGID != l.PGID {
				_ = syscall.Kill(p.PID, sig)
			}
		}
		return len(procs)
	}
	if signalAll(syscall.SIGTERM) == 0 {
		return a
	}
	a.Signalled = true
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if len(runProcesses(l.PGID, l.StartTicks)) == 0 {
			return a
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.Killed = true
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		if signalAll(syscall.SIGKILL) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return a
}

// recordStopped writes the cancelled status (and its done event) when the
// probe was killed before it could write its own.
func recordStopped(dir string, l *launchRecord) error {
	if _, err := os.Stat(filepath.Join(dir, wire.StatusFile)); err == nil {
		return nil
	}
	ev, err := openEventLog(dir)
	if err != nil {
		return err
	}
	reason := "stopped by probe stop; the probe was killed before it wrote its status"
	if l.StoppedBeforeLaunch {
		reason = "stopped by probe stop before the probe was launched; nothing ran here"
	}
	st := wire.Status{State: wire.StateCancelled, ExitCode: ExitCancelled,
		Reason: reason, StartedAt: l.LaunchedAt, FinishedAt: nowRFC3339()}
	ev.emit(wire.Event{Type: wire.EventDone, Message: "run cancelled: " + st.Reason, Status: &st})
	if err := ev.close(); err != nil {
		return err
	}
	return writeJSONAtomic(filepath.Join(dir, wire.StatusFile), st)
}

func cmdPack(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("pack", stderr)
	dirFlag := fl.String("dir", "", "run folder")
	if err := parseFlags(fl, args); err != nil {
		return usageError(stderr, err)
	}
	dir, err := absDir(*dirFlag)
	if err != nil {
		return usageError(stderr, err)
	}
	if l, err := readLaunch(dir); err == nil && l.running() {
		return fail(stderr, ExitError, "pack: the probe is still running in %s", dir)
	}
	if err := writeManifest(ctx, dir); err != nil {
		return fail(stderr, ExitError, "pack: %v", err)
	}
	if err := writeTar(ctx, dir, stdout); err != nil {
		return fail(stderr, ExitError, "pack: %v", err)
	}
	return ExitOK
}

// walkRun lists the run folder's entries in lexical order (WalkDir's
// order), relative to dir, the root itself excluded.
func walkRun(dir string, fn func(rel string, d fs.DirEntry) error) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), d)
	})
}

// manifestLine is one line of sha256sum's output for rel, with its escape
// for names holding a backslash or a newline.
func manifestLine(sum, rel string) string {
	if strings.ContainsAny(rel, "\\\n\r") {
		esc := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`).Replace(rel)
		return `\` + sum + "  " + esc + "\n"
	}
	return sum + "  " + rel + "\n"
}

func writeManifest(ctx context.Context, dir string) error {
	var b strings.Builder
	err := walkRun(dir, func(rel string, d fs.DirEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() || rel == wire.ManifestFile {
			return nil
		}
		sum, err := sha256File(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		b.WriteString(manifestLine(sum, rel))
		return nil
	})
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, wire.ManifestFile), []byte(b.String()), 0o644)
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeTar streams the run folder as a tar, entries in lexical order.
func writeTar(ctx context.Context, dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := walkRun(dir, func(rel string, d fs.DirEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil // sockets, fifos: nothing to carry
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		// Exactly the size in the header, even if the file changed since.
		if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
