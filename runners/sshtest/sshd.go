// Package sshtest runs real OpenSSH servers and network faults on 127.0.0.1
// for tests of the server's SSH side (runners/sshrun): an sshd with
// throw-away keys, a TCP proxy that can reset, silence or black-hole the
// connections through it, and a one-per-process build of the accord binary
// to upload as the probe.
//
// It imports nothing of ours, so that both internal and external tests of
// runners/sshrun can use it.
package sshtest

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHDPath is OpenSSH's server. sshd re-executes itself for every
// connection, so it must be started by its absolute path.
const SSHDPath = "/usr/sbin/sshd"

// Host key types a test can ask for.
const (
	KeyEd25519 = "ed25519"
	KeyECDSA   = "ecdsa"
	KeyRSA     = "rsa"
)

// Options configure StartSSHD. The zero value is an sshd with an ed25519
// host key that lets the current user in with one fresh ed25519 client key.
type Options struct {
	// HostKeyType is ed25519 (default), ecdsa or rsa.
	HostKeyType string
	// AuthorizedKeys are extra client keys allowed besides the generated one.
	AuthorizedKeys []ssh.PublicKey
	// RealHome keeps HOME as the login's home directory. By default HOME is
	// set to an empty folder (sshd's SetEnv): Debian's bash sources
	// ~/.bashrc for every command run over SSH, and a slow one (root's here
	// runs pyenv) would add seconds to each command. The working directory
	// of commands is the login's home either way.
	RealHome bool
	// ExtraConfig lines go first in sshd_config, so they win over the
	// defaults (sshd keeps the first value of a keyword).
	ExtraConfig []string
	// Env sets variables (NAME=VALUE, no spaces) in every session, like a
	// lab host's PATH with fake vendor tools in front. sshd reads only its
	// first SetEnv line, so they share HOME's.
	Env []string
}

// SSHD is a running sshd on 127.0.0.1. Its fields describe the current
// instance; Restart replaces the host key and updates them.
type SSHD struct {
	Addr string // "127.0.0.1"
	Port int
	// HostKey is the public host key the server presents now.
	HostKey ssh.PublicKey
	// ClientKeyPEM is the authorised client private key in OpenSSH PEM form;
	// ClientSigner is the same key ready to use.
	ClientKeyPEM []byte
	ClientSigner ssh.Signer
	// User is the login name (the current user).
	User string

	t      testing.TB
	dir    string
	opts   Options
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// PID is the sshd's process id (0 when it is not running): every session,
// and so every probe and tool a run starts on this host, is its child.
func (s *SSHD) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// HostPort is "127.0.0.1:PORT".
func (s *SSHD) HostPort() string { return net.JoinHostPort(s.Addr, strconv.Itoa(s.Port)) }

// Log returns what sshd wrote on standard error so far (useful in failures).
func (s *SSHD) Log() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "sshd.log"))
	if err != nil {
		return "(no sshd log: " + err.Error() + ")"
	}
	return string(b)
}

// StartSSHD starts sshd on a free port of 127.0.0.1, waits until it answers
// with its version banner, and stops it when the test ends.
func StartSSHD(t testing.TB, opts Options) *SSHD {
	t.Helper()
	if _, err := os.Stat(SSHDPath); err != nil {
		t.Fatalf("sshtest: %s is needed: %v", SSHDPath, err)
	}
	if os.Geteuid() == 0 {
		// The privilege-separation directory sshd insists on when run as root.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("sshtest: create /run/sshd: %v", err)
		}
	}
	dir := t.TempDir()
	user, err := currentUser()
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	clientPriv, clientSigner, err := NewKey(KeyEd25519)
	if err != nil {
		t.Fatalf("sshtest: client key: %v", err)
	}
	var ak bytes.Buffer
	ak.Write(ssh.MarshalAuthorizedKey(clientSigner.PublicKey()))
	for _, k := range opts.AuthorizedKeys {
		ak.Write(ssh.MarshalAuthorizedKey(k))
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), ak.Bytes(), 0o600); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	s := &SSHD{
		Addr:         "127.0.0.1",
		ClientKeyPEM: clientPriv,
		ClientSigner: clientSigner,
		User:         user,
		t:            t,
		dir:          dir,
		opts:         opts,
	}
	t.Cleanup(s.stop)

	// A free port can be taken between our probe and sshd's bind: retry.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatalf("sshtest: %v", err)
		}
		s.Port = port
		if lastErr = s.start(opts.HostKeyType); lastErr == nil {
			return s
		}
	}
	t.Fatalf("sshtest: start sshd: %v\n%s", lastErr, s.Log())
	return nil
}

// Restart stops sshd and starts it again on the same port with a new host
// key of the given type ("" keeps the current type). Connections already
// open stay up, as with a real sshd restart.
func (s *SSHD) Restart(hostKeyType string) {
	s.t.Helper()
	if hostKeyType == "" {
		hostKeyType = s.opts.HostKeyType
	}
	s.stop()
	var err error
	for range 20 { // the port may linger for a moment after the old process exits
		if err = s.start(hostKeyType); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("sshtest: restart sshd: %v\n%s", err, s.Log())
}

func (s *SSHD) start(hostKeyType string) error {
	if hostKeyType == "" {
		hostKeyType = KeyEd25519
	}
	hostPEM, hostSigner, err := NewKey(hostKeyType)
	if err != nil {
		return fmt.Errorf("host key: %w", err)
	}
	keyFile := filepath.Join(s.dir, "host_key_"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.WriteFile(keyFile, hostPEM, 0o600); err != nil {
		return err
	}
	// sshd keeps the first value it reads for a keyword, so the test's own
	// lines come first.
	conf := append([]string{}, s.opts.ExtraConfig...)
	env := append([]string{}, s.opts.Env...)
	if !s.opts.RealHome {
		home := filepath.Join(s.dir, "home")
		if err := os.MkdirAll(home, 0o700); err != nil {
			return err
		}
		env = append(env, "HOME="+home)
	}
	for _, e := range env {
		if strings.ContainsAny(e, " \t\n\"") || !strings.Contains(e, "=") {
			return fmt.Errorf("environment %q: NAME=VALUE without spaces or quotes", e)
		}
	}
	if len(env) > 0 {
		conf = append(conf, "SetEnv "+strings.Join(env, " "))
	}
	conf = append(conf,
		"ListenAddress 127.0.0.1",
		"HostKey "+keyFile,
		"AuthorizedKeysFile "+filepath.Join(s.dir, "authorized_keys"),
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password",
		"StrictModes no",
		"UsePAM no",
		"PidFile none",
		"AllowTcpForwarding yes",
		"UseDNS no",
		"PrintMotd no",
		"MaxStartups 64",
		"MaxSessions 64",
		"LogLevel VERBOSE",
	)
	confFile := filepath.Join(s.dir, "sshd_config")
	if err := os.WriteFile(confFile, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	// A file, not a pipe: per-connection children inherit sshd's stderr,
	// and with a pipe Wait would wait for every one of them.
	logf, err := os.OpenFile(filepath.Join(s.dir, "sshd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(SSHDPath, "-D", "-e", "-f", confFile, "-p", strconv.Itoa(s.Port))
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Its own process group, so that stopping the listener cannot take the
	// test process's group with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", SSHDPath, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if err := waitBanner(s.HostPort(), exited, 10*time.Second); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return err
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.HostKey = hostSigner.PublicKey()
	s.opts.HostKeyType = hostKeyType
	s.mu.Unlock()
	return nil
}

// stop ends the listening sshd. Per-connection children end when their
// client disconnects.
func (s *SSHD) stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// waitBanner waits until addr answers with an SSH version line.
func waitBanner(addr string, exited <-chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("sshd exited before accepting connections")
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			line, rerr := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if rerr == nil && strings.HasPrefix(line, "SSH-2.0-") {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("sshd on %s did not answer within %s", addr, limit)
}

// NewKey makes a private key of the given type (ed25519, ecdsa P-256 or RSA
// 2048) and returns it in OpenSSH PEM form with its signer.
func NewKey(keyType string) ([]byte, ssh.Signer, error) {
	var priv any
	var err error
	switch keyType {
	case KeyEd25519:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case KeyECDSA:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case KeyRSA:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q", keyType)
	}
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(block), signer, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func currentUser() (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("current user: %w", err)
	}
	return u.Username, nil
}
