package probe

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

func hasEvent(dir, typ string) bool {
	b, _ := os.ReadFile(filepath.Join(dir, wire.EventsFile))
	return bytes.Contains(b, []byte(`"type":"`+typ+`"`))
}

func TestLaunchStatusStop(t *testing.T) {
	t.Parallel()
	needBinary(t)
	dir := runDir(t, planOf(sleepStep("wait", time.Hour)))
	pid := launch(t, "", dir)

	// A second launch of the same attempt is refused.
	r := probe(t, "launch", "--dir", dir)
	require.Equal(t, ExitLaunched, r.code)
	require.Contains(t, r.stderr, "already launched")

	waitFor(t, 60*time.Second, "the step to start", func() bool { return hasEvent(dir, wire.EventStepStart) })
	r = probe(t, "status", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	var st statusAnswer
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.True(t, st.Launched)
	require.True(t, st.Running)
	require.Equal(t, pid, st.PID)
	require.Positive(t, st.EventsBytes)
	require.Nil(t, st.Status)
	require.Contains(t, r.stdout, `"status":null`)

	r = probe(t, "stop", "--dir", dir, "--grace", "5s")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"signalled":true,"killed":false,"remaining":0}`, r.stdout)
	for _, p := range processes() {
		require.False(t, p.PGID == pid || p.SID == pid, "process %d (%s) of the run is left", p.PID, p.Comm)
	}
	final := status(t, dir)
	require.Equal(t, wire.StateCancelled, final.State)

	r = probe(t, "status", "--dir", dir)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.False(t, st.Running)
	require.Equal(t, wire.StateCancelled, st.Status.State)

	// Stopping again is harmless.
	r = probe(t, "stop", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"signalled":false,"killed":false,"remaining":0}`, r.stdout)
}

func TestStopKillsAProbeThatIgnoresTERM(t *testing.T) {
	t.Parallel()
	needBinary(t)
	dir := runDir(t, planOf(sleepStep("wait", time.Hour)))
	pid := launch(t, "", dir)
	waitFor(t, 60*time.Second, "the step to start", func() bool { return hasEvent(dir, wire.EventStepStart) })
	// Freeze the probe so that it cannot act on SIGTERM.
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	r := probe(t, "stop", "--dir", dir, "--grace", "500ms")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"signalled":true,"killed":true,"remaining":0}`, r.stdout)
	st := status(t, dir)
	require.Equal(t, wire.StateCancelled, st.State)
	require.Contains(t, st.Reason, "killed before it wrote its status")
	evs := events(t, dir) // seq stays increasing across the two writers
	require.Equal(t, wire.EventDone, evs[len(evs)-1].Type)
}

func TestTailFollowsAndResumes(t *testing.T) {
	t.Parallel()
	needBinary(t)
	dir := runDir(t, planOf(sleepStep("a", 1500*time.Millisecond), sleepStep("b", 500*time.Millisecond)))
	launch(t, "", dir)

	// Follow from the start while the run goes on.
	live := probe(t, "tail", "--dir", dir, "--offset", "0")
	require.Equal(t, 0, live.code, live.stderr)
	whole, err := os.ReadFile(filepath.Join(dir, wire.EventsFile))
	require.NoError(t, err)
	require.Equal(t, string(whole), live.stdout)
	require.Contains(t, live.stdout, `"type":"done"`)

	// Resume from arbitrary offsets, inside lines too: the bytes join up.
	for _, off := range []int{1, len(whole) / 3, len(whole)} {
		r := probe(t, "tail", "--dir", dir, "--offset", strconv.Itoa(off))
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, string(whole), string(whole[:off])+r.stdout, "offset %d", off)
	}
	r := probe(t, "tail", "--dir", dir, "--offset", strconv.Itoa(len(whole)+1))
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stderr, "past the end")
}

func TestTailExitsWhenTheProbeWasKilled(t *testing.T) {
	t.Parallel()
	needBinary(t)
	dir := runDir(t, planOf(sleepStep("wait", time.Hour)))
	pid := launch(t, "", dir)
	waitFor(t, 60*time.Second, "the step to start", func() bool { return hasEvent(dir, wire.EventStepStart) })
	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
	r := probe(t, "tail", "--dir", dir, "--offset", "0")
	require.Equal(t, ExitCrashed, r.code)
	require.Contains(t, r.stderr, "gone without writing status.json")
	whole, err := os.ReadFile(filepath.Join(dir, wire.EventsFile))
	require.NoError(t, err)
	require.Equal(t, string(whole), r.stdout)
	require.NoFileExists(t, filepath.Join(dir, wire.StatusFile))
}

func TestPack(t *testing.T) {
	t.Parallel()
	needBinary(t)
	dir := runDir(t, planOf(acceptance.StepSpec{Name: "hello", Kind: acceptance.StepCommand,
		Command: &acceptance.CommandStep{Program: "echo", Args: []string{"hello"}, Format: "text"}}))
	r := probe(t, "run", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)

	cmd := probeCmd("", "pack", "--dir", dir)
	var tarBytes, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &tarBytes, &stderr
	require.NoError(t, cmd.Run(), stderr.String())

	// The manifest verifies with sha256sum -c, from the run folder.
	check := exec.Command("sha256sum", "--strict", "-c", wire.ManifestFile)
	check.Dir = dir
	out, err := check.CombinedOutput()
	require.NoError(t, err, string(out))

	var want []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			if d.IsDir() {
				rel += "/"
			}
			want = append(want, rel)
		}
		return nil
	}))
	var got []string
	tr := tar.NewReader(&tarBytes)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, h.Name)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			disk, err := os.ReadFile(filepath.Join(dir, h.Name))
			require.NoError(t, err)
			require.Equal(t, disk, b, h.Name)
		}
	}
	require.True(t, sort.StringsAreSorted(got), "deterministic, lexical order")
	sort.Strings(want)
	require.Equal(t, want, got, "the tar holds every file of the run folder")
	require.Contains(t, got, wire.ManifestFile)
	require.Contains(t, got, "out/01-hello/rep-1/output.txt")

	manifest, err := os.ReadFile(filepath.Join(dir, wire.ManifestFile))
	require.NoError(t, err)
	require.Contains(t, string(manifest), "  events.jsonl\n")
	require.NotContains(t, string(manifest), wire.ManifestFile)
}

func TestManifestLineEscapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := "odd\\name\nwith newline"
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plain"), []byte("y"), 0o644))
	require.NoError(t, writeManifest(t.Context(), dir))
	check := exec.Command("sha256sum", "--strict", "-c", wire.ManifestFile)
	check.Dir = dir
	out, err := check.CombinedOutput()
	require.NoError(t, err, string(out))
}

// A stop that comes before any launch claims the run folder: a launch
// arriving afterwards (its request was on its way) starts nothing, and
// the folder says the run was stopped before it ran.
func TestStopBeforeLaunchClaimsTheFolder(t *testing.T) {
	t.Parallel()
	needBinary(t)
	dir := runDir(t, planOf(sleepStep("wait", time.Hour)))
	r := probe(t, "stop", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"signalled":false,"killed":false,"remaining":0}`, r.stdout)

	r = probe(t, "launch", "--dir", dir)
	require.Equal(t, ExitLaunched, r.code, "a launch after the stop is refused")
	require.NoFileExists(t, filepath.Join(dir, wire.PIDFile), "no probe was started")
	r = probe(t, "status", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	var st statusAnswer
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.False(t, st.Launched)
	require.False(t, st.Running)
	require.Equal(t, wire.StateCancelled, st.Status.State)
	require.Contains(t, st.Status.Reason, "before the probe was launched")
	// A follower finds the run finished, not crashed.
	r = probe(t, "tail", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"type":"done"`)

	// A folder that does not exist yet (the plan was never written) is
	// claimed all the same.
	missing := filepath.Join(t.TempDir(), "runs", "9-1")
	r = probe(t, "stop", "--dir", missing)
	require.Equal(t, 0, r.code, r.stderr)
	require.FileExists(t, filepath.Join(missing, wire.LaunchFile))
}
