package probe

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/wire"
)

func fioStep(name, target, rw string) acceptance.StepSpec {
	return acceptance.StepSpec{Name: name, Kind: acceptance.StepFio, Fio: &acceptance.FioStep{
		RW: rw, BlockSize: 4096, IODepth: 4, NumJobs: 1, Size: 8 << 20,
		Runtime: acceptance.Duration(2 * time.Second), IOEngine: "psync", Target: target,
	}}
}

func TestFioStep(t *testing.T) {
	t.Parallel()
	needBinary(t)
	data := filepath.Join(t.TempDir(), "data.bin")
	plan := planOf(fioStep("randrw", data, "randrw"))
	plan.Profile.Warmup = acceptance.Duration(time.Second)
	plan.StopLossMetrics = []string{acceptance.MetricReadCLat, acceptance.MetricCPUUtil}
	dir := runDir(t, plan)

	r := probe(t, "run", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)

	stepDir := filepath.Join(dir, "out", "01-randrw", "rep-1")
	job, err := os.ReadFile(filepath.Join(stepDir, wire.FioJobFile))
	require.NoError(t, err)
	require.Contains(t, string(job), "ramp_time=1000ms")
	require.Contains(t, string(job), "filename="+data)

	// fio.json is fio's final json+ report alone.
	raw, err := os.ReadFile(filepath.Join(stepDir, wire.FioOutputFile))
	require.NoError(t, err)
	var report struct {
		Version string `json:"fio version"`
		Jobs    []struct {
			Read struct {
				TotalIOs int64 `json:"total_ios"`
				Clat     struct {
					Bins map[string]int64 `json:"bins"`
				} `json:"clat_ns"`
			} `json:"read"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(raw, &report), "fio.json holds one JSON document")
	require.NotEmpty(t, report.Version)
	require.Len(t, report.Jobs, 1)
	require.Positive(t, report.Jobs[0].Read.TotalIOs)
	require.NotEmpty(t, report.Jobs[0].Read.Clat.Bins, "json+ has latency bins")
	require.FileExists(t, filepath.Join(stepDir, fioStatusFile))

	tel, err := os.ReadFile(filepath.Join(stepDir, wire.TelemetryFile))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(tel)), "\n")
	require.GreaterOrEqual(t, len(lines), 2, "a telemetry sample per second")
	var sample wire.TelemetrySample
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &sample))
	require.Positive(t, sample.MemUsedBytes)

	evs := events(t, dir)
	require.NotEmpty(t, eventsOfType(evs, wire.EventProgress))
	require.Len(t, eventsOfType(evs, wire.EventStepStart), 1)
	interims := eventsOfType(evs, wire.EventInterim)
	require.NotEmpty(t, interims, "interim metrics during the fio run")
	in := interims[len(interims)-1].Interim
	require.Equal(t, "randrw", in.Step)
	require.Equal(t, 1, in.Repetition)
	readIOPS := in.Metrics[acceptance.MetricReadIOPS]
	require.NotNil(t, readIOPS.Rate)
	require.Positive(t, *readIOPS.Rate)
	clat := in.Metrics[acceptance.MetricReadCLat]
	require.Positive(t, clat.N)
	require.Positive(t, clat.P99)
	require.GreaterOrEqual(t, clat.Max, clat.P99)
	require.Contains(t, in.Metrics, acceptance.MetricWriteBW)

	results := eventsOfType(evs, wire.EventStepResult)
	require.Len(t, results, 1)
	res := results[0].Result
	require.Empty(t, res.Error)
	require.Equal(t, "fio-json", res.Format)
	require.Equal(t, "out/01-randrw/rep-1", res.Dir)
	require.Equal(t, "out/01-randrw/rep-1/fio.json", res.Files[0], "main output first")
	require.Contains(t, res.Files, "out/01-randrw/rep-1/telemetry.jsonl")

	last := evs[len(evs)-1]
	require.Equal(t, wire.EventDone, last.Type)
	require.Equal(t, wire.StateDone, last.Status.State)
	st := status(t, dir)
	require.Equal(t, wire.StateDone, st.State)
	require.Equal(t, 0, st.ExitCode)
	require.FileExists(t, filepath.Join(dir, wire.FactsFile))
}

// loopDevice attaches a loop device to a fresh image file, or skips.
func loopDevice(t *testing.T) (dev, image string) {
	t.Helper()
	image = filepath.Join(t.TempDir(), "disk.img")
	require.NoError(t, os.WriteFile(image, []byte(strings.Repeat("accord-probe-test-pattern\n", 1<<16)), 0o600))
	out, err := exec.Command("losetup", "--find", "--show", image).CombinedOutput()
	if err != nil {
		return "", ""
	}
	dev = strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "--detach", dev).Run() })
	return dev, image
}

func fileSum(t *testing.T, path string) [32]byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

func TestFioRefusesToWriteToABlockDevice(t *testing.T) {
	t.Parallel()
	needBinary(t)
	dev, image := loopDevice(t)
	if dev == "" {
		// No loop device here: check the decision on a real device node
		// (stat only, never written).
		for _, d := range []string{"/dev/loop0", "/dev/vda", "/dev/sda", "/dev/nvme0n1"} {
			if fi, err := os.Stat(d); err == nil && fi.Mode()&os.ModeDevice != 0 {
				err := refuseDeviceWrite(d, fi.Mode(), "randwrite", false, true)
				require.ErrorContains(t, err, "not marked destructive")
				return
			}
		}
		t.Skip("no loop device can be attached and no block device node to stat")
	}
	before := fileSum(t, image)

	cases := []struct {
		name        string
		destructive bool
		allow       bool
		want        string
	}{
		{"not-destructive", false, true, "not marked destructive"},
		{"host-forbids", true, false, "does not allow destructive steps"},
	}
	t.Run("refused", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				step := fioStep("write-dev", dev, "randwrite")
				step.Fio.Destructive = c.destructive
				step.Fio.Size = 1 << 20
				plan := planOf(step)
				plan.AllowDestructive = c.allow
				dir := runDir(t, plan)
				r := probe(t, "run", "--dir", dir)
				require.Equal(t, ExitFailed, r.code)
				st := status(t, dir)
				require.Equal(t, wire.StateFailed, st.State)
				require.Contains(t, st.Reason, "refusing to write to device "+dev)
				require.Contains(t, st.Reason, c.want)
				require.NoFileExists(t, filepath.Join(dir, "out", "01-write-dev", "rep-1", wire.FioOutputFile), "fio never ran")
			})
		}
	})
	require.Equal(t, before, fileSum(t, image), "the device was not written")

	// Reading a block device is always allowed; so is writing one when
	// both the step and the host say so (here the device is our own loop
	// device over a scratch file).
	step := fioStep("write-dev", dev, "randwrite")
	step.Fio.Destructive = true
	step.Fio.Size = 1 << 20
	step.Fio.Runtime = acceptance.Duration(time.Second)
	plan := planOf(step)
	plan.AllowDestructive = true
	undeclared := runDir(t, plan)
	r := probe(t, "run", "--dir", undeclared)
	require.Equal(t, ExitFailed, r.code)
	require.Contains(t, status(t, undeclared).Reason, "does not declare it among the places tests may write")
	require.Equal(t, before, fileSum(t, image), "an undeclared device is not written")
	plan.WritePlaces = append(plan.WritePlaces, dev)
	dir := runDir(t, plan)
	r = probe(t, "run", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.NotEqual(t, before, fileSum(t, image), "the destructive step did write")
}

func TestRefuseDeviceWriteDecision(t *testing.T) {
	t.Parallel()
	dev := os.ModeDevice
	chr := os.ModeDevice | os.ModeCharDevice
	for _, c := range []struct {
		mode               os.FileMode
		rw                 string
		destructive, allow bool
		refused            bool
	}{
		{0, "write", false, false, false},  // a regular file
		{dev, "read", false, false, false}, // reading a device
		{dev, "randread", false, false, false},
		{dev, "write", false, true, true},
		{dev, "randrw", false, true, true},
		{dev, "rw", true, false, true},
		{dev, "randwrite", true, true, false},
		{chr, "randwrite", false, true, true}, // NVMe generic char device
	} {
		err := refuseDeviceWrite("/dev/x", c.mode, c.rw, c.destructive, c.allow)
		require.Equal(t, c.refused, err != nil, "%+v: %v", c, err)
	}
}

func TestCommandStep(t *testing.T) {
	t.Parallel()
	needBinary(t)
	plan := planOf(
		acceptance.StepSpec{Name: "drop", Kind: acceptance.StepDropCaches},
		acceptance.StepSpec{Name: "hello", Kind: acceptance.StepCommand, Command: &acceptance.CommandStep{
			Program: "printf", Args: []string{"%s; $(id)\n", "hello world"}, Format: "text"}},
		acceptance.StepSpec{Name: "own-file", Kind: acceptance.StepCommand, Command: &acceptance.CommandStep{
			Program: "cp", Args: []string{"/etc/os-release", "result.txt"}, Format: "text", OutputFile: "result.txt"}},
	)
	plan.Profile.Repetitions = 2
	dir := runDir(t, plan)
	r := probe(t, "run", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)

	out, err := os.ReadFile(filepath.Join(dir, "out", "02-hello", "rep-2", "output.txt"))
	require.NoError(t, err)
	require.Equal(t, "hello world; $(id)\n", string(out), "arguments are passed as they are, no shell")
	require.FileExists(t, filepath.Join(dir, "out", "03-own-file", "rep-1", "result.txt"))
	require.FileExists(t, filepath.Join(dir, "out", "03-own-file", "rep-1", "stdout.txt"))

	results := eventsOfType(events(t, dir), wire.EventStepResult)
	require.Len(t, results, 6, "3 steps × 2 repetitions")
	for _, e := range results {
		require.Empty(t, e.Result.Error)
	}
	require.Equal(t, acceptance.StepDropCaches, results[0].Result.Kind)
	require.Equal(t, "text", results[1].Result.Format)
	require.Equal(t, "out/02-hello/rep-1/output.txt", results[1].Result.Files[0])
	require.Equal(t, "out/03-own-file/rep-1/result.txt", results[2].Result.Files[0])
	require.Equal(t, 2, results[5].Result.Repetition)
}

func TestCommandFailureFailsTheRun(t *testing.T) {
	t.Parallel()
	needBinary(t)
	dir := runDir(t, planOf(
		acceptance.StepSpec{Name: "bad", Kind: acceptance.StepCommand, Command: &acceptance.CommandStep{
			Program: "ls", Args: []string{"/no/such/path"}, Format: "text"}},
		sleepStep("never", time.Hour),
	))
	r := probe(t, "run", "--dir", dir)
	require.Equal(t, ExitFailed, r.code)
	st := status(t, dir)
	require.Equal(t, wire.StateFailed, st.State)
	require.Contains(t, st.Reason, "step bad: ls failed: exit status 2")
	require.Contains(t, st.Reason, "No such file")
	require.NoDirExists(t, filepath.Join(dir, "out", "02-never"), "the run stops at the failed step")
}

// processesWithArg lists live processes that have arg in their command line.
func processesWithArg(arg string) []int {
	var out []int
	for _, p := range processes() {
		for _, a := range cmdline(p.PID) {
			if a == arg {
				out = append(out, p.PID)
			}
		}
	}
	return out
}

func TestStepTimeoutKillsTheTreeAndFailsTheRun(t *testing.T) {
	t.Parallel()
	needBinary(t)
	marker := "301." + strconv.Itoa(os.Getpid())
	dir := runDir(t, planOf(acceptance.StepSpec{
		Name: "stuck", Kind: acceptance.StepCommand, Timeout: acceptance.Duration(time.Second),
		// A child that ignores SIGTERM and a grandchild: both must go.
		Command: &acceptance.CommandStep{Program: "sh", Format: "text",
			Args: []string{"-c", "trap '' TERM; sleep " + marker + " & sleep " + marker + "; wait", "stuck"}},
	}))
	start := time.Now()
	r := probe(t, "run", "--dir", dir)
	require.Equal(t, ExitFailed, r.code, r.stderr)
	require.Less(t, time.Since(start), 200*time.Second, "killed at its limit, not after its 301 s sleep")
	st := status(t, dir)
	require.Equal(t, wire.StateFailed, st.State)
	require.Equal(t, "step stuck exceeded its time limit of 1s", st.Reason)
	results := eventsOfType(events(t, dir), wire.EventStepResult)
	require.Len(t, results, 1)
	require.Equal(t, st.Reason, results[0].Result.Error)
	require.Empty(t, processesWithArg(marker), "no process of the step is left")
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	needBinary(t)
	plan := planOf(sleepStep("long", time.Hour))
	plan.RunTimeout = acceptance.Duration(time.Second)
	dir := runDir(t, plan)
	r := probe(t, "run", "--dir", dir)
	require.Equal(t, ExitTimeout, r.code, r.stderr)
	st := status(t, dir)
	require.Equal(t, wire.StateTimeout, st.State)
	require.Equal(t, "the run exceeded its time limit of 1s", st.Reason)
}

func TestSIGTERMCancelsTheRun(t *testing.T) {
	t.Parallel()
	needBinary(t)
	marker := "302." + strconv.Itoa(os.Getpid())
	dir := runDir(t, planOf(acceptance.StepSpec{Name: "wait", Kind: acceptance.StepCommand,
		Command: &acceptance.CommandStep{Program: "sleep", Args: []string{marker}, Format: "text"}}))
	cmd := probeCmd("", "run", "--dir", dir)
	require.NoError(t, cmd.Start())
	waitFor(t, 60*time.Second, "the command to start", func() bool { return len(processesWithArg(marker)) > 0 })
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err := cmd.Wait()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr)
	require.Equal(t, ExitCancelled, exitErr.ExitCode())
	st := status(t, dir)
	require.Equal(t, wire.StateCancelled, st.State)
	require.Empty(t, processesWithArg(marker))
	evs := events(t, dir)
	require.Equal(t, wire.EventDone, evs[len(evs)-1].Type)
}

func TestBadPlanFailsClearly(t *testing.T) {
	t.Parallel()
	needBinary(t)
	step := fioStep("bad", "relative/path", "randread")
	dir := runDir(t, planOf(step))
	r := probe(t, "launch", "--dir", dir)
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, `fio target "relative/path" must be an absolute path`)
	require.NoFileExists(t, filepath.Join(dir, wire.LaunchFile))

	r = probe(t, "run", "--dir", dir)
	require.Equal(t, ExitFailed, r.code)
	require.Contains(t, status(t, dir).Reason, "must be an absolute path")
}

func TestFactsCommand(t *testing.T) {
	t.Parallel()
	needBinary(t)
	r := probe(t, "facts")
	require.Equal(t, 0, r.code, r.stderr)
	var f facts.Facts
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &f))
	require.NotEmpty(t, f.Kernel.Release.Value)
	require.True(t, f.CPU.Present)
	if _, err := exec.LookPath("nvme"); err != nil {
		require.True(t, f.NVMe.CLIList.Absent, "nvme-cli is absent, not failed")
	}
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		require.True(t, f.GPU.Source.Absent, "nvidia-smi is absent, not failed")
		require.Empty(t, f.GPU.GPUs)
	}
	if _, err := os.Stat("/sys/class/nvme"); err != nil {
		require.Empty(t, f.NVMe.Controllers)
	}

	out := filepath.Join(t.TempDir(), "facts.json")
	r = probe(t, "facts", "--out", out)
	require.Equal(t, 0, r.code, r.stderr)
	var summary struct {
		Out    string   `json:"out"`
		Absent []string `json:"absent"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &summary))
	require.Equal(t, out, summary.Out)
	require.FileExists(t, out)
}
