package sshrun

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff is an exponential backoff with a limit on attempts.
type Backoff struct {
	Initial    time.Duration // first wait; default 1s
	Max        time.Duration // longest wait; default 30s
	Multiplier float64       // default 2
	Attempts   int           // attempts in all, the first included; default 5
	// Jitter spreads each wait by ±Jitter (0..1) of itself so that many
	// workers do not knock together; default 0.2, negative for none.
	Jitter float64
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = time.Second
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	if b.Multiplier < 1 {
		b.Multiplier = 2
	}
	if b.Attempts <= 0 {
		b.Attempts = 5
	}
	if b.Jitter == 0 {
		b.Jitter = 0.2
	}
	if b.Jitter < 0 || b.Jitter > 1 {
		b.Jitter = 0
	}
	return b
}

// Wait is the pause before attempt n+1 after n failed attempts (n ≥ 1).
func (b Backoff) Wait(n int) time.Duration {
	b = b.withDefaults()
	d := float64(b.Initial)
	for i := 1; i < n && d < float64(b.Max); i++ {
		d *= b.Multiplier
	}
	d = min(d, float64(b.Max))
	if b.Jitter > 0 {
		d *= 1 + b.Jitter*(2*rand.Float64()-1)
	}
	return time.Duration(d)
}

// Retry calls fn until it succeeds, returns an error that IsRetryable does
// not accept, the attempts run out, or ctx ends. It is for the phase before
// the probe is launched (and for reconnecting to follow it): a host key
// change or an authentication failure returns at once.
func Retry(ctx context.Context, b Backoff, fn func(ctx context.Context) error) error {
	b = b.withDefaults()
	var err error
	for n := 1; ; n++ {
		if err = fn(ctx); err == nil {
			return nil
		}
		if !IsRetryable(err) {
			return err
		}
		if n >= b.Attempts {
			return fmt.Errorf("sshrun: gave up after %d attempts: %w", n, err)
		}
		t := time.NewTimer(b.Wait(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("sshrun: retry cancelled after %d attempts (last: %v): %w", n, err, ctx.Err())
		case <-t.C:
		}
	}
}

// Host is a lab host reached over SSH, reconnected on demand: the runner's
// handle across a run. Its methods redial (with Backoff, retryable errors
// only) when the connection is gone.
type Host struct {
	Target  Target
	Options Options
	Backoff Backoff
	// ProbePath, when set, is the probe on the host for new connections (the
	// path from an earlier EnsureProbe, as stored by the caller). A new
	// connection also inherits the probe of the connection it replaces.
	ProbePath string

	mu sync.Mutex
	c  *Client
}

// Client returns the live connection, dialling a new one if there is none
// or the last one ended.
func (h *Host) Client(ctx context.Context) (*Client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c != nil {
		select {
		case <-h.c.Done():
			h.forget()
		default:
			return h.c, nil
		}
	}
	var c *Client
	err := Retry(ctx, h.Backoff, func(ctx context.Context) error {
		var err error
		c, err = Dial(ctx, h.Target, h.Options)
		return err
	})
	if err != nil {
		return nil, err
	}
	if h.ProbePath != "" {
		c.UseProbe(h.ProbePath)
	}
	h.c = c
	return c, nil
}

// Close closes the current connection, if any.
func (h *Host) Close() error {
	h.mu.Lock()
	c := h.c
	h.c = nil
	h.mu.Unlock()
	if c != nil {
		return c.Close()
	}
	return nil
}

// forget drops the current client, keeping its probe path; h.mu is held.
func (h *Host) forget() {
	if p, err := h.c.probePath(); err == nil && h.ProbePath == "" {
		h.ProbePath = p
	}
	h.c = nil
}

// drop forgets c (if it is still the current client) and closes it.
func (h *Host) drop(c *Client) {
	h.mu.Lock()
	if h.c == c {
		h.forget()
	}
	h.mu.Unlock()
	_ = c.Close()
}

// FollowResult for Host.Follow adds how many times it reconnected.
type HostFollowResult struct {
	FollowResult
	Reconnects int
}

// Follow follows the run in runDir from offset until it finishes or the
// probe crashes, reconnecting (a new Dial) and resuming from the offset
// whenever the connection drops. It gives up after Backoff.Attempts
// consecutive drops that delivered no line, or when a dial fails for good.
func (h *Host) Follow(ctx context.Context, runDir string, offset int64, onLine func([]byte) error) (HostFollowResult, error) {
	b := h.Backoff.withDefaults()
	out := HostFollowResult{FollowResult: FollowResult{Offset: offset}}
	barren := 0 // consecutive drops without progress
	for {
		c, err := h.Client(ctx)
		if err != nil {
			return out, fmt.Errorf("sshrun: follow %s: reconnect: %w", runDir, err)
		}
		res, err := c.Follow(ctx, runDir, out.Offset, onLine)
		out.Offset = res.Offset
		out.Lines += res.Lines
		out.Outcome, out.Err = res.Outcome, res.Err
		if err != nil || res.Outcome != ConnectionLost {
			return out, err
		}
		h.drop(c)
		if res.Lines > 0 {
			barren = 0
		} else {
			barren++
		}
		if barren >= b.Attempts {
			return out, fmt.Errorf("sshrun: follow %s: connection lost %d times without progress: %w", runDir, barren, res.Err)
		}
		out.Reconnects++
		t := time.NewTimer(b.Wait(max(barren, 1)))
		select {
		case <-ctx.Done():
			t.Stop()
			return out, fmt.Errorf("sshrun: follow %s: %w", runDir, ctx.Err())
		case <-t.C:
		}
	}
}
