package sshrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/accordlab/accord/egress"
)

// Options tune a connection. Zero fields take the defaults below.
type Options struct {
	// DialTimeout bounds each TCP connect (and each jump host's forwarding
	// of it). Default 10s.
	DialTimeout time.Duration
	// HandshakeTimeout bounds each hop's SSH handshake, authentication
	// included, from the moment its TCP connection is up: a listener that
	// accepts and never answers fails within it. Default 15s.
	HandshakeTimeout time.Duration
	// KeepaliveInterval is how often a keepalive@openssh.com request is sent
	// (default 5s; negative disables keepalives). KeepaliveCountMax is how
	// many intervals may pass without any reply before the connection is
	// closed (default 3). A connection that goes silent is closed within
	// KeepaliveBound() = interval × (countMax + 1), 20s with the defaults.
	KeepaliveInterval time.Duration
	KeepaliveCountMax int
	// RemoteBase is the folder, relative to the login home unless absolute,
	// holding the probe cache (BASE/probe/<sha256>/accord) and run folders
	// (BASE/runs/...). Default ".accord".
	RemoteBase string
	// AgentSockets are the ssh-agent sockets hosts may authenticate with
	// (the operator's ACCORD_SSH_AGENT_SOCKETS). Any other is refused: an
	// engineer must not borrow the server account's agent, or another
	// program's, by naming its socket.
	AgentSockets []string
}

// Defaults for Options.
const (
	DefaultDialTimeout       = 10 * time.Second
	DefaultHandshakeTimeout  = 15 * time.Second
	DefaultKeepaliveInterval = 5 * time.Second
	DefaultKeepaliveCountMax = 3
	DefaultRemoteBase        = ".accord"
)

func (o Options) withDefaults() Options {
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.KeepaliveInterval == 0 {
		o.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if o.KeepaliveCountMax <= 0 {
		o.KeepaliveCountMax = DefaultKeepaliveCountMax
	}
	if o.RemoteBase == "" {
		o.RemoteBase = DefaultRemoteBase
	}
	return o
}

// KeepaliveBound is the longest a silent connection stays open: the last
// reply can come just before the silence, and the check runs once per
// interval. Zero when keepalives are disabled.
func (o Options) KeepaliveBound() time.Duration {
	o = o.withDefaults()
	if o.KeepaliveInterval < 0 {
		return 0
	}
	return o.KeepaliveInterval * time.Duration(o.KeepaliveCountMax+1)
}

// ErrDialTimeout: the TCP connection (or a jump host's forwarding of it)
// was not made within Options.DialTimeout.
var ErrDialTimeout = errors.New("sshrun: connect timed out")

// Dial connects to t through its jump hosts, each hop's host key checked
// against its pin, and starts keepalives. The returned Client must be
// closed.
func Dial(ctx context.Context, t Target, opts Options) (*Client, error) {
	opts = opts.withDefaults()
	hops := make([]Target, 0, len(t.Jumps)+1)
	for i, j := range t.Jumps {
		if len(j.Jumps) > 0 {
			return nil, fmt.Errorf("%w: jump host %d (%s) has jumps of its own: list the whole chain on the target", ErrBadTarget, i, j.HostPort())
		}
		hops = append(hops, j)
	}
	final := t
	final.Jumps = nil
	hops = append(hops, final)

	var clients []*ssh.Client
	var heard *heardConn // the target's connection
	closeAll := func() {
		for i := len(clients) - 1; i >= 0; i-- {
			_ = clients[i].Close()
		}
	}
	for i, hop := range hops {
		var prev *ssh.Client
		if i > 0 {
			prev = clients[i-1]
		}
		c, conn, err := dialHop(ctx, prev, hop, opts)
		if err != nil {
			closeAll()
			if i < len(hops)-1 {
				return nil, fmt.Errorf("sshrun: dial %s: jump host %d: %w", t, i+1, err)
			}
			return nil, fmt.Errorf("sshrun: dial %s: %w", t, err)
		}
		clients = append(clients, c)
		heard = conn
	}
	return newClient(t, opts, clients, heard), nil
}

// dialConn opens a TCP connection to addr, directly or through prev.
//
// Lab hosts and jump hosts are outside the egress policy that webhooks and
// production watches go through (package egress): they are the lab's own
// machines, registered by the program's engineers with pinned host keys,
// and rightly on private networks (loopback in the demo). Only cloud
// metadata addresses are refused, at the socket: no lab host lives there.
// A hop through a jump host is dialed by that host, inside its own lab.
func dialConn(ctx context.Context, prev *ssh.Client, addr string, timeout time.Duration) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var conn net.Conn
	var err error
	if prev == nil {
		d := net.Dialer{Control: egress.RefuseMetadata}
		conn, err = d.DialContext(dctx, "tcp", addr)
	} else {
		conn, err = prev.DialContext(dctx, "tcp", addr)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect %s: %w", addr, ctx.Err())
		}
		if dctx.Err() != nil {
			return nil, &ConnectError{Addr: addr, Err: fmt.Errorf("%w after %s", ErrDialTimeout, timeout)}
		}
		return nil, &ConnectError{Addr: addr, Err: err}
	}
	return conn, nil
}

// ConnectError: a hop's TCP connection or SSH handshake failed before the
// hop proved to be an SSH server with the expected key (refused, timed
// out, reset, closed, not speaking SSH). Its text names the address and
// the socket's own error, which tells what listens where on the networks
// Accord reaches: it is for the server's log, and pages say only "could
// not connect" (IsConnectFailure).
type ConnectError struct {
	Addr string
	Err  error
}

func (e *ConnectError) Error() string { return "connect " + e.Addr + ": " + e.Err.Error() }
func (e *ConnectError) Unwrap() error { return e.Err }

// IsConnectFailure reports whether err is a ConnectError.
func IsConnectFailure(err error) bool {
	var ce *ConnectError
	return errors.As(err, &ce)
}

// dialHop connects to one hop and returns its client and its connection,
// whose clock of the last bytes read tells the keepalive the hop is alive.
func dialHop(ctx context.Context, prev *ssh.Client, hop Target, opts Options) (*ssh.Client, *heardConn, error) {
	if hop.HostKey == nil {
		return nil, nil, fmt.Errorf("%s: %w", hop.HostPort(), ErrHostKeyNotPinned)
	}
	if hop.User == "" {
		return nil, nil, fmt.Errorf("%w: %s: no user", ErrBadTarget, hop.HostPort())
	}
	auth, closeAuth, err := authMethod(hop.Auth, opts.AgentSockets)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", hop.HostPort(), err)
	}
	defer closeAuth()

	addr := hop.HostPort()
	var changed *HostKeyChangedError
	cfg := &ssh.ClientConfig{
		User: hop.User,
		Auth: []ssh.AuthMethod{auth},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			if bytes.Equal(key.Marshal(), hop.HostKey.Marshal()) {
				return nil
			}
			changed = &HostKeyChangedError{Host: addr, Pinned: Fingerprint(hop.HostKey), Presented: Fingerprint(key), PresentedKey: key}
			return changed
		},
		// Ask only for the pinned key's type, so that a host with several
		// keys shows the one we know.
		HostKeyAlgorithms: hostKeyAlgorithms(hop.HostKey),
		Timeout:           0, // we bound the handshake ourselves
	}
	raw, err := dialConn(ctx, prev, addr, opts.DialTimeout)
	if err != nil {
		return nil, nil, err
	}
	conn := &heardConn{Conn: raw}
	sc, chans, reqs, err := handshake(ctx, conn, addr, cfg, opts.HandshakeTimeout)
	if err != nil {
		if changed != nil {
			return nil, nil, changed
		}
		var ane *ssh.AlgorithmNegotiationError
		if errors.As(err, &ane) && ane.What == "host key" {
			// The host no longer has a key of the pinned type: a change
			// too. Learn what it offers now, for the error message.
			e := &HostKeyChangedError{Host: addr, Pinned: Fingerprint(hop.HostKey)}
			if k, serr := scanVia(ctx, prev, addr, opts); serr == nil {
				e.Presented, e.PresentedKey = Fingerprint(k), k
			}
			return nil, nil, e
		}
		if isAuthFailure(err) {
			return nil, nil, fmt.Errorf("%s as %s: %w: %v", addr, hop.User, ErrAuthFailed, err)
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%s: %w", addr, err)
		}
		return nil, nil, &ConnectError{Addr: addr, Err: err}
	}
	return ssh.NewClient(sc, chans, reqs), conn, nil
}

// heardConn is a connection that remembers when it last read anything:
// any bytes from the host (a window adjustment during an upload, a
// command's output) show it alive as well as a keepalive's reply does,
// as OpenSSH's own client counts them. Without this a host too busy to
// answer keepalives promptly while it takes an upload was dropped.
type heardConn struct {
	net.Conn
	last atomic.Int64 // unix nanoseconds of the last successful read
}

func (c *heardConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// lastHeard is when the connection last read anything (zero before).
func (c *heardConn) lastHeard() time.Time {
	if ns := c.last.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// handshake runs the SSH handshake on conn within timeout; the connection
// is closed when the time is up or ctx ends, so that a peer that accepts
// and never answers cannot hold us.
func handshake(ctx context.Context, conn net.Conn, addr string, cfg *ssh.ClientConfig, timeout time.Duration) (ssh.Conn, <-chan ssh.NewChannel, <-chan *ssh.Request, error) {
	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		_ = conn.Close()
	})
	stopCtx := context.AfterFunc(ctx, func() { _ = conn.Close() })
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	timerStopped := timer.Stop()
	ctxStopped := stopCtx()
	if err == nil && (!timerStopped || !ctxStopped) {
		// Finished just as the deadline fired: the conn is closed already.
		_ = sc.Close()
		err = errors.New("connection closed at the deadline")
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, nil, nil, fmt.Errorf("handshake: %w", ctx.Err())
		case timedOut.Load():
			return nil, nil, nil, fmt.Errorf("%w after %s", ErrHandshakeTimeout, timeout)
		}
		return nil, nil, nil, err
	}
	return sc, chans, reqs, nil
}

func isAuthFailure(err error) bool {
	s := err.Error()
	return strings.Contains(s, "unable to authenticate") || strings.Contains(s, "Too many authentication failures")
}

// hostKeyAlgorithms lists the signature algorithms that verify with k.
func hostKeyAlgorithms(k ssh.PublicKey) []string {
	if k.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{k.Type()}
}

// authMethod builds the hop's authentication; the returned func releases
// the agent connection once the handshake is done.
func authMethod(a Auth, allowedSockets []string) (ssh.AuthMethod, func(), error) {
	switch {
	case len(a.PrivateKey) > 0:
		signer, err := ssh.ParsePrivateKey(a.PrivateKey)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: private key: %v", ErrBadTarget, err)
		}
		return ssh.PublicKeys(signer), func() {}, nil
	case a.AgentSock != "":
		if !slices.Contains(allowedSockets, a.AgentSock) {
			return nil, nil, fmt.Errorf("%w: ssh-agent socket %s is not one this installation allows (ACCORD_SSH_AGENT_SOCKETS)", ErrBadTarget, a.AgentSock)
		}
		conn, err := net.Dial("unix", a.AgentSock)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: ssh-agent %s: %v", ErrBadTarget, a.AgentSock, err)
		}
		ag := agent.NewClient(conn)
		return ssh.PublicKeysCallback(ag.Signers), func() { _ = conn.Close() }, nil
	default:
		return nil, nil, fmt.Errorf("%w: no private key and no agent socket", ErrBadTarget)
	}
}

// HostKeyScan is what Scan learnt about a host.
type HostKeyScan struct {
	Key           ssh.PublicKey
	Fingerprint   string // "SHA256:..."
	AuthorizedKey string // the key as one authorized_keys line, to pin
}

// errScanned aborts a scanning handshake once the key is known.
var errScanned = errors.New("sshrun: host key scanned")

// Scan connects to addr:port and returns the host's key without
// authenticating, for an engineer to confirm before it is pinned. The host
// is asked for ed25519 first, then ECDSA, then RSA.
func Scan(ctx context.Context, addr string, port int, opts Options) (HostKeyScan, error) {
	return ScanVia(ctx, Target{Addr: addr, Port: port}, opts)
}

// ScanVia is Scan for t.Addr:t.Port, reached through t.Jumps (which are
// authenticated and pinned as for Dial).
func ScanVia(ctx context.Context, t Target, opts Options) (HostKeyScan, error) {
	opts = opts.withDefaults()
	var prev *ssh.Client
	if len(t.Jumps) > 0 {
		jt := t.Jumps[len(t.Jumps)-1]
		jt.Jumps = t.Jumps[:len(t.Jumps)-1]
		jc, err := Dial(ctx, jt, opts)
		if err != nil {
			return HostKeyScan{}, fmt.Errorf("sshrun: scan %s: %w", t.HostPort(), err)
		}
		defer jc.Close()
		prev = jc.ssh
	}
	k, err := scanVia(ctx, prev, t.HostPort(), opts)
	if err != nil {
		return HostKeyScan{}, fmt.Errorf("sshrun: scan %s: %w", t.HostPort(), err)
	}
	return HostKeyScan{Key: k, Fingerprint: Fingerprint(k), AuthorizedKey: AuthorizedKey(k)}, nil
}

func scanVia(ctx context.Context, prev *ssh.Client, addr string, opts Options) (ssh.PublicKey, error) {
	var (
		mu  sync.Mutex
		got ssh.PublicKey
	)
	cfg := &ssh.ClientConfig{
		User: "accord-scan",
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			mu.Lock()
			got = key
			mu.Unlock()
			return errScanned
		},
		HostKeyAlgorithms: []string{
			ssh.KeyAlgoED25519,
			ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
			ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256,
		},
	}
	conn, err := dialConn(ctx, prev, addr, opts.DialTimeout)
	if err != nil {
		return nil, err
	}
	sc, _, _, err := handshake(ctx, conn, addr, cfg, opts.HandshakeTimeout)
	if err == nil {
		_ = sc.Close()
		return nil, &ConnectError{Addr: addr, Err: errors.New("handshake finished without showing a host key")}
	}
	mu.Lock()
	defer mu.Unlock()
	if got == nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, &ConnectError{Addr: addr, Err: err}
	}
	return got, nil
}
