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
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// guardianCommand is the internal subcommand of the fault guardian.
const guardianCommand = "fault-guardian"

// faultHandle is the qdisc handle the probe's faults use, so that removal
// deletes exactly the qdisc the probe added.
const faultHandle = "7acc:"

// guardianMargin is how long past its duration a guardian keeps a fault at
// the most, should the probe neither remove it nor die.
const guardianMargin = 30 * time.Second

var (
	ifaceRE      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@:-]{0,14}$`)
	controllerRE = regexp.MustCompile(`^nvme[0-9]{1,4}$`)
)

// faultSpec is what a guardian applies and later removes, as argument vectors.
type faultSpec struct {
	Action string     `json:"action"`
	Apply  [][]string `json:"apply"`
	Undo   [][]string `json:"undo"`
	// Module names the kernel module the action needs, for a clear error.
	Module string `json:"module,omitempty"`
}

func validateFault(f *acceptance.FaultStep) error {
	if f.Duration <= 0 {
		return errors.New("fault needs a positive duration")
	}
	if f.After < 0 {
		return errors.New("fault after must not be negative")
	}
	switch f.Action {
	case "netem":
		if !ifaceRE.MatchString(f.Interface) {
			return fmt.Errorf("netem needs a valid interface name, got %q", f.Interface)
		}
		if f.Delay <= 0 && f.LossPercent <= 0 {
			return errors.New("netem needs a delay or a loss percentage")
		}
		if f.LossPercent < 0 || f.LossPercent > 100 || math.IsNaN(f.LossPercent) {
			return fmt.Errorf("netem loss %v%% out of range 0..100", f.LossPercent)
		}
		if f.Delay > acceptance.Duration(time.Minute) {
			return fmt.Errorf("netem delay %s is over one minute", f.Delay)
		}
	case "rate-limit":
		if !ifaceRE.MatchString(f.Interface) {
			return fmt.Errorf("rate-limit needs a valid interface name, got %q", f.Interface)
		}
		if !(f.RateMbit >= 0.01 && f.RateMbit <= 4e6) {
			return fmt.Errorf("rate-limit rate_mbit %v out of range 0.01..4000000", f.RateMbit)
		}
	case "path-down":
		if !controllerRE.MatchString(f.Controller) {
			return fmt.Errorf("path-down needs a controller like nvme1, got %q", f.Controller)
		}
	default:
		return fmt.Errorf("fault action %q is not one of netem, rate-limit, path-down", f.Action)
	}
	return nil
}

// planFault turns a fault step into commands, checking the host first.
func planFault(f *acceptance.FaultStep) (faultSpec, error) {
	spec := faultSpec{Action: f.Action}
	switch f.Action {
	case "netem", "rate-limit":
		if _, err := exec.LookPath("tc"); err != nil {
			return spec, errors.New("tc (iproute2) is not installed on this host")
		}
		if _, err := os.Stat("/sys/class/net/" + f.Interface); err != nil {
			return spec, fmt.Errorf("interface %s does not exist on this host", f.Interface)
		}
		add := []string{"tc", "qdisc", "add", "dev", f.Interface, "root", "handle", faultHandle}
		if f.Action == "netem" {
			spec.Module = "sch_netem"
			add = append(add, "netem")
			if f.Delay > 0 {
				add = append(add, "delay", fmt.Sprintf("%dus", max(f.Delay.D().Microseconds(), 1)))
			}
			if f.LossPercent > 0 {
				add = append(add, "loss", fmt.Sprintf("%g%%", f.LossPercent))
			}
		} else {
			spec.Module = "sch_tbf"
			kbit := int64(math.Round(f.RateMbit * 1000))
			// The bucket must hold the largest packet (64 KiB on loopback)
			// and about 10 ms at the rate, or tbf drops what it should delay.
			burst := max(kbit*1000/8/100, 131072)
			add = append(add, "tbf", "rate", fmt.Sprintf("%dkbit", kbit), "burst", fmt.Sprint(burst), "latency", "100ms")
		}
		spec.Apply = [][]string{add}
		spec.Undo = [][]string{{"tc", "qdisc", "del", "dev", f.Interface, "root", "handle", faultHandle}}
	case "path-down":
		if _, err := exec.LookPath("nvme"); err != nil {
			return spec, errors.New("path-down needs nvme-cli (the nvme command), which is not installed on this host")
		}
		connect, err := reconnectArgs(f.Controller)
		if err != nil {
			return spec, err
		}
		spec.Apply = [][]string{{"nvme", "disconnect", "-d", f.Controller}}
		spec.Undo = [][]string{connect}
	default:
		return spec, fmt.Errorf("unknown fault action %q", f.Action)
	}
	return spec, nil
}

// reconnectArgs reads a fabrics controller's connect parameters from sysfs
// and builds the `nvme connect` that restores the path. It refuses the
// only path of a subsystem: taking it down is an outage, not a path fault.
func reconnectArgs(ctrl string) ([]string, error) {
	dir := "/sys/class/nvme/" + ctrl
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b))
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("path-down: controller %s does not exist on this host", ctrl)
	}
	transport, nqn := read("transport"), read("subsysnqn")
	if transport != "rdma" && transport != "tcp" && transport != "fc" {
		return nil, fmt.Errorf("path-down: controller %s uses transport %q; only fabrics paths (rdma, tcp, fc) can be reconnected", ctrl, transport)
	}
	paths := 0
	others, _ := filepath.Glob("/sys/class/nvme/nvme*/subsysnqn")
	for _, p := range others {
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == nqn {
			paths++
		}
	}
	if paths < 2 {
		return nil, fmt.Errorf("path-down: controller %s is the only path to %s; refusing to take it down", ctrl, nqn)
	}
	addr := map[string]string{}
	for _, kv := range strings.Split(read("address"), ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			addr[k] = v
		}
	}
	if addr["traddr"] == "" {
		return nil, fmt.Errorf("path-down: controller %s has no traddr in %s/address", ctrl, dir)
	}
	args := []string{"nvme", "connect", "-t", transport, "-a", addr["traddr"], "-n", nqn}
	if v := addr["trsvcid"]; v != "" {
		args = append(args, "-s", v)
	}
	if v := addr["host_traddr"]; v != "" {
		args = append(args, "-w", v)
	}
	if v := addr["host_iface"]; v != "" {
		args = append(args, "-f", v)
	}
	if v := read("hostnqn"); v != "" {
		args = append(args, "-q", v)
	}
	if v := read("hostid"); v != "" {
		args = append(args, "-I", v)
	}
	return args, nil
}

// commandRecord is one command a guardian ran.
type commandRecord struct {
	Argv   []string `json:"argv"`
	Output string   `json:"output,omitempty"`
	Error  string   `json:"error,omitempty"`
	At     string   `json:"at"`
}

// guardianReport is one line a guardian writes back: the result of applying
// or of removing the fault.
type guardianReport struct {
	Phase    string          `json:"phase"` // apply, undo
	OK       bool            `json:"ok"`
	Error    string          `json:"error,omitempty"`
	Reason   string          `json:"reason,omitempty"` // why the fault was removed
	Commands []commandRecord `json:"commands"`
}

// guardian is the probe's handle on a running guardian process.
type guardian struct {
	cmd   *exec.Cmd
	ctrl  *os.File // closing it tells the guardian to remove the fault
	res   *bufio.Reader
	resF  *os.File
	apply guardianReport
}

// startGuardian starts a guardian in its own session, which applies the
// fault and removes it when the probe closes its pipe, when the probe dies
// (the pipe closes with it, even on SIGKILL), or after maxHold at the latest.
func startGuardian(dir string, spec faultSpec, maxHold time.Duration) (*guardian, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("fault guardian: %w", err)
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	ctrlR, ctrlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("fault guardian: %w", err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		ctrlR.Close()
		ctrlW.Close()
		return nil, fmt.Errorf("fault guardian: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, wire.LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fault guardian: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, "probe", guardianCommand, "--dir", dir, "--max", maxHold.String(), "--spec", string(specJSON))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{ctrlR, resW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		ctrlR.Close()
		ctrlW.Close()
		resR.Close()
		resW.Close()
		return nil, fmt.Errorf("fault guardian: start: %w", err)
	}
	ctrlR.Close()
	resW.Close()
	g := &guardian{cmd: cmd, ctrl: ctrlW, res: bufio.NewReader(resR), resF: resR}
	rep, err := g.readReport(60 * time.Second)
	if err == nil && rep.Phase != "apply" {
		err = fmt.Errorf("fault guardian: expected the apply report, got %q", rep.Phase)
	}
	if err != nil || !rep.OK {
		g.ctrl.Close()
		g.wait()
		if err != nil {
			return nil, err
		}
		return nil, errors.New(rep.Error)
	}
	g.apply = rep
	return g, nil
}

func (g *guardian) readReport(timeout time.Duration) (guardianReport, error) {
	var rep guardianReport
	_ = g.resF.SetReadDeadline(time.Now().Add(timeout))
	line, err := g.res.ReadBytes('\n')
	if err != nil {
		return rep, fmt.Errorf("fault guardian: no report: %w", err)
	}
	if err := json.Unmarshal(line, &rep); err != nil {
		return rep, fmt.Errorf("fault guardian: bad report: %w", err)
	}
	return rep, nil
}

// remove tells the guardian to remove the fault and waits for its report.
func (g *guardian) remove() (guardianReport, error) {
	g.ctrl.Close()
	rep, err := g.readReport(2 * time.Minute)
	g.wait()
	if err != nil {
		return rep, err
	}
	if !rep.OK {
		return rep, fmt.Errorf("removing the fault failed: %s", rep.Error)
	}
	return rep, nil
}

func (g *guardian) wait() {
	done := make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
	}
	g.resF.Close()
}

// cmdGuardian is the guardian process: fd 3 is the probe's control pipe
// (EOF: remove the fault), fd 4 the report pipe back to the probe.
func cmdGuardian(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags(guardianCommand, stderr)
	dir := fl.String("dir", "", "run folder (identifies the guardian)")
	maxHold := fl.Duration("max", time.Minute, "remove the fault after this long at the latest")
	specJSON := fl.String("spec", "", "fault spec as JSON")
	if err := parseFlags(fl, args); err != nil {
		return usageError(stderr, err)
	}
	_ = dir
	var spec faultSpec
	if err := json.Unmarshal([]byte(*specJSON), &spec); err != nil {
		return fail(stderr, ExitUsage, "guardian: bad spec: %v", err)
	}
	ctrl := os.NewFile(3, "control")
	res := os.NewFile(4, "report")
	if ctrl == nil || res == nil {
		return fail(stderr, ExitUsage, "guardian: started without its pipes")
	}
	report := func(r guardianReport) {
		b, _ := json.Marshal(r)
		_, _ = res.Write(append(b, '\n')) // the probe may be gone: then only the log has it
		fmt.Fprintf(stderr, "accord probe %s: %s\n", guardianCommand, b)
	}
	apply := guardianReport{Phase: "apply", OK: true}
	for _, argv := range spec.Apply {
		rec := runFaultCommand(argv)
		apply.Commands = append(apply.Commands, rec)
		if rec.Error != "" {
			apply.OK = false
			apply.Error = explainFaultError(spec, rec)
			break
		}
	}
	report(apply)
	if !apply.OK {
		return ExitError
	}
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, ctrl)
		close(closed)
	}()
	reason := "the probe asked for removal"
	select {
	case <-closed:
	case <-ctx.Done():
		reason = "the guardian was signalled"
	case <-time.After(*maxHold):
		reason = fmt.Sprintf("the fault reached its time limit of %s", *maxHold)
	}
	undo := guardianReport{Phase: "undo", OK: true, Reason: reason}
	for _, argv := range spec.Undo {
		var rec commandRecord
		for attempt := range 3 {
			rec = runFaultCommand(argv)
			if rec.Error == "" || alreadyRemoved(rec) {
				rec.Error = ""
				break
			}
			time.Sleep(time.Duration(attempt+1) * time.Second)
		}
		undo.Commands = append(undo.Commands, rec)
		if rec.Error != "" {
			undo.OK = false
			undo.Error = fmt.Sprintf("%s: %s", strings.Join(rec.Argv, " "), rec.Error)
		}
	}
	report(undo)
	if !undo.OK {
		return ExitError
	}
	return ExitOK
}

func runFaultCommand(argv []string) commandRecord {
	rec := commandRecord{Argv: argv, At: nowRFC3339()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	rec.Output = strings.TrimSpace(out.String())
	if err != nil {
		rec.Error = err.Error()
		if rec.Output != "" {
			rec.Error += ": " + rec.Output
		}
	}
	return rec
}

// alreadyRemoved recognises tc's answers when the qdisc is gone already.
func alreadyRemoved(rec commandRecord) bool {
	return len(rec.Argv) > 2 && rec.Argv[0] == "tc" && rec.Argv[2] == "del" &&
		(strings.Contains(rec.Output, "Invalid handle") || strings.Contains(rec.Output, "handle of zero") || strings.Contains(rec.Output, "Cannot find"))
}

// explainFaultError names the missing kernel module when tc does not know
// the qdisc, so a missing netem never passes for a fault applied.
func explainFaultError(spec faultSpec, rec commandRecord) string {
	cmd := strings.Join(rec.Argv, " ")
	if spec.Module != "" && (strings.Contains(rec.Output, "qdisc kind is unknown") || strings.Contains(rec.Output, "Unknown qdisc")) {
		return fmt.Sprintf("%s is not available in this kernel: load the kernel module %s (modprobe %s) or use a kernel built with it (%s: %s)",
			strings.TrimPrefix(spec.Module, "sch_"), spec.Module, spec.Module, cmd, rec.Output)
	}
	return fmt.Sprintf("%s: %s", cmd, rec.Error)
}
