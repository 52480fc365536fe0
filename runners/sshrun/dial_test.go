package sshrun_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/accordlab/accord/internal/closedport"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	sshtest.RemoveBuild()
	removeSharedBase()
	os.Exit(code)
}

// Options for tests: bounds shorter than the defaults, but loose enough
// for a loaded 2-core machine. The tests of the bounds themselves set
// tighter ones.
var testOpts = sshrun.Options{
	DialTimeout:       5 * time.Second,
	HandshakeTimeout:  15 * time.Second,
	KeepaliveInterval: time.Second,
	KeepaliveCountMax: 5,
}

type dialBundle struct {
	sshd   *sshtest.SSHD
	target sshrun.Target
}

func setupDial(t *testing.T, opts sshtest.Options) *dialBundle {
	t.Helper()
	sshd := sshtest.StartSSHD(t, opts)
	return &dialBundle{sshd: sshd, target: targetOf(sshd)}
}

func targetOf(s *sshtest.SSHD) sshrun.Target {
	return sshrun.Target{
		Addr:    s.Addr,
		Port:    s.Port,
		User:    s.User,
		Auth:    sshrun.Auth{PrivateKey: s.ClientKeyPEM},
		HostKey: s.HostKey,
	}
}

// via points a target at a proxy in front of its sshd.
func via(t sshrun.Target, p *sshtest.Proxy) sshrun.Target {
	t.Addr, t.Port = p.Addr, p.Port
	return t
}

func dial(t *testing.T, target sshrun.Target, opts sshrun.Options) *sshrun.Client {
	t.Helper()
	c, err := sshrun.Dial(context.Background(), target, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestDialRun(t *testing.T) {
	t.Parallel()
	b := setupDial(t, sshtest.Options{})
	c := dial(t, b.target, testOpts)
	ctx := context.Background()

	res, err := c.Run(ctx, []string{"printf", "%s|%s", "it's", "$HOME"}, nil)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.Equal(t, "it's|$HOME", string(res.Stdout))

	res, err = c.Run(ctx, []string{"cat"}, strings.NewReader("through stdin\n"))
	require.NoError(t, err)
	require.Equal(t, "through stdin\n", string(res.Stdout))

	res, err = c.Run(ctx, []string{"sh", "-c", "echo oops >&2; exit 7"}, nil)
	require.NoError(t, err, "a non-zero exit is not a transport error")
	require.Equal(t, 7, res.ExitCode)
	require.Equal(t, "oops\n", string(res.Stderr))

	// Cancelling ctx ends a long command promptly.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Run(cctx, []string{"sleep", "30"}, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second)

	// The connection is still usable afterwards.
	res, err = c.Run(ctx, []string{"true"}, nil)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
}

func TestDialRefusesUnpinnedHost(t *testing.T) {
	t.Parallel()
	b := setupDial(t, sshtest.Options{})
	target := b.target
	target.HostKey = nil
	_, err := sshrun.Dial(context.Background(), target, testOpts)
	require.ErrorIs(t, err, sshrun.ErrHostKeyNotPinned)
	require.False(t, sshrun.IsRetryable(err))
}

func TestScan(t *testing.T) {
	t.Parallel()
	for _, kt := range []string{sshtest.KeyEd25519, sshtest.KeyECDSA, sshtest.KeyRSA} {
		t.Run(kt, func(t *testing.T) {
			t.Parallel()
			b := setupDial(t, sshtest.Options{HostKeyType: kt})
			got, err := sshrun.Scan(context.Background(), b.sshd.Addr, b.sshd.Port, testOpts)
			require.NoError(t, err)
			require.Equal(t, ssh.FingerprintSHA256(b.sshd.HostKey), got.Fingerprint)
			pinned, err := sshrun.ParseHostKey(got.AuthorizedKey)
			require.NoError(t, err)
			// The scanned key, pinned, lets us in.
			target := b.target
			target.HostKey = pinned
			dial(t, target, testOpts)
		})
	}
}

func TestHostKeyChanged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, newType string }{
		{"same type", sshtest.KeyEd25519},
		{"other type", sshtest.KeyECDSA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupDial(t, sshtest.Options{HostKeyType: sshtest.KeyEd25519})
			dial(t, b.target, testOpts) // the pin is right before the change
			old := b.sshd.HostKey
			b.sshd.Restart(tc.newType)
			require.NotEqual(t, ssh.FingerprintSHA256(old), ssh.FingerprintSHA256(b.sshd.HostKey))

			attempts := 0
			err := sshrun.Retry(context.Background(), sshrun.Backoff{Initial: 10 * time.Millisecond, Attempts: 5}, func(ctx context.Context) error {
				attempts++
				c, err := sshrun.Dial(ctx, b.target, testOpts)
				if err == nil {
					c.Close()
				}
				return err
			})
			require.ErrorIs(t, err, sshrun.ErrHostKeyChanged)
			require.Equal(t, 1, attempts, "a host key change is never retried")
			require.False(t, sshrun.IsRetryable(err))
			var hk *sshrun.HostKeyChangedError
			require.ErrorAs(t, err, &hk)
			require.Equal(t, ssh.FingerprintSHA256(old), hk.Pinned)
			require.Equal(t, ssh.FingerprintSHA256(b.sshd.HostKey), hk.Presented)
			require.Contains(t, err.Error(), hk.Pinned)
			require.Contains(t, err.Error(), hk.Presented)
		})
	}
}

func TestAuthFailed(t *testing.T) {
	t.Parallel()
	b := setupDial(t, sshtest.Options{})
	other, err := sshrun.GenerateKey("stranger")
	require.NoError(t, err)
	target := b.target
	target.Auth = sshrun.Auth{PrivateKey: other.PrivatePEM}
	attempts := 0
	err = sshrun.Retry(context.Background(), sshrun.Backoff{Initial: 10 * time.Millisecond}, func(ctx context.Context) error {
		attempts++
		_, err := sshrun.Dial(ctx, target, testOpts)
		return err
	})
	require.ErrorIs(t, err, sshrun.ErrAuthFailed)
	require.Equal(t, 1, attempts)
}

func TestGeneratedKeyAndAgentAuth(t *testing.T) {
	t.Parallel()
	kp, err := sshrun.GenerateKey("accord@lab host")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(kp.AuthorizedKey, "ssh-ed25519 "))
	require.True(t, strings.HasSuffix(kp.AuthorizedKey, " accord@lab_host"))
	require.Contains(t, string(kp.PrivatePEM), "BEGIN OPENSSH PRIVATE KEY")
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(kp.AuthorizedKey))
	require.NoError(t, err)
	require.Equal(t, kp.Fingerprint, ssh.FingerprintSHA256(pub))

	b := setupDial(t, sshtest.Options{AuthorizedKeys: []ssh.PublicKey{pub}})

	// With the key itself.
	target := b.target
	target.Auth = sshrun.Auth{PrivateKey: kp.PrivatePEM}
	dial(t, target, testOpts)

	// With the key held by an ssh-agent on a Unix socket.
	raw, err := ssh.ParseRawPrivateKey(kp.PrivatePEM)
	require.NoError(t, err)
	keyring := agent.NewKeyring()
	require.NoError(t, keyring.Add(agent.AddedKey{PrivateKey: raw}))
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = agent.ServeAgent(keyring, conn)
			}()
		}
	}()
	target.Auth = sshrun.Auth{AgentSock: sock}
	// Only a socket the operator allows is used.
	_, err = sshrun.Dial(context.Background(), target, testOpts)
	require.ErrorIs(t, err, sshrun.ErrBadTarget)
	require.Contains(t, err.Error(), "ACCORD_SSH_AGENT_SOCKETS")
	allowed := testOpts
	allowed.AgentSockets = []string{sock}
	c := dial(t, target, allowed)
	res, err := c.Run(context.Background(), []string{"true"}, nil)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	t.Parallel()
	port := closedport.Port(t)
	kp, err := sshrun.GenerateKey("")
	require.NoError(t, err)
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(kp.AuthorizedKey))
	require.NoError(t, err)
	target := sshrun.Target{Addr: "127.0.0.1", Port: port, User: "root", Auth: sshrun.Auth{PrivateKey: kp.PrivatePEM}, HostKey: pub}

	attempts := 0
	err = sshrun.Retry(context.Background(), sshrun.Backoff{Initial: 5 * time.Millisecond, Attempts: 3}, func(ctx context.Context) error {
		attempts++
		_, err := sshrun.Dial(ctx, target, testOpts)
		return err
	})
	require.Error(t, err)
	require.True(t, sshrun.IsRetryable(err), "%v", err)
	require.Equal(t, 3, attempts, "retried up to the limit")
}

func TestHandshakeTimeout(t *testing.T) {
	t.Parallel()
	b := setupDial(t, sshtest.Options{})
	p := sshtest.StartProxy(t, b.sshd.HostPort())
	p.Blackhole()
	opts := testOpts
	opts.HandshakeTimeout = 400 * time.Millisecond
	start := time.Now()
	_, err := sshrun.Dial(context.Background(), via(b.target, p), opts)
	elapsed := time.Since(start)
	t.Logf("handshake deadline %s fired after %s", opts.HandshakeTimeout, elapsed)
	require.ErrorIs(t, err, sshrun.ErrHandshakeTimeout)
	require.True(t, sshrun.IsRetryable(err))
	require.GreaterOrEqual(t, elapsed, opts.HandshakeTimeout)
	require.Less(t, elapsed, opts.HandshakeTimeout+time.Second, "the handshake deadline bounds the dial")
	require.EqualValues(t, 1, p.Accepted())

	// ctx ends the handshake too, before the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	opts.HandshakeTimeout = 10 * time.Second
	start = time.Now()
	_, err = sshrun.Dial(ctx, via(b.target, p), opts)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)

	p.Resume()
	dial(t, via(b.target, p), testOpts)
}

func TestKeepaliveClosesSilentConnection(t *testing.T) {
	t.Parallel()
	b := setupDial(t, sshtest.Options{})
	p := sshtest.StartProxy(t, b.sshd.HostPort())
	opts := testOpts
	opts.KeepaliveInterval, opts.KeepaliveCountMax = 300*time.Millisecond, 3
	c := dial(t, via(b.target, p), opts)
	bound := opts.KeepaliveBound()
	require.Equal(t, 1200*time.Millisecond, bound)

	// Keepalives keep a quiet but healthy connection up.
	time.Sleep(2 * bound)
	select {
	case <-c.Done():
		t.Fatalf("healthy connection closed: %v", c.Err())
	default:
	}

	streamErr := make(chan error, 1)
	go func() {
		_, err := c.Stream(context.Background(), []string{"sleep", "30"}, nil, nil, nil)
		streamErr <- err
	}()
	time.Sleep(100 * time.Millisecond)
	p.Silence()
	silenced := time.Now()
	select {
	case <-c.Done():
	case <-time.After(10 * bound):
		t.Fatal("silent connection not closed")
	}
	elapsed := time.Since(silenced)
	t.Logf("silent connection closed after %s (bound %s)", elapsed, bound)
	require.ErrorIs(t, c.Err(), sshrun.ErrKeepaliveTimeout)
	// Closed no earlier than countMax-1 intervals of silence, and within
	// the bound (with room for a loaded machine's scheduling).
	require.GreaterOrEqual(t, elapsed, opts.KeepaliveInterval*time.Duration(opts.KeepaliveCountMax-1))
	require.LessOrEqual(t, elapsed, bound+700*time.Millisecond)

	err := <-streamErr
	require.ErrorIs(t, err, sshrun.ErrKeepaliveTimeout)
	require.True(t, sshrun.IsRetryable(err))
}

func TestJumpChain(t *testing.T) {
	t.Parallel()
	a := sshtest.StartSSHD(t, sshtest.Options{})
	bHost := sshtest.StartSSHD(t, sshtest.Options{HostKeyType: sshtest.KeyECDSA})
	// A sits behind a proxy so the test can see the traffic go through it.
	pa := sshtest.StartProxy(t, a.HostPort())

	target := targetOf(bHost)
	target.Jumps = []sshrun.Target{via(targetOf(a), pa)}
	c := dial(t, target, testOpts)

	// The command runs on B, its output crosses A.
	before := pa.BytesDown()
	res, err := c.Run(context.Background(), []string{"head", "-c", "1048576", "/dev/zero"}, nil)
	require.NoError(t, err)
	require.Len(t, res.Stdout, 1<<20)
	require.Greater(t, pa.BytesDown()-before, int64(1<<20))
	require.Contains(t, target.String(), "via")

	// Each hop is pinned: a wrong pin on the jump host fails there, and a
	// wrong pin on the target fails although the jump host is fine.
	wrongJump := target
	wrongJump.Jumps = []sshrun.Target{via(targetOf(a), pa)}
	wrongJump.Jumps[0].HostKey = bHost.HostKey
	_, err = sshrun.Dial(context.Background(), wrongJump, testOpts)
	require.ErrorIs(t, err, sshrun.ErrHostKeyChanged)
	require.Contains(t, err.Error(), "jump host 1")

	wrongTarget := target
	wrongTarget.HostKey = a.HostKey
	_, err = sshrun.Dial(context.Background(), wrongTarget, testOpts)
	require.ErrorIs(t, err, sshrun.ErrHostKeyChanged)
	require.NotContains(t, err.Error(), "jump host")

	// Scanning through the jump host learns B's key.
	scan, err := sshrun.ScanVia(context.Background(), sshrun.Target{Addr: bHost.Addr, Port: bHost.Port, Jumps: target.Jumps}, testOpts)
	require.NoError(t, err)
	require.Equal(t, ssh.FingerprintSHA256(bHost.HostKey), scan.Fingerprint)

	// Closing the client closes the jump host's connection too.
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool {
		return errors.Is(c.Err(), sshrun.ErrConnectionLost) || strings.Contains(c.Err().Error(), "closed")
	}, 2*time.Second, 10*time.Millisecond)
}

func TestRunObeysContextOnSilentConnection(t *testing.T) {
	t.Parallel()
	b := setupDial(t, sshtest.Options{})
	p := sshtest.StartProxy(t, b.sshd.HostPort())
	opts := testOpts
	opts.KeepaliveInterval = -1 // only ctx can end the wait
	c := dial(t, via(b.target, p), opts)
	p.Silence()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Run(ctx, []string{"true"}, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 3*time.Second)
}
