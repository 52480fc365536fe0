package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/accordlab/accord/runners/sshrun"
)

// demoLab is the lab `make run` brings up in dev mode: a local sshd that
// stands for a lab host, and two inference emulators that stand for two
// storage paths of the KV cache (a slower "local NVMe" one and a faster
// "NVMe-oF array" one). Everything runs as the current user on 127.0.0.1
// and stops with the server.
type demoLab struct {
	dir       string
	sshPort   int
	hostKey   ssh.PublicKey
	clientKey []byte // OpenSSH PEM, sealed into the host row
	user      string
	slowURL   string // emulator on the slower path
	fastURL   string // emulator on the faster path
	fioTarget string // a file for fio steps
	fastPort  int
	slowPort  int
	procs     []*exec.Cmd
	mu        sync.Mutex
	log       *slog.Logger
}

// sshdPath is OpenSSH's server, started by its absolute path (it re-execs
// itself for every connection).
const sshdPath = "/usr/sbin/sshd"

// startDemoLab starts the demo's processes; stop ends them.
func startDemoLab(ctx context.Context, cfg Config, log *slog.Logger) (*demoLab, error) {
	dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "demo"))
	if err != nil {
		return nil, err
	}
	lab := &demoLab{dir: dir, sshPort: cfg.DemoSSHPort, fastPort: cfg.DemoPorts[0], slowPort: cfg.DemoPorts[1], log: log}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	lab.user = u.Username
	for _, d := range []string{"sshd", "home", "kv", "fio"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	lab.fioTarget = filepath.Join(dir, "fio", "kv-blocks.dat")
	if err := lab.startSSHD(ctx, log); err != nil {
		lab.stop()
		return nil, err
	}
	if err := lab.startEmulators(ctx, log, cfg.ProbeDir); err != nil {
		lab.stop()
		return nil, err
	}
	return lab, nil
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

func (l *demoLab) startSSHD(ctx context.Context, log *slog.Logger) error {
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
	cmd := exec.CommandContext(ctx, sshdPath, "-D", "-e", "-f", cfgPath)
	if err := l.start(cmd, log.With("component", "demo-sshd")); err != nil {
		return fmt.Errorf("demo lab: start sshd: %w", err)
	}
	if err := waitForPort(ctx, "127.0.0.1:"+strconv.Itoa(l.sshPort), 10*time.Second); err != nil {
		return fmt.Errorf("demo lab: sshd on port %d (is the port taken? set ACCORD_DEMO_SSH_PORT): %w", l.sshPort, err)
	}
	return nil
}

// demoKVFiles are the emulators' KV files (256 MiB each), in the lab's kv
// folder under the installation's data directory: this installation's
// own, never shared with another, and removed when the lab stops.
var demoKVFiles = [2]string{"local-nvme.kv", "nvmeof.kv"}

// startEmulators runs two `accord emulate`: the "local NVMe" path reads KV
// blocks from its file with a bandwidth cap, the "NVMe-oF" path from its
// file at the speed of the page cache, so that the faster storage really
// gives a lower TTFT.
func (l *demoLab) startEmulators(ctx context.Context, log *slog.Logger, probeDir string) error {
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
		{"local NVMe path", l.slowPort, []string{"--kv-file", filepath.Join(l.dir, "kv", demoKVFiles[0]), "--kv-read-mbps", "150"}, &l.slowURL},
		{"NVMe-oF path", l.fastPort, []string{"--kv-file", filepath.Join(l.dir, "kv", demoKVFiles[1])}, &l.fastURL},
	}
	for _, p := range paths {
		addr := "127.0.0.1:" + strconv.Itoa(p.port)
		args := append([]string{"emulate", "--listen", addr}, append(append([]string{}, common...), p.args...)...)
		if err := l.start(exec.CommandContext(ctx, self, args...), log.With("component", "demo-emulator", "path", p.name)); err != nil {
			return fmt.Errorf("demo lab: start the emulator for the %s: %w", p.name, err)
		}
		if err := waitForPort(ctx, addr, 60*time.Second); err != nil {
			return fmt.Errorf("demo lab: emulator for the %s on %s (is the port taken?): %w", p.name, addr, err)
		}
		*p.url = "http://" + addr + "/v1"
	}
	return nil
}

// start runs a child process whose output goes to the log, killed with
// the server.
func (l *demoLab) start(cmd *exec.Cmd, log *slog.Logger) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	go logLines(out, log)
	l.mu.Lock()
	l.procs = append(l.procs, cmd)
	l.mu.Unlock()
	return nil
}

func logLines(r io.Reader, log *slog.Logger) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		log.Debug(sc.Text())
	}
}

// stop ends the demo processes (their whole process groups).
func (l *demoLab) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.procs {
		if p.Process != nil {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		}
	}
	for _, p := range l.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		}
	}
	l.procs = nil
	l.removeKVFiles()
}

// removeKVFiles deletes the emulators' KV files once they are stopped.
func (l *demoLab) removeKVFiles() {
	for _, name := range demoKVFiles {
		if err := os.Remove(filepath.Join(l.dir, "kv", name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.log.Warn("demo lab: emulator file not removed", "file", name, "err", err)
		}
	}
}

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
