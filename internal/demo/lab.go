// Package demo is the demo installation of development mode: the lab (a
// local sshd and two inference emulators standing for two storage paths,
// which outlive a crashed server and are used again) and the seed (two
// organisations, a program, users of every role, profiles, gate sets, a
// rollout plan, and a baseline and a candidate run through the lab).
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/accordlab/accord/runners/sshrun"
)

// Lab is the lab `make run` brings up in dev mode: a local sshd that
// stands for a lab host, and two inference emulators that stand for two
// storage paths of the KV cache (a slower "local NVMe" one and a faster
// "NVMe-oF array" one). Everything runs as the current user on 127.0.0.1.
// Like a real lab, it does not die with the server: its processes run in
// sessions of their own (a crashed server's runs keep measuring live
// endpoints, and its successor takes them over), the next start finds them
// through LabStateFile and uses them again, and a clean shutdown stops
// them.
type Lab struct {
	dir          string
	sshPort      int
	hostKey      ssh.PublicKey
	clientKey    []byte // OpenSSH PEM, sealed into the host row
	user         string
	slowURL      string // emulator on the slower path
	fastURL      string // emulator on the faster path
	fioTarget    string // a file for fio steps
	stepDuration time.Duration
	fastPort     int
	slowPort     int
	// reused names the processes found running from an earlier start.
	reused []string

	mu    sync.Mutex
	log   *slog.Logger
	prev  map[string]Process    // from LabStateFile, by name
	procs []Process             // this start's, in start order
	exits map[int]chan struct{} // closed when a child started here exits
}

// LabStateFile, in the lab's folder, lists its running processes.
const LabStateFile = "lab.json"

// Process is one process of the demo lab, as recorded in LabStateFile:
// it is the same process later only if its pid is alive with the same
// start time and an executable that was not replaced since. (Not by its
// command line: sshd rewrites its own.)
type Process struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// StartTicks is the process's start time (/proc/PID/stat field 22), so
	// that a recycled pid is not taken for it.
	StartTicks uint64   `json:"start_ticks"`
	Argv       []string `json:"argv"`
	Addr       string   `json:"addr"` // where it answers
}

// sshdPath is OpenSSH's server, started by its absolute path (it re-execs
// itself for every connection).
const sshdPath = "/usr/sbin/sshd"

// StartLab starts the demo's processes; stop ends them.
// LabConfig is where the demo lab lives and listens.
type LabConfig struct {
	DataDir  string // the lab's files go in DataDir/demo
	SSHPort  int    // the lab host's sshd on 127.0.0.1
	Ports    [2]int // the emulators: the NVMe-oF path, the local-NVMe path
	ProbeDir string // where the accord binaries for lab hosts are (the emulators run one)
	// StepDuration is how long each repetition of the TTFT profiles' step
	// runs, DemoWarmup included (DefaultStepDuration when zero).
	StepDuration time.Duration
}

// The demo's TTFT profiles: each repetition warms up for DemoWarmup, then
// measures for the rest of its step's duration.
const (
	DefaultStepDuration = 15 * time.Second
	DemoWarmup          = 2 * time.Second
)

func StartLab(ctx context.Context, cfg LabConfig, log *slog.Logger) (*Lab, error) {
	dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "demo"))
	if err != nil {
		return nil, err
	}
	lab := &Lab{dir: dir, sshPort: cfg.SSHPort, fastPort: cfg.Ports[0], slowPort: cfg.Ports[1], log: log, stepDuration: cfg.StepDuration,
		exits: map[int]chan struct{}{}}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	lab.user = u.Username
	for _, d := range []string{"sshd", "home", "kv", "fio", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if lab.prev, err = ReadLabState(dir); err != nil {
		log.Warn("demo lab: the record of an earlier start is unreadable; starting afresh", "err", err)
	}
	lab.fioTarget = filepath.Join(dir, "fio", "kv-blocks.dat")
	if err := lab.startSSHD(ctx, log); err != nil {
		lab.Stop()
		return nil, err
	}
	if err := lab.startEmulators(ctx, log, cfg.ProbeDir); err != nil {
		lab.Stop()
		return nil, err
	}
	// What an earlier start left and this one does not use (its
	// configuration changed) goes.
	for name, p := range lab.prev {
		if !lab.has(name) && p.Running() {
			stopProcess(p, nil)
		}
	}
	if err := lab.writeState(); err != nil {
		lab.Stop()
		return nil, err
	}
	if len(lab.reused) > 0 {
		log.Info("demo lab: reusing what an earlier start left running (it outlived that server)", "processes", strings.Join(lab.reused, ", "))
	}
	return lab, nil
}

// ReadLabState reads LabStateFile (nothing when there is none).
func ReadLabState(dir string) (map[string]Process, error) {
	out := map[string]Process{}
	b, err := os.ReadFile(filepath.Join(dir, LabStateFile))
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	var procs []Process
	if err := json.Unmarshal(b, &procs); err != nil {
		return out, fmt.Errorf("%s: %w", LabStateFile, err)
	}
	for _, p := range procs {
		out[p.Name] = p
	}
	return out, nil
}

func (l *Lab) writeState() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := json.MarshalIndent(l.procs, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(l.dir, "."+LabStateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(l.dir, LabStateFile))
}

func (l *Lab) has(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.procs {
		if p.Name == name {
			return true
		}
	}
	return false
}

// keyFile reads an OpenSSH private key from path, making it first.
func keyFile(path, comment string) ([]byte, ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		kp, err := sshrun.GenerateKey(comment)
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(path, kp.PrivatePEM, 0o600); err != nil {
			return nil, nil, err
		}
		b = kp.PrivatePEM
	} else if err != nil {
		return nil, nil, err
	}
	signer, err := ssh.ParsePrivateKey(b)
	return b, signer, err
}

func (l *Lab) startSSHD(ctx context.Context, log *slog.Logger) error {
	if _, err := os.Stat(sshdPath); err != nil {
		return fmt.Errorf("the demo lab host needs OpenSSH's server at %s: install it (Debian: apt-get install openssh-server)", sshdPath)
	}
	if os.Geteuid() == 0 {
		// sshd insists on its privilege-separation folder when run as root.
		_ = os.MkdirAll("/run/sshd", 0o755)
	}
	sdir := filepath.Join(l.dir, "sshd")
	hostKeyPath := filepath.Join(sdir, "ssh_host_ed25519_key")
	_, hostSigner, err := keyFile(hostKeyPath, "accord-demo-host")
	if err != nil {
		return fmt.Errorf("demo lab: host key: %w", err)
	}
	l.hostKey = hostSigner.PublicKey()
	clientPEM, clientSigner, err := keyFile(filepath.Join(sdir, "accord_client_key"), "accord@demo-lab")
	if err != nil {
		return fmt.Errorf("demo lab: client key: %w", err)
	}
	l.clientKey = clientPEM
	authorized := filepath.Join(sdir, "authorized_keys")
	if err := os.WriteFile(authorized, ssh.MarshalAuthorizedKey(clientSigner.PublicKey()), 0o600); err != nil {
		return err
	}
	config := strings.Join([]string{
		"Port " + strconv.Itoa(l.sshPort),
		"ListenAddress 127.0.0.1",
		"HostKey " + hostKeyPath,
		"AuthorizedKeysFile " + authorized,
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PubkeyAuthentication yes",
		"PermitRootLogin prohibit-password",
		"AllowUsers " + l.user,
		"StrictModes no",
		"UsePAM no",
		"PidFile none",
		"AllowTcpForwarding no",
		"X11Forwarding no",
		// An empty HOME: a login shell's slow ~/.bashrc would slow every command.
		"SetEnv HOME=" + filepath.Join(l.dir, "home"),
		"LogLevel ERROR",
		"",
	}, "\n")
	cfgPath := filepath.Join(sdir, "sshd_config")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(l.sshPort)
	if err := l.run(ctx, log, Process{Name: "sshd", Argv: []string{sshdPath, "-D", "-e", "-f", cfgPath}, Addr: addr}, 10*time.Second); err != nil {
		return fmt.Errorf("demo lab: sshd on port %d (is the port taken? set ACCORD_DEMO_SSH_PORT): %w", l.sshPort, err)
	}
	return nil
}

// KVFiles are the emulators' KV files (256 MiB each), in the lab's kv
// folder under the installation's data directory: this installation's
// own, never shared with another, and removed when the lab stops.
var KVFiles = [2]string{"local-nvme.kv", "nvmeof.kv"}

// startEmulators runs two `accord emulate`: the "local NVMe" path reads KV
// blocks from its file with a bandwidth cap, the "NVMe-oF" path from its
// file at the speed of the page cache, so that the faster storage really
// gives a lower TTFT.
func (l *Lab) startEmulators(ctx context.Context, log *slog.Logger, probeDir string) error {
	// The emulator is accord itself: the static build for lab hosts when
	// there is one (the running binary may be a test's), else this binary.
	self := filepath.Join(probeDir, "accord-linux-"+runtime.GOARCH)
	if _, err := os.Stat(self); probeDir == "" || err != nil {
		var err error
		if self, err = os.Executable(); err != nil {
			return err
		}
	}
	common := []string{"--model", "emulated", "--kv-file-size", "256MiB", "--cache-blocks", "256", "--itl", "5ms", "--prefill-per-token", "50us"}
	paths := []struct {
		name string
		port int
		args []string
		url  *string
	}{
		{"local NVMe path", l.slowPort, []string{"--kv-file", filepath.Join(l.dir, "kv", KVFiles[0]), "--kv-read-mbps", "75"}, &l.slowURL},
		{"NVMe-oF path", l.fastPort, []string{"--kv-file", filepath.Join(l.dir, "kv", KVFiles[1])}, &l.fastURL},
	}
	for _, p := range paths {
		addr := "127.0.0.1:" + strconv.Itoa(p.port)
		args := append([]string{self, "emulate", "--listen", addr}, append(append([]string{}, common...), p.args...)...)
		name := "emulator (" + p.name + ")"
		if err := l.run(ctx, log, Process{Name: name, Argv: args, Addr: addr}, 60*time.Second); err != nil {
			return fmt.Errorf("demo lab: emulator for the %s on %s (is the port taken?): %w", p.name, addr, err)
		}
		*p.url = "http://" + addr + "/v1"
	}
	return nil
}

// run makes sure want runs: the same process from an earlier start is
// used again; otherwise what is left of an earlier one under that name
// is stopped and want is started, in a session of its own (so that it
// outlives this server), its output appended to logs/NAME.log. It returns
// once want answers on its address.
func (l *Lab) run(ctx context.Context, log *slog.Logger, want Process, wait time.Duration) error {
	if prev, ok := l.prev[want.Name]; ok && prev.Running() {
		if slices.Equal(prev.Argv, want.Argv) && answers(prev.Addr) {
			l.mu.Lock()
			l.procs = append(l.procs, prev)
			l.reused = append(l.reused, fmt.Sprintf("%s (pid %d)", prev.Name, prev.PID))
			l.mu.Unlock()
			return nil
		}
		log.Info("demo lab: replacing a process an earlier start left", "process", prev.Name, "pid", prev.PID)
		stopProcess(prev, nil)
	}
	logFile, err := os.OpenFile(filepath.Join(l.dir, "logs", logName(want.Name)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(want.Argv[0], want.Argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	want.PID = cmd.Process.Pid
	if want.StartTicks, err = startTicks(want.PID); err != nil {
		return fmt.Errorf("demo lab: %s: %w", want.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	l.mu.Lock()
	l.procs = append(l.procs, want)
	l.exits[want.PID] = exited
	l.mu.Unlock()
	log.Debug("demo lab: started", "process", want.Name, "pid", want.PID, "log", logFile.Name())
	return waitForPort(ctx, want.Addr, wait)
}

// logName is the log file of a lab process.
func logName(name string) string {
	return strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(name) + ".log"
}

// Running reports whether p's pid is still the process recorded:
// alive, started when it was, its executable not replaced since.
func (p Process) Running() bool {
	if p.PID <= 1 || !alive(p.PID) {
		return false
	}
	if ticks, err := startTicks(p.PID); err != nil || ticks != p.StartTicks {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
	return err == nil && !strings.HasSuffix(exe, " (deleted)")
}

// procStat returns the fields of /proc/PID/stat after the command name
// (the first is the state, field 3).
func procStat(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	return strings.Fields(string(raw[i+1:])), nil
}

// startTicks is field 22 of /proc/PID/stat: when the process started.
func startTicks(pid int) (uint64, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	f, err := procStat(pid)
	return err == nil && len(f) > 0 && f[0] != "Z"
}

// answers dials the demo lab's own sshd or emulator on 127.0.0.1 (ports
// of the configuration, never a user's URL): outside the egress policy.
func answers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// stopProcess ends p's session (SIGTERM, SIGKILL after 5 s) and waits
// until it is gone; exited, when known, is closed when it was reaped.
func stopProcess(p Process, exited chan struct{}) {
	gone := func() bool {
		if exited != nil {
			select {
			case <-exited:
				return true
			default:
				return false
			}
		}
		return !alive(p.PID)
	}
	_ = syscall.Kill(-p.PID, syscall.SIGTERM)
	for end := time.Now().Add(5 * time.Second); !gone() && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	if !gone() {
		_ = syscall.Kill(-p.PID, syscall.SIGKILL)
		for end := time.Now().Add(5 * time.Second); !gone() && time.Now().Before(end); {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// stop ends the demo processes (their whole sessions) at a clean shutdown,
// and forgets them.
func (l *Lab) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.procs {
		stopProcess(p, l.exits[p.PID])
	}
	l.procs = nil
	_ = os.Remove(filepath.Join(l.dir, LabStateFile))
	l.removeDataFiles()
}

// removeDataFiles deletes what the lab's tests laid out once its processes
// are stopped: the emulators' KV files (256 MiB each) and everything in the
// fio folder, the demo host's only write place (the demo's fio file,
// kv-blocks.dat, is 64 MiB). The next start lays them out again.
func (l *Lab) removeDataFiles() {
	for _, name := range KVFiles {
		if err := os.Remove(filepath.Join(l.dir, "kv", name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.log.Warn("demo lab: emulator file not removed", "file", name, "err", err)
		}
	}
	fioDir := filepath.Join(l.dir, "fio")
	entries, err := os.ReadDir(fioDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		l.log.Warn("demo lab: fio folder not read", "err", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(fioDir, e.Name())); err != nil {
			l.log.Warn("demo lab: fio file not removed", "file", e.Name(), "err", err)
		}
	}
}

// waitForPort dials the demo lab's own port on 127.0.0.1, as answers does.
func waitForPort(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StopRecorded stops the lab processes an earlier start recorded under
// dataDir (those still the same processes), as a clean stop would: for
// tests and operators cleaning up after a server that was killed.
func StopRecorded(dataDir string) error {
	procs, err := ReadLabState(filepath.Join(dataDir, "demo"))
	if err != nil {
		return err
	}
	for _, p := range procs {
		if p.Running() {
			stopProcess(p, nil)
		}
	}
	return nil
}

// Answers says whether the process answers on its address.
func (p Process) Answers() bool { return answers(p.Addr) }
