package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// accordBin is the accord binary the tests drive as a process, as the
// runner does over SSH.
var accordBin string

func TestMain(m *testing.M) {
	// The tests mostly wait on the probe's processes (sleeps, fio's runtime,
	// signals), not on the CPU: unless -parallel was given, run more of them
	// at once than the default of GOMAXPROCS.
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "12")
	}
	fuzzing := false
	for _, a := range os.Args {
		if strings.HasPrefix(a, "-test.fuzz=") || strings.HasPrefix(a, "-test.fuzzworker") {
			fuzzing = true
		}
	}
	if !fuzzing {
		bin, err := buildAccord()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		accordBin = bin
	}
	code := m.Run()
	if accordBin != "" {
		os.Remove(accordBin)
	}
	os.Exit(code)
}

// needBinary skips tests that drive the binary when it was not built (fuzzing).
func needBinary(t *testing.T) {
	t.Helper()
	if accordBin == "" {
		t.Skip("the accord binary is not built when fuzzing")
	}
}

// buildAccord builds the accord binary into the module's tmp/. When the
// module's main package does not build (another package is half-written),
// it falls back to a small main that only dispatches `probe`, so that the
// probe's own tests still run; the fallback is logged.
func buildAccord() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	dir := filepath.Join(root, "tmp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, fmt.Sprintf("accord-probetest-%d", os.Getpid()))
	build := func(pkg string) ([]byte, error) {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		return cmd.CombinedOutput()
	}
	out, err := build("github.com/accordlab/accord")
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe tests: the accord binary does not build, using the probe-only main instead:\n%s\n", out)
		if out, err := build("github.com/accordlab/accord/runners/probe/testdata/probecmd"); err != nil {
			return "", fmt.Errorf("build probe binary: %v\n%s", err, out)
		}
	}
	return bin, nil
}

// result of one probe invocation.
type result struct {
	stdout, stderr string
	code           int
}

// probeCmd prepares `accord probe ARGS` (optionally inside a network
// namespace).
func probeCmd(netns string, args ...string) *exec.Cmd {
	argv := append([]string{"probe"}, args...)
	if netns != "" {
		return exec.Command("ip", append([]string{"netns", "exec", netns, accordBin}, argv...)...)
	}
	return exec.Command(accordBin, argv...)
}

func runCmd(t *testing.T, cmd *exec.Cmd, timeout time.Duration) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not finish within %s\nstderr: %s", strings.Join(cmd.Args, " "), timeout, stderr.String())
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

func probe(t *testing.T, args ...string) result {
	t.Helper()
	needBinary(t)
	return runCmd(t, probeCmd("", args...), 90*time.Second)
}

// planOf makes a plan around steps.
func planOf(steps ...acceptance.StepSpec) wire.Plan {
	return wire.Plan{
		SchemaVersion: wire.PlanSchemaVersion,
		RunID:         42,
		Attempt:       1,
		Interim:       acceptance.Duration(time.Second),
		// The tests' fio files are under the temporary folder, which the
		// "host" declares as scratch space.
		WritePlaces: []string{os.TempDir()},
		Profile: acceptance.ProfileSpec{
			SchemaVersion: acceptance.ProfileSchemaVersion,
			Name:          "probe-test",
			Purpose:       acceptance.PurposeCustom,
			Repetitions:   1,
			Steps:         steps,
		},
	}
}

func runDir(t *testing.T, plan wire.Plan) string {
	t.Helper()
	dir := t.TempDir()
	b, err := json.MarshalIndent(plan, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, wire.PlanFile), b, 0o644))
	return dir
}

func events(t *testing.T, dir string) []wire.Event {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, wire.EventsFile))
	require.NoError(t, err)
	defer f.Close()
	var out []wire.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e wire.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), "event line %q", sc.Text())
		out = append(out, e)
	}
	require.NoError(t, sc.Err())
	for i, e := range out {
		require.Equal(t, int64(i+1), e.Seq, "seq increases by one")
	}
	return out
}

func eventsOfType(evs []wire.Event, typ string) []wire.Event {
	var out []wire.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func status(t *testing.T, dir string) wire.Status {
	t.Helper()
	st, err := readStatus(dir)
	require.NoError(t, err)
	return *st
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// launch starts the run detached and returns the probe's pid.
func launch(t *testing.T, netns, dir string) int {
	t.Helper()
	needBinary(t)
	r := runCmd(t, probeCmd(netns, "launch", "--dir", dir), 30*time.Second)
	require.Equal(t, 0, r.code, r.stderr)
	var out struct {
		PID int `json:"pid"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	require.Positive(t, out.PID)
	t.Cleanup(func() {
		// Whatever a failed test left running goes.
		_ = probeCmd("", "stop", "--dir", dir, "--grace", "1s").Run()
	})
	return out.PID
}

func sleepStep(name string, d time.Duration) acceptance.StepSpec {
	return acceptance.StepSpec{Name: name, Kind: acceptance.StepPause, Pause: &acceptance.PauseStep{Duration: acceptance.Duration(d)}}
}

func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
