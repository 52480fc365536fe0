package sshrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
)

type probeBundle struct {
	sshd   *sshtest.SSHD
	proxy  *sshtest.Proxy
	target sshrun.Target // through the proxy
	opts   sshrun.Options
	base   string // remote base: a temporary folder on this machine, which is the host
	binary string // the accord binary to upload
}

// sharedBase is a remote base that the run tests share, so that the probe
// is uploaded once for them rather than once per test (concurrent
// EnsureProbe calls into one cache are safe: each writes its own temporary
// file and renames it into place).
var sharedBase struct {
	once sync.Once
	dir  string
	err  error
}

func removeSharedBase() {
	if sharedBase.dir != "" {
		_ = os.RemoveAll(sharedBase.dir)
	}
}

// setupProbe starts an sshd behind a proxy. With ownCache the test gets a
// remote base of its own (for tests of the upload itself).
func setupProbe(t *testing.T, ownCache bool) *probeBundle {
	t.Helper()
	binary := sshtest.BuildAccord(t)
	sshd := sshtest.StartSSHD(t, sshtest.Options{})
	proxy := sshtest.StartProxy(t, sshd.HostPort())
	base := t.TempDir()
	if !ownCache {
		sharedBase.once.Do(func() { sharedBase.dir, sharedBase.err = os.MkdirTemp("", "accord-sshrun-runs-") })
		require.NoError(t, sharedBase.err)
		base = sharedBase.dir
	}
	opts := testOpts
	opts.RemoteBase = base
	return &probeBundle{sshd: sshd, proxy: proxy, target: via(targetOf(sshd), proxy), opts: opts, base: base, binary: binary}
}

// client dials through the proxy with the probe in place.
func (b *probeBundle) client(t *testing.T) *sshrun.Client {
	t.Helper()
	c := dial(t, b.target, b.opts)
	_, err := c.EnsureProbe(context.Background(), sshrun.ProbeSource{File: b.binary})
	require.NoError(t, err)
	return c
}

// plan is a short run of pause steps (and one command step with an output
// file), enough for a few dozen events over a few seconds.
func plan(t *testing.T, runID int64, pauses ...time.Duration) []byte {
	t.Helper()
	steps := []acceptance.StepSpec{{
		Name: "hello", Kind: acceptance.StepCommand,
		Command: &acceptance.CommandStep{Program: "/bin/echo", Args: []string{"hello from the probe"}, Format: "text"},
	}}
	for i, d := range pauses {
		steps = append(steps, acceptance.StepSpec{
			Name: "settle-" + strconv.Itoa(i+1), Kind: acceptance.StepPause,
			Pause: &acceptance.PauseStep{Duration: acceptance.Duration(d)},
		})
	}
	p := wire.Plan{
		SchemaVersion: wire.PlanSchemaVersion,
		RunID:         runID,
		Attempt:       1,
		RunTimeout:    acceptance.Duration(5 * time.Minute),
		Interim:       acceptance.Duration(500 * time.Millisecond),
		Profile: acceptance.ProfileSpec{
			SchemaVersion: acceptance.ProfileSchemaVersion,
			Name:          "sshrun-test",
			Purpose:       acceptance.PurposeCustom,
			Storage:       acceptance.Storage{Transport: acceptance.TransportEmulated},
			Repetitions:   1,
			Steps:         steps,
		},
	}
	b, err := json.Marshal(p)
	require.NoError(t, err)
	return b
}

// launchRun prepares and launches a run, and stops it when the test ends.
func launchRun(t *testing.T, c *sshrun.Client, runID int64, planJSON []byte) string {
	t.Helper()
	ctx := context.Background()
	dir := c.RunDir(runID, 1)
	require.NoError(t, c.PrepareRun(ctx, dir, planJSON))
	l, err := c.Launch(ctx, dir)
	require.NoError(t, err)
	require.False(t, l.Already)
	require.Positive(t, l.PID)
	t.Cleanup(func() {
		// Leave nothing running whatever the test did, on a connection of
		// its own (the test's may be gone).
		sshd := c.Target()
		cc, err := sshrun.Dial(context.Background(), sshd, c.Options())
		if err != nil {
			t.Logf("cleanup: %v", err)
			killGroup(l.PID)
			return
		}
		defer cc.Close()
		cc.UseProbe(mustProbePath(t, c, dir))
		if _, err := cc.Stop(context.Background(), dir, time.Second); err != nil {
			t.Logf("cleanup stop: %v", err)
			killGroup(l.PID)
		}
	})
	return dir
}

func mustProbePath(t *testing.T, c *sshrun.Client, dir string) string {
	// The probe records which executable it is in LaunchFile.
	var rec struct {
		Executable string `json:"executable"`
	}
	b, err := os.ReadFile(filepath.Join(dir, wire.LaunchFile))
	if err == nil {
		_ = json.Unmarshal(b, &rec)
	}
	return rec.Executable
}

func killGroup(pgid int) {
	if pgid > 1 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// hostFiles reads every regular file under dir (this machine is the host).
func hostFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	}))
	return out
}

// runProcesses lists processes on this machine that belong to the run: in
// the probe's process group, or with the run folder in their command line.
func runProcesses(t *testing.T, pgid int, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmd := strings.ReplaceAll(string(cmdline), "\x00", " ")
		// Fields after the command name in parentheses: state ppid pgrp ...
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		pgrp, _ := strconv.Atoi(fields[2])
		if pgrp == pgid || strings.Contains(cmd, dir) {
			found = append(found, e.Name()+": "+cmd)
		}
	}
	return found
}

func TestEnsureProbe(t *testing.T) {
	t.Parallel()
	b := setupProbe(t, true)
	ctx := context.Background()
	c := dial(t, b.target, b.opts)
	local, err := os.ReadFile(b.binary)
	require.NoError(t, err)

	// First time: uploaded into the cache by its digest.
	p, err := c.EnsureProbe(ctx, sshrun.ProbeSource{File: b.binary})
	require.NoError(t, err)
	require.True(t, p.Uploaded)
	require.EqualValues(t, len(local), p.BytesSent)
	require.Equal(t, "amd64", p.Arch)
	require.Equal(t, filepath.Join(b.base, "probe", p.SHA256, "accord"), p.Path)
	cached, err := os.ReadFile(p.Path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(local, cached), "cached probe differs from the local binary")
	fi, err := os.Stat(p.Path)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o755), fi.Mode().Perm())
	entries, err := os.ReadDir(filepath.Dir(p.Path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left beside the probe")

	// Second time: nothing sent but a few small commands.
	up := b.proxy.BytesUp()
	p2, err := c.EnsureProbe(ctx, sshrun.ProbeSource{File: b.binary})
	require.NoError(t, err)
	require.False(t, p2.Uploaded)
	require.Zero(t, p2.BytesSent)
	require.Equal(t, p.Path, p2.Path)
	sent := b.proxy.BytesUp() - up
	t.Logf("second EnsureProbe sent %d bytes on the wire (binary is %d)", sent, len(local))
	require.Less(t, sent, int64(32<<10))

	// A damaged cached copy is replaced.
	require.NoError(t, os.WriteFile(p.Path, []byte("#!/bin/sh\necho corrupted\n"), 0o755))
	p3, err := c.EnsureProbe(ctx, sshrun.ProbeSource{File: b.binary})
	require.NoError(t, err)
	require.True(t, p3.Uploaded)
	cached, err = os.ReadFile(p.Path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(local, cached))

	// The probe runs from there.
	facts, err := c.Facts(ctx)
	require.NoError(t, err)
	require.True(t, json.Valid(facts.JSON))
	require.Positive(t, facts.RTT)
	t.Logf("round trip of a trivial command: %s", facts.RTT)

	// Choosing by architecture from a folder of prebuilt binaries.
	dir := t.TempDir()
	require.NoError(t, os.Symlink(b.binary, filepath.Join(dir, "accord-linux-amd64")))
	p4, err := c.EnsureProbe(ctx, sshrun.ProbeSource{Dir: dir})
	require.NoError(t, err)
	require.Equal(t, p.SHA256, p4.SHA256)
	require.False(t, p4.Uploaded)
	_, err = c.EnsureProbe(ctx, sshrun.ProbeSource{Dir: t.TempDir()})
	require.Error(t, err, "no binary for the host's architecture")
	notELF := filepath.Join(dir, "script")
	require.NoError(t, os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755))
	_, err = c.EnsureProbe(ctx, sshrun.ProbeSource{File: notELF})
	require.Error(t, err)
}

func TestEnsureProbeUnderLoginHome(t *testing.T) {
	t.Parallel()
	b := setupProbe(t, true)
	opts := b.opts
	opts.RemoteBase = "" // the default, .accord under the login home
	c := dial(t, b.target, opts)
	p, err := c.EnsureProbe(context.Background(), sshrun.ProbeSource{File: b.binary})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(p.Path, ".accord/probe/"), p.Path)
	home, err := os.UserHomeDir() // sshd's login home for this user
	require.NoError(t, err)
	t.Cleanup(func() {
		// Remove this binary's cache entry, and the folders above it if
		// nothing else is there.
		_ = os.RemoveAll(filepath.Join(home, filepath.Dir(p.Path)))
		_ = os.Remove(filepath.Join(home, ".accord", "probe"))
		_ = os.Remove(filepath.Join(home, ".accord"))
	})
	local, err := os.ReadFile(b.binary)
	require.NoError(t, err)
	cached, err := os.ReadFile(filepath.Join(home, p.Path))
	require.NoError(t, err)
	require.True(t, bytes.Equal(local, cached))
}

// collectAndCompare collects the run folder and checks it byte for byte
// against the host's files.
func collectAndCompare(t *testing.T, c *sshrun.Client, dir string) *sshrun.Collection {
	t.Helper()
	coll, err := c.Collect(context.Background(), dir, sshrun.Limits{MemoryBytes: 1024, TempDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, coll.Remove()) })
	want := hostFiles(t, dir)
	require.Len(t, coll.Files, len(want))
	for _, f := range coll.Files {
		r, err := f.Open()
		require.NoError(t, err)
		var got bytes.Buffer
		_, err = got.ReadFrom(r)
		require.NoError(t, err)
		require.NoError(t, r.Close())
		require.True(t, bytes.Equal(want[f.Name], got.Bytes()), "%s differs from the host's file", f.Name)
	}
	_, ok := coll.File(wire.ManifestFile)
	require.True(t, ok)
	return coll
}

func TestLaunchFollowCollect(t *testing.T) {
	t.Parallel()
	b := setupProbe(t, false)
	ctx := context.Background()
	c := b.client(t)
	planJSON := plan(t, 101, 300*time.Millisecond, 300*time.Millisecond)
	dir := launchRun(t, c, 101, planJSON)

	// A second launch starts nothing and says so.
	again, err := c.Launch(ctx, dir)
	require.NoError(t, err)
	require.True(t, again.Already)
	// The plan cannot change under a launched run; the same plan is fine.
	require.NoError(t, c.PrepareRun(ctx, dir, planJSON))
	require.ErrorIs(t, c.PrepareRun(ctx, dir, plan(t, 101, time.Second)), sshrun.ErrPlanChanged)

	var lines [][]byte
	res, err := c.Follow(ctx, dir, 0, func(line []byte) error {
		lines = append(lines, bytes.Clone(line))
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, sshrun.Finished, res.Outcome)
	events, err := os.ReadFile(filepath.Join(dir, wire.EventsFile))
	require.NoError(t, err)
	require.Equal(t, int64(len(events)), res.Offset)
	require.Equal(t, string(events), string(bytes.Join(lines, []byte("\n")))+"\n")
	var last wire.Event
	require.NoError(t, json.Unmarshal(lines[len(lines)-1], &last))
	require.Equal(t, wire.EventDone, last.Type)

	st, err := c.Status(ctx, dir)
	require.NoError(t, err)
	require.False(t, st.Running)
	require.NotNil(t, st.Status)
	require.Equal(t, wire.StateDone, st.Status.State)
	require.Equal(t, int64(len(events)), st.EventsBytes)
	require.Equal(t, again.PID, st.PID)

	// Following from the end returns at once with nothing new.
	res2, err := c.Follow(ctx, dir, res.Offset, func([]byte) error { t.Fatal("no more lines expected"); return nil })
	require.NoError(t, err)
	require.Equal(t, sshrun.Finished, res2.Outcome)
	require.Equal(t, res.Offset, res2.Offset)

	coll := collectAndCompare(t, c, dir)
	var hasOutput bool
	for _, f := range coll.Files {
		hasOutput = hasOutput || strings.HasPrefix(f.Name, wire.OutputDir+"/")
	}
	require.True(t, hasOutput, "the steps' outputs are collected")

	// Limits are reported clearly.
	_, err = c.Collect(ctx, dir, sshrun.Limits{MaxFileBytes: 16})
	var le *sshrun.LimitError
	require.ErrorAs(t, err, &le)
	require.Contains(t, err.Error(), "per-file limit of 16 bytes")
}

func TestFollowResumesAfterReset(t *testing.T) {
	t.Parallel()
	b := setupProbe(t, false)
	ctx := context.Background()
	c := b.client(t)
	dir := launchRun(t, c, 202, plan(t, 202, time.Second, time.Second, time.Second, time.Second, 2*time.Second))
	require.NoError(t, c.Close())

	host := &sshrun.Host{Target: b.target, Options: b.opts, Backoff: sshrun.Backoff{Initial: 50 * time.Millisecond, Attempts: 5}}
	host.ProbePath = mustProbePath(t, c, dir)
	t.Cleanup(func() { _ = host.Close() })

	// Reset every connection when the 2nd and the 4th pause start: the
	// probe keeps running, and what it writes next must come through new
	// connections.
	var mu sync.Mutex
	var got bytes.Buffer
	res, err := host.Follow(ctx, dir, 0, func(line []byte) error {
		mu.Lock()
		defer mu.Unlock()
		got.Write(line)
		got.WriteByte('\n')
		var e wire.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return err
		}
		if e.Type == wire.EventStepStart && e.Progress != nil && (e.Progress.StepName == "settle-2" || e.Progress.StepName == "settle-4") {
			b.proxy.Reset()
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, sshrun.Finished, res.Outcome)
	require.GreaterOrEqual(t, res.Reconnects, 2)
	require.GreaterOrEqual(t, b.proxy.Accepted(), int64(3), "the follow redialled")
	t.Logf("followed %d lines with %d reconnections", res.Lines, res.Reconnects)

	events, err := os.ReadFile(filepath.Join(dir, wire.EventsFile))
	require.NoError(t, err)
	require.Equal(t, string(events), got.String(), "the followed lines concatenate to the host's events file")
	require.Equal(t, int64(len(events)), res.Offset)

	// Launched once: one launch record, one pid, a single run in the events.
	var rec struct {
		PID int `json:"pid"`
	}
	lb, err := os.ReadFile(filepath.Join(dir, wire.LaunchFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(lb, &rec))
	pidFile, err := os.ReadFile(filepath.Join(dir, wire.PIDFile))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(rec.PID), strings.TrimSpace(string(pidFile)))
	var seqs []int64
	for line := range bytes.SplitSeq(bytes.TrimSpace(events), []byte("\n")) {
		var e wire.Event
		require.NoError(t, json.Unmarshal(line, &e))
		seqs = append(seqs, e.Seq)
	}
	for i := 1; i < len(seqs); i++ {
		require.Greater(t, seqs[i], seqs[i-1], "one run, one increasing sequence")
	}
}

func TestStopCancelsRun(t *testing.T) {
	t.Parallel()
	b := setupProbe(t, false)
	ctx := context.Background()
	c := b.client(t)
	dir := launchRun(t, c, 303, plan(t, 303, 10*time.Minute))

	// Follow in the background, as the worker does, until the stop ends it.
	type followed struct {
		res sshrun.FollowResult
		err error
	}
	done := make(chan followed, 1)
	started := make(chan struct{}, 1)
	go func() {
		res, err := c.Follow(ctx, dir, 0, func([]byte) error {
			select {
			case started <- struct{}{}:
			default:
			}
			return nil
		})
		done <- followed{res, err}
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s")
	}
	st, err := c.Status(ctx, dir)
	require.NoError(t, err)
	require.True(t, st.Running)
	require.NotEmpty(t, runProcesses(t, st.PID, dir), "the run is visible in /proc before the stop")

	stopped, err := c.Stop(ctx, dir, 2*time.Second)
	require.NoError(t, err)
	require.True(t, stopped.Signalled)
	require.Zero(t, stopped.Remaining)
	require.True(t, json.Valid(stopped.Raw))

	// The follow ends: the probe wrote its status (or stop wrote it).
	select {
	case f := <-done:
		require.NoError(t, f.err)
		require.Contains(t, []sshrun.Outcome{sshrun.Finished, sshrun.ProbeCrashed}, f.res.Outcome)
	case <-time.After(30 * time.Second):
		t.Fatal("follow did not end after the stop")
	}

	st, err = c.Status(ctx, dir)
	require.NoError(t, err)
	require.False(t, st.Running)
	require.NotNil(t, st.Status)
	require.Equal(t, wire.StateCancelled, st.Status.State)
	require.Empty(t, runProcesses(t, st.PID, dir), "no process of the run is left")
}
