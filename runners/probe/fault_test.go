package probe

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

var netnsSeq atomic.Int64

// netns creates a network namespace with its loopback up, or skips when
// namespaces cannot be made here. Faults are only ever applied inside it.
func netns(t *testing.T) string {
	t.Helper()
	needBinary(t)
	name := fmt.Sprintf("accordprobe-%d-%d", os.Getpid(), netnsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput()
	require.NoError(t, err, string(out))
	return name
}

// qdisc shows the root qdisc of lo in the namespace.
func qdisc(t *testing.T, ns string) string {
	out, err := exec.Command("tc", "-n", ns, "qdisc", "show", "dev", "lo").CombinedOutput()
	require.NoError(t, err, string(out))
	return string(out)
}

func hasTBF(t *testing.T, ns string) bool { return strings.Contains(qdisc(t, ns), "tbf "+faultHandle) }

func rateLimit(name string, d time.Duration) acceptance.StepSpec {
	return acceptance.StepSpec{Name: name, Kind: acceptance.StepFault, Fault: &acceptance.FaultStep{
		Action: "rate-limit", Interface: "lo", RateMbit: 8, Duration: acceptance.Duration(d)}}
}

func readFaultLog(t *testing.T, path string) faultLog {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var l faultLog
	require.NoError(t, json.Unmarshal(b, &l))
	return l
}

func TestRateLimitFaultIsAppliedAndRemoved(t *testing.T) {
	t.Parallel()
	ns := netns(t)
	dir := runDir(t, planOf(rateLimit("slow-lo", 4*time.Second)))
	cmd := probeCmd(ns, "run", "--dir", dir)
	require.NoError(t, cmd.Start())
	var seen string
	waitFor(t, 60*time.Second, "the tbf qdisc", func() bool {
		seen = qdisc(t, ns)
		return strings.Contains(seen, "tbf "+faultHandle)
	})
	require.Contains(t, seen, "rate 8Mbit")
	require.NoError(t, cmd.Wait())
	require.False(t, hasTBF(t, ns), "the fault is removed: %s", qdisc(t, ns))
	require.Equal(t, wire.StateDone, status(t, dir).State)

	l := readFaultLog(t, filepath.Join(dir, "out", "01-slow-lo", "rep-1", faultLogFile))
	require.True(t, l.Apply.OK)
	require.True(t, l.Undo.OK)
	require.Equal(t, "the probe asked for removal", l.Undo.Reason)
	require.Equal(t, []string{"tc", "qdisc", "del", "dev", "lo", "root", "handle", faultHandle}, l.Undo.Commands[0].Argv)
	require.Empty(t, guardianProcesses(dir))
}

func TestFaultIsRemovedWhenTheProbeIsKilled(t *testing.T) {
	t.Parallel()
	ns := netns(t)
	dir := runDir(t, planOf(rateLimit("slow-lo", time.Minute)))
	pid := launch(t, ns, dir)
	waitFor(t, 60*time.Second, "the tbf qdisc", func() bool { return hasTBF(t, ns) })
	require.NotEmpty(t, guardianProcesses(dir))

	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	waitFor(t, 30*time.Second, "the guardian to remove the qdisc", func() bool { return !hasTBF(t, ns) })
	waitFor(t, 30*time.Second, "the guardian to exit", func() bool { return len(guardianProcesses(dir)) == 0 })

	r := probe(t, "tail", "--dir", dir, "--offset", "0")
	require.Equal(t, ExitCrashed, r.code, "killed without a status")
	log, err := os.ReadFile(filepath.Join(dir, wire.LogFile))
	require.NoError(t, err)
	require.Contains(t, string(log), `"phase":"undo","ok":true,"reason":"the probe asked for removal"`)
}

// A killed probe's fault guardian removes the fault after the probe is
// gone: until it has, the run is not over on the host. The tail (whose end
// frees the host for the next run) waits for it, and another run sees the
// folder as active meanwhile. The guardian is held still (SIGSTOP) to make
// the wait last; the tail said "crashed" at once before.
func TestTailWaitsForTheFaultToBeRemoved(t *testing.T) {
	t.Parallel()
	ns := netns(t)
	dir := runDir(t, planOf(rateLimit("slow-lo", time.Minute)))
	pid := launch(t, ns, dir)
	waitFor(t, 60*time.Second, "the tbf qdisc", func() bool { return hasTBF(t, ns) })
	guardians := guardianProcesses(dir)
	require.Len(t, guardians, 1)
	require.NoError(t, syscall.Kill(guardians[0].PID, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(guardians[0].PID, syscall.SIGCONT) })
	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
	waitFor(t, 10*time.Second, "the probe's processes to go", func() bool {
		l, err := readLaunch(dir)
		return err == nil && !l.running()
	})

	tail := probeCmd("", "tail", "--dir", dir, "--offset", "0")
	var stderr strings.Builder
	tail.Stderr = &stderr
	require.NoError(t, tail.Start())
	ended := make(chan error, 1)
	go func() { ended <- tail.Wait() }()
	select {
	case err := <-ended:
		t.Fatalf("the tail ended (%v: %s) while the fault is still on the host: %s", err, stderr.String(), qdisc(t, ns))
	case <-time.After(2 * time.Second): // ten polls of the tail
	}
	require.True(t, hasTBF(t, ns), "the fault is still applied")
	other := filepath.Join(filepath.Dir(dir), "other-1")
	require.NotEmpty(t, activeRunFolders(filepath.Join(filepath.Dir(dir), "*"), other, "", 0), "a run beside it sees it active")

	require.NoError(t, syscall.Kill(guardians[0].PID, syscall.SIGCONT))
	select {
	case err := <-ended:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		require.Equal(t, ExitCrashed, exit.ExitCode(), stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("the tail did not end once the guardian removed the fault")
	}
	require.False(t, hasTBF(t, ns), "the fault was removed before the tail ended")
	require.Empty(t, activeRunFolders(filepath.Join(filepath.Dir(dir), "*"), other, "", 0))
}

func TestStopRemovesTheFault(t *testing.T) {
	t.Parallel()
	ns := netns(t)
	dir := runDir(t, planOf(rateLimit("slow-lo", time.Minute)))
	launch(t, ns, dir)
	waitFor(t, 60*time.Second, "the tbf qdisc", func() bool { return hasTBF(t, ns) })
	r := probe(t, "stop", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"signalled":true,"killed":false,"remaining":0}`, r.stdout)
	require.False(t, hasTBF(t, ns))
	st := status(t, dir)
	require.Equal(t, wire.StateCancelled, st.State)
	results := eventsOfType(events(t, dir), wire.EventStepResult)
	require.Len(t, results, 1)
	require.Equal(t, errCancelled.Error(), results[0].Result.Error)
}

func TestFaultDuringALaterStep(t *testing.T) {
	t.Parallel()
	ns := netns(t)
	fault := rateLimit("slow-lo", 2*time.Second)
	fault.Fault.During = "load"
	fault.Fault.After = acceptance.Duration(time.Second)
	load := acceptance.StepSpec{Name: "load", Kind: acceptance.StepCommand, Command: &acceptance.CommandStep{
		Program: "sh", Format: "text",
		// Samples the qdisc every 100 ms while the fault comes and goes.
		Args: []string{"-c", "for i in $(seq 40); do tc qdisc show dev lo; sleep 0.1; done"}}}
	dir := runDir(t, planOf(fault, load))
	r := runCmd(t, probeCmd(ns, "run", "--dir", dir), 60*time.Second)
	require.Equal(t, 0, r.code, r.stderr)
	out, err := os.ReadFile(filepath.Join(dir, "out", "02-load", "rep-1", "output.txt"))
	require.NoError(t, err)
	seen := strings.Count(string(out), "tbf "+faultHandle)
	require.Positive(t, seen, "the fault was on during the step")
	require.Less(t, seen, 40, "and not all the time")
	require.False(t, hasTBF(t, ns))

	evs := events(t, dir)
	var order []string
	for _, e := range evs {
		if e.Type == wire.EventStepResult {
			order = append(order, e.Result.Step)
		}
	}
	require.Equal(t, []string{"slow-lo", "load"}, order, "the fault ends within its step")
	l := readFaultLog(t, filepath.Join(dir, "out", "01-slow-lo", "rep-1", faultLogFile))
	require.True(t, l.Undo.OK)
}

func TestNetemMissingIsAClearError(t *testing.T) {
	t.Parallel()
	ns := netns(t)
	if out, err := exec.Command("tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").CombinedOutput(); err == nil {
		_ = exec.Command("tc", "-n", ns, "qdisc", "del", "dev", "lo", "root").Run()
		t.Skip("this kernel has netem; the missing-module error cannot be seen here")
	} else {
		require.Contains(t, string(out), "qdisc kind is unknown")
	}
	dir := runDir(t, planOf(acceptance.StepSpec{Name: "delay", Kind: acceptance.StepFault, Fault: &acceptance.FaultStep{
		Action: "netem", Interface: "lo", Delay: acceptance.Duration(5 * time.Millisecond), LossPercent: 1, Duration: acceptance.Duration(time.Second)}}))
	r := runCmd(t, probeCmd(ns, "run", "--dir", dir), 60*time.Second)
	require.Equal(t, ExitFailed, r.code)
	st := status(t, dir)
	require.Equal(t, wire.StateFailed, st.State)
	require.Contains(t, st.Reason, "fault delay: netem is not available in this kernel: load the kernel module sch_netem")
	require.Empty(t, guardianProcesses(dir))
}

func TestPathDownNeedsNVMeCLI(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("nvme"); err == nil {
		t.Skip("nvme-cli is installed here")
	}
	_, err := planFault(&acceptance.FaultStep{Action: "path-down", Controller: "nvme1", Duration: acceptance.Duration(time.Second)})
	require.ErrorContains(t, err, "path-down needs nvme-cli")
}

func TestValidateFault(t *testing.T) {
	t.Parallel()
	ok := acceptance.FaultStep{Action: "netem", Interface: "eth0", Delay: acceptance.Duration(time.Millisecond), Duration: acceptance.Duration(time.Second)}
	require.NoError(t, validateFault(&ok))
	for _, bad := range []acceptance.FaultStep{
		{Action: "netem", Interface: "eth0; rm -rf /", Delay: 1, Duration: acceptance.Duration(time.Second)},
		{Action: "netem", Interface: "eth0", Duration: acceptance.Duration(time.Second)},
		{Action: "netem", Interface: "eth0", LossPercent: 101, Duration: acceptance.Duration(time.Second)},
		{Action: "rate-limit", Interface: "eth0", Duration: acceptance.Duration(time.Second)},
		{Action: "path-down", Controller: "/dev/nvme1", Duration: acceptance.Duration(time.Second)},
		{Action: "reboot", Duration: acceptance.Duration(time.Second)},
		{Action: "netem", Interface: "eth0", Delay: 1},
	} {
		require.Error(t, validateFault(&bad), "%+v", bad)
	}
}
