package sshrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// Client is one live SSH connection to a lab host (through its jump hosts).
// It is safe for concurrent use: every command runs in its own session.
type Client struct {
	target Target
	opts   Options
	ssh    *ssh.Client   // the target
	hops   []*ssh.Client // the jump hosts, in dialling order

	done      chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	cause     error // why the connection ended
	probe     string
	heard     *heardConn // the target's connection, for when it last read
}

func newClient(t Target, opts Options, clients []*ssh.Client, heard *heardConn) *Client {
	c := &Client{
		target: t,
		opts:   opts,
		ssh:    clients[len(clients)-1],
		hops:   clients[:len(clients)-1],
		done:   make(chan struct{}),
		heard:  heard,
	}
	go c.watch()
	if opts.KeepaliveInterval > 0 {
		go c.keepalive()
	}
	return c
}

// Target is what this client is connected to.
func (c *Client) Target() Target { return c.target }

// Options are the connection's options, defaults filled in.
func (c *Client) Options() Options { return c.opts }

// Done is closed when the connection has ended, for whatever reason.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err says why the connection ended (ErrKeepaliveTimeout,
// ErrConnectionLost or net.ErrClosed after Close); nil while it is up.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// Close ends the connection and the jump hosts' connections.
func (c *Client) Close() error {
	c.end(fmt.Errorf("sshrun: client closed: %w", errClosed))
	<-c.done
	return nil
}

var errClosed = errors.New("closed by us")

// end records the first cause and closes every hop, the target first.
func (c *Client) end(cause error) {
	c.mu.Lock()
	if c.cause == nil {
		c.cause = cause
	}
	c.mu.Unlock()
	c.closeOnce.Do(func() {
		_ = c.ssh.Close()
		for i := len(c.hops) - 1; i >= 0; i-- {
			_ = c.hops[i].Close()
		}
	})
}

// watch notices the connection's end, whoever ended it.
func (c *Client) watch() {
	err := c.ssh.Wait()
	if err == nil {
		err = io.EOF
	}
	c.end(fmt.Errorf("%w: %s: %v", ErrConnectionLost, c.target.HostPort(), err))
	close(c.done)
}

// keepalive sends keepalive@openssh.com requests every interval and closes
// the connection when nothing has come from the host for KeepaliveCountMax
// intervals. Replies arrive as bytes on the connection like any other
// (any reply counts, including OpenSSH's "request failed"), so the
// connection's clock of its last read (heardConn) is the one clock kept.
func (c *Client) keepalive() {
	interval, limit := c.opts.KeepaliveInterval, time.Duration(c.opts.KeepaliveCountMax)*c.opts.KeepaliveInterval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	started := time.Now()
	var inflight atomic.Bool
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		heard := c.heard.lastHeard()
		if heard.Before(started) {
			heard = started
		}
		if silent := time.Since(heard); silent > limit {
			c.end(fmt.Errorf("%w: %s: nothing heard for %s (interval %s, %d missed)",
				ErrKeepaliveTimeout, c.target.HostPort(), silent.Round(time.Millisecond), interval, c.opts.KeepaliveCountMax))
			return
		}
		if !inflight.CompareAndSwap(false, true) {
			continue // the last request is still unanswered
		}
		go func() {
			_, _, _ = c.ssh.SendRequest("keepalive@openssh.com", true, nil)
			inflight.Store(false)
		}()
	}
}

// Result is a finished remote command.
type Result struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	Duration time.Duration
}

// Limits on what Run keeps of a command's output.
const (
	maxRunStdout = 32 << 20
	maxRunStderr = 64 << 10
)

// ErrOutputTooLarge: a command printed more than Run keeps.
var ErrOutputTooLarge = errors.New("sshrun: command output too large")

// Run runs argv on the host with stdin (nil for none) and returns its exit
// code and output. A non-zero exit code is not an error; the error is for
// the transport (ErrConnectionLost...), a cancelled ctx, or stdout beyond
// 32 MiB. Stderr keeps its first 64 KiB.
func (c *Client) Run(ctx context.Context, argv []string, stdin io.Reader) (Result, error) {
	start := time.Now()
	stdout := &limitedBuffer{limit: maxRunStdout}
	stderr := &limitedBuffer{limit: maxRunStderr, truncate: true}
	code, err := c.Stream(ctx, argv, stdin, stdout, stderr)
	res := Result{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Duration: time.Since(start)}
	if err == nil && stdout.over {
		err = fmt.Errorf("%w: %s printed more than %d bytes", ErrOutputTooLarge, argv[0], maxRunStdout)
	}
	return res, err
}

// Stream runs argv with the given standard streams (nil stdout or stderr
// discards) and returns the exit code. It returns when the command has
// exited and its output was copied, when the connection ends
// (ErrConnectionLost, ErrKeepaliveTimeout) or when ctx ends (the remote
// command is sent SIGKILL, which OpenSSH honours for non-root users, and
// its session is closed; the caller's streams are not touched after
// Stream returns).
func (c *Client) Stream(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	line, err := CommandLine(argv)
	if err != nil {
		return -1, err
	}
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	// The session's copying goroutines may outlive a cancelled Stream (see
	// below): the gates make sure nothing touches the caller's streams
	// after it returns.
	in, out, errOut := &gatedReader{r: stdin}, &gatedWriter{w: orDiscard(stdout)}, &gatedWriter{w: orDiscard(stderr)}
	defer func() { in.shut(); out.shut(); errOut.shut() }()
	sess, err := c.start(ctx, line, stdin != nil, in, out, errOut)
	if err != nil {
		return -1, fmt.Errorf("sshrun: %s: %w", argv[0], err)
	}
	defer sess.Close()
	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		// OpenSSH delivers the signal to the command's process group, but
		// not in sessions of root (no privilege separation there), and
		// closing the channel does not end the command either: it lives on
		// until it writes to the closed pipe or exits. Stop waiting for it
		// after a moment.
		_ = sess.Signal(ssh.SIGKILL)
		_ = sess.Close()
		select {
		case <-waited:
		case <-time.After(time.Second):
		}
		return -1, fmt.Errorf("sshrun: %s: %w", argv[0], ctx.Err())
	}
	var exitErr *ssh.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exitErr):
		if exitErr.Signal() != "" {
			return -1, fmt.Errorf("sshrun: %s: killed by signal %s", argv[0], exitErr.Signal())
		}
		return exitErr.ExitStatus(), nil
	default:
		return -1, c.lost(argv[0], err)
	}
}

// start opens a session and starts line in it. Opening and starting wait
// for the host's answers, which a silent connection never gives: they run
// aside so that ctx is obeyed (a session that opens after ctx ended is
// closed at once; the command may have started on the host all the same,
// which is why every remote step of a run is safe to repeat).
func (c *Client) start(ctx context.Context, line string, withStdin bool, stdin io.Reader, stdout, stderr io.Writer) (*ssh.Session, error) {
	type started struct {
		sess *ssh.Session
		err  error
	}
	ch := make(chan started, 1)
	go func() {
		sess, err := c.ssh.NewSession()
		if err != nil {
			ch <- started{nil, c.lost("open session", err)}
			return
		}
		if withStdin {
			sess.Stdin = stdin
		}
		sess.Stdout, sess.Stderr = stdout, stderr
		if err := sess.Start(line); err != nil {
			_ = sess.Close()
			ch <- started{nil, c.lost("start", err)}
			return
		}
		ch <- started{sess, nil}
	}()
	select {
	case s := <-ch:
		return s.sess, s.err
	case <-ctx.Done():
		go func() {
			if s := <-ch; s.sess != nil {
				_ = s.sess.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// gatedWriter passes writes on until shut, and discards them after.
type gatedWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return len(p), nil
	}
	return g.w.Write(p)
}

func (g *gatedWriter) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// gatedReader passes reads on until shut, and reports end of input after.
type gatedReader struct {
	mu     sync.Mutex
	r      io.Reader
	closed bool
}

func (g *gatedReader) Read(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0, io.EOF
	}
	return g.r.Read(p)
}

func (g *gatedReader) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// lost turns a session failure into the connection's end cause when the
// connection is down, so callers see ErrKeepaliveTimeout or
// ErrConnectionLost rather than a bare EOF.
func (c *Client) lost(what string, err error) error {
	select {
	case <-c.done:
	case <-time.After(100 * time.Millisecond): // let watch notice a dying connection
	}
	if cause := c.Err(); cause != nil {
		return fmt.Errorf("sshrun: %s: %w", what, cause)
	}
	return fmt.Errorf("sshrun: %s: %w: %v", what, ErrConnectionLost, err)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// limitedBuffer keeps at most limit bytes: beyond it, it either drops the
// rest quietly (truncate) or remembers that it overflowed.
type limitedBuffer struct {
	bytes.Buffer
	limit    int
	truncate bool
	over     bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	room := b.limit - b.Len()
	if len(p) > room {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil // keep the remote side flowing
	}
	return b.Buffer.Write(p)
}
