// Package loadgen is the probe's load generator for OpenAI-compatible
// streaming APIs: closed-loop (fixed concurrency) and open-loop (constant or
// Poisson request rate) load, timing every chunk before decoding it.
//
// What it measures follows docs/DESIGN.md's definitions. Per request, on the
// monotonic clock since the level started (nanoseconds):
//
//   - t_intended: when the schedule meant to send it (open loop), or when
//     the worker was ready to (closed loop);
//   - t_sent: when the whole request had been handed to the kernel, so that
//     waiting for or dialing a connection counts as client-side delay
//     (send_delay), not as server latency;
//   - t_first_chunk: the first data chunk of any kind;
//   - t_first_token: the first chunk carrying content, reasoning or a tool
//     call (the role-only first chunk of vLLM and SGLang does not count);
//   - t_first_content, t_last_token, and t_done: data: [DONE] (or the
//     failure).
//
// Each chunk is timestamped when the network read that delivered its last
// bytes returned, before it is parsed or decoded. Token counts come from the
// final usage chunk; a stream without one is counted chunk by chunk and
// flagged (usage_counted).
//
// A level runs Warmup first (requests intended in it are recorded with
// warmup=true and left out of every statistic), then the measured part:
// Step.Duration and/or Step.Requests measured requests, whichever ends
// first. Requests in flight at the end are waited for (each is bounded by
// Step.RequestTimeout); ending ctx aborts them, and aborted requests are not
// recorded.
//
// Synthetic prompts are words of a common vocabulary, about one token each
// on a real tokenizer and exactly one on the emulator; with Step.Prefix, one
// of Distinct shared prefixes of Prefix.Tokens words comes before the
// request's own PromptTokens words. Requests ask for max_tokens, and
// min_tokens and ignore_eos of the same value so that servers honouring them
// produce exactly that many tokens; a server rejecting those fields (HTTP 400
// naming them) gets the request again without them, and the level goes on
// without them.
//
// Memory does not grow with the number of requests: records are encoded and
// written as requests finish, and distributions live in HDR histograms.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// Level is one load level of a step: a concurrency or a request rate.
type Level struct {
	Concurrency int     // closed loop when > 0
	Rate        float64 // open loop (requests per second) when > 0
	Label       string  // "c=16", "r=8" or "reuse=0.5", used as the Measurement level
	// Reuse is, in a prefix-reuse sweep, the level's share of each prompt
	// that is one of Step.Prefix.Distinct shared prefixes (nil: the step's
	// own prefix settings).
	Reuse *float64
}

// Config is one level of one inference step.
type Config struct {
	Step   acceptance.InferenceStep
	Level  Level
	Warmup time.Duration
	// Records receives one JSON line (wire.RequestRecord) per request. Nil
	// discards them.
	Records io.Writer
	// Interim, when set, is called about every InterimEvery (default 2s)
	// with the statistics of the window since the previous call, and once
	// more at the end for the last partial window if it saw requests. Only
	// Level and WindowSec are filled in besides the metrics: the caller adds
	// the step and repetition. Warm-up requests are left out. It is called
	// from one goroutine, and should return quickly.
	Interim      func(wire.Interim)
	InterimEvery time.Duration
	// Header is sent with every request, e.g. Authorization for a protected
	// endpoint, or the emulator's X-Emulate-Fault in tests.
	Header http.Header
	// PromptSalt, when not 0, is mixed into each synthetic prompt's own
	// words (never into the shared prefixes): the levels and repetitions of
	// a prefix-reuse sweep each pass it a salt of their own, so that none
	// sends another's prompts again and the server's cache can hit only
	// what the share makes shared.
	PromptSalt uint64
}

// Error kinds of wire.RequestRecord.
const (
	ErrHTTP       = "http"         // HTTP status outside 2xx
	ErrStream     = "stream-error" // an error event or error object inside the stream
	ErrIncomplete = "incomplete"   // the stream ended without data: [DONE]
	ErrTimeout    = "timeout"      // Step.RequestTimeout passed
	ErrConnect    = "connect"      // no response: dial, reset or closed before the headers
)

const (
	defaultTimeout = 10 * time.Minute // when Step.RequestTimeout is 0
	defaultInterim = 2 * time.Second  // when Config.InterimEvery is 0
)

// Run drives one level until its duration or request count is reached or ctx
// ends, and returns the summary. Failed requests are records, not errors;
// an error means the level could not be run at all (bad configuration, an
// unreadable dataset, records that cannot be written), or that ctx ended:
// then the summary of what was done is returned with ctx's error.
func Run(ctx context.Context, cfg Config) (*wire.InferenceSummary, error) {
	g, err := newGenerator(cfg)
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	defer g.release()
	return g.run(ctx)
}

type generator struct {
	cfg      Config
	step     acceptance.InferenceStep
	url      *url.URL
	chat     bool
	ep       *endpoint
	conns    conns
	prompts  promptSource
	timeout  time.Duration
	requests int64 // measured requests to send; 0: no count limit

	clock     clock
	warmupEnd int64 // ns since the level's start
	end       int64 // ns since the level's start; 0: no time limit
	endCh     chan struct{}

	ctx    context.Context
	cancel context.CancelCauseFunc

	nextID   atomic.Int64
	measured atomic.Int64
	// hints: send min_tokens and ignore_eos, until a server rejects them.
	hints atomic.Bool

	stats *stats
	check *selfCheck

	recMu sync.Mutex
	recW  *bufio.Writer

	freeMu sync.Mutex
	free   []*worker
}

func newGenerator(cfg Config) (*generator, error) {
	step := cfg.Step
	if share := cfg.Level.Reuse; share != nil {
		if step.Prefix == nil {
			return nil, errors.New("a reuse level needs the step's prefix (its distinct prefixes)")
		}
		step.Prefix = &acceptance.PrefixReuse{Share: *share, Distinct: step.Prefix.Distinct}
	}
	u, err := url.Parse(strings.TrimRight(step.Endpoint, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q is not an http(s) URL", step.Endpoint)
	}
	g := &generator{cfg: cfg, step: step, timeout: step.RequestTimeout.D(), requests: int64(step.Requests)}
	switch step.API {
	case "", "chat":
		g.chat = true
		u = u.JoinPath("chat", "completions")
	case "completions":
		u = u.JoinPath("completions")
	default:
		return nil, fmt.Errorf("api %q is not chat or completions", step.API)
	}
	g.url = u
	switch {
	case cfg.Level.Concurrency > 0 && cfg.Level.Rate > 0:
		return nil, errors.New("level sets both a concurrency and a rate")
	case cfg.Level.Concurrency <= 0 && !(cfg.Level.Rate > 0):
		return nil, errors.New("level needs a concurrency or a rate")
	}
	switch step.Load.Arrival {
	case "", "constant", "poisson":
	default:
		return nil, fmt.Errorf("arrival %q is not constant or poisson", step.Load.Arrival)
	}
	if step.Duration <= 0 && step.Requests <= 0 {
		return nil, errors.New("step needs a duration or a request count")
	}
	if step.Requests < 0 || step.Load.MaxConcurrency < 0 || cfg.Warmup < 0 {
		return nil, errors.New("requests, max_concurrency and warmup must not be negative")
	}
	if g.timeout <= 0 {
		g.timeout = defaultTimeout
	}
	if cfg.InterimEvery <= 0 {
		g.cfg.InterimEvery = defaultInterim
	}
	g.prompts, err = newPromptSource(step, cfg.PromptSalt)
	if err != nil {
		return nil, err
	}
	g.hints.Store(true)
	g.stats = newStats()
	if cfg.Records != nil {
		g.recW = bufio.NewWriterSize(cfg.Records, 256<<10)
	}

	g.ep, err = newEndpoint(u, cfg.Header)
	if err != nil {
		_ = g.prompts.close()
		return nil, err
	}
	return g, nil
}

func (g *generator) release() {
	g.conns.closeAll()
	_ = g.prompts.close()
}

// fatal stops the level because it cannot go on.
func (g *generator) fatal(err error) { g.cancel(err) }

func (g *generator) run(parent context.Context) (*wire.InferenceSummary, error) {
	g.ctx, g.cancel = context.WithCancelCause(parent)
	defer g.cancel(nil)
	// Ending the level interrupts the requests in flight.
	stopInterrupt := context.AfterFunc(g.ctx, g.conns.interrupt)
	defer stopInterrupt()
	g.clock = clock{t0: time.Now()}
	g.check = startSelfCheck()
	g.warmupEnd = int64(g.cfg.Warmup)
	g.endCh = make(chan struct{})
	if d := g.step.Duration.D(); d > 0 {
		g.end = g.warmupEnd + int64(d)
		t := time.AfterFunc(time.Duration(g.end), func() { close(g.endCh) })
		defer t.Stop()
	}

	interimDone := make(chan struct{})
	var interimWG sync.WaitGroup
	if g.cfg.Interim != nil {
		interimWG.Go(func() { g.interimLoop(interimDone) })
	}

	if c := g.cfg.Level.Concurrency; c > 0 {
		g.closedLoop(c)
	} else {
		g.openLoop(g.cfg.Level.Rate)
	}
	close(interimDone)
	interimWG.Wait()
	selfCheck := g.check.finish(g.cfg.Level.Concurrency <= 0, g.stats)

	var werr error
	if g.recW != nil {
		if err := g.recW.Flush(); err != nil {
			werr = fmt.Errorf("loadgen: write request records: %w", err)
		}
	}
	sum := g.summary()
	sum.SelfCheck = selfCheck
	if cause := context.Cause(g.ctx); cause != nil && parent.Err() == nil {
		return sum, fmt.Errorf("loadgen: %w", cause) // fatal
	}
	if err := parent.Err(); err != nil {
		return sum, fmt.Errorf("loadgen: level stopped: %w", err)
	}
	return sum, werr
}

func (g *generator) summary() *wire.InferenceSummary {
	s := g.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := &wire.InferenceSummary{
		Requests:      s.succeeded + s.failed,
		Succeeded:     s.succeeded,
		Failed:        s.failed,
		WarmupDropped: s.warmupDropped,
		UsageMissing:  s.usageMissing,
		ITL:           buckets(s.itl),
		OfferedRate:   g.cfg.Level.Rate,
		Concurrency:   g.cfg.Level.Concurrency,
	}
	if s.lastDone > g.warmupEnd {
		sum.WindowSec = float64(s.lastDone-g.warmupEnd) / 1e9
	}
	return sum
}

func (g *generator) interimLoop(done <-chan struct{}) {
	t := time.NewTicker(g.cfg.InterimEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			// The last, shorter window: every measured request is in
			// exactly one window.
			if in := g.stats.interim(g.clock.now(), g.cfg.Level.Label); in.Metrics[acceptance.MetricErrorRate].N > 0 {
				g.cfg.Interim(in)
			}
			return
		case <-t.C:
			g.cfg.Interim(g.stats.interim(g.clock.now(), g.cfg.Level.Label))
		}
	}
}

// claim takes the next request of the closed loop, or says the level is over.
func (g *generator) claim() (id, now int64, warm, ok bool) {
	now = g.clock.now()
	if g.ctx.Err() != nil || (g.end > 0 && now >= g.end) {
		return 0, 0, false, false
	}
	warm = now < g.warmupEnd
	if !warm && g.requests > 0 && g.measured.Add(1) > g.requests {
		return 0, 0, false, false
	}
	return g.nextID.Add(1) - 1, now, warm, true
}

// closedLoop keeps n requests in flight: each worker sends its next request
// as soon as the previous one is done. It is intended when the worker
// claimed it, the instant that also decided whether it is warm-up, so every
// warm-up record is intended within the warm-up; building the prompt and
// any retry count as send delay.
func (g *generator) closedLoop(n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			w := g.getWorker()
			defer g.putWorker(w)
			for {
				id, now, warm, ok := g.claim()
				if !ok {
					return
				}
				g.do(w, id, now, warm)
			}
		})
	}
	wg.Wait()
}

// openLoop sends requests at their intended times, whatever happened to the
// earlier ones. Intended times follow the schedule even when the client
// falls behind (MaxConcurrency reached, slow scheduling), so that queueing
// on the client shows in send_delay and the *_intended metrics.
func (g *generator) openLoop(rate float64) {
	arrivals := rand.New(rand.NewPCG(uint64(g.step.Seed), streamArrival))
	poisson := g.step.Load.Arrival == "poisson"
	var sem chan struct{}
	if c := g.step.Load.MaxConcurrency; c > 0 {
		sem = make(chan struct{}, c)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var wg sync.WaitGroup
	next := 0.0 // ns; float so that rounding does not accumulate
	for {
		intended := int64(next)
		if g.end > 0 && intended >= g.end {
			break
		}
		warm := intended < g.warmupEnd
		if !warm && g.requests > 0 && g.measured.Load() >= g.requests {
			break
		}
		if !g.sleepUntil(timer, intended) {
			break
		}
		if !warm {
			g.check.late(g.clock.now() - intended)
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			case <-g.ctx.Done():
			case <-g.endCh:
			}
			if g.ctx.Err() != nil || (g.end > 0 && g.clock.now() >= g.end) {
				break
			}
		}
		if !warm {
			g.measured.Add(1)
		}
		id := g.nextID.Add(1) - 1
		wg.Go(func() {
			w := g.getWorker()
			g.do(w, id, intended, warm)
			g.putWorker(w)
			if sem != nil {
				<-sem
			}
		})
		gap := 1e9 / rate
		if poisson {
			gap = arrivals.ExpFloat64() * 1e9 / rate
		}
		next += gap
	}
	wg.Wait()
}

// sleepUntil waits for the level's time t; false when the level is stopped.
func (g *generator) sleepUntil(timer *time.Timer, t int64) bool {
	d := time.Duration(t - g.clock.now())
	if d <= 0 {
		return g.ctx.Err() == nil
	}
	timer.Reset(d)
	select {
	case <-timer.C:
		return true
	case <-g.ctx.Done():
		timer.Stop()
		return false
	}
}

// worker holds what one in-flight request needs: its connection and
// buffers, reused from request to request, so that a request allocates
// next to nothing.
type worker struct {
	c       *conn
	req     request
	bodyBuf []byte // the request's JSON body
	msg     []byte // the request on the wire
	resp    response
	body    body
	sse     *sseReader
	ev      event
	ch      chunk
	memo    chunkMemo
	itl     []int64
	rec     wire.RequestRecord
	out     []byte
	scratch []byte
}

func (g *generator) getWorker() *worker {
	g.freeMu.Lock()
	if n := len(g.free); n > 0 {
		w := g.free[n-1]
		g.free = g.free[:n-1]
		g.freeMu.Unlock()
		return w
	}
	g.freeMu.Unlock()
	return &worker{sse: newSSEReader(), scratch: make([]byte, 4<<10)}
}

func (g *generator) putWorker(w *worker) {
	g.freeMu.Lock()
	g.free = append(g.free, w)
	g.freeMu.Unlock()
}

// do sends request id and records it.
func (g *generator) do(w *worker, id, intended int64, warm bool) {
	if err := g.prompts.next(id, &w.req); err != nil {
		g.fatal(err)
		return
	}
	deadline := time.Now().Add(g.timeout)
	// At most one retry for each reason: a keep-alive connection the
	// server had closed, and length hints the server rejected.
	for attempt := 0; attempt < 3; attempt++ {
		if !g.exchange(w, id, intended, warm, deadline) {
			break
		}
	}
	if g.ctx.Err() != nil && w.rec.ErrorKind != "" {
		return // aborted with the level: not a measurement
	}
	if w.rec.ErrorKind != "" {
		w.itl = w.itl[:0]
	}
	if g.recW != nil {
		w.out = appendRecord(w.out[:0], &w.rec)
		g.recMu.Lock()
		_, err := g.recW.Write(w.out)
		g.recMu.Unlock()
		if err != nil {
			g.fatal(fmt.Errorf("write request records: %w", err))
		}
	}
	g.stats.add(&w.rec, w.itl)
}

// exchange sends the request once and reads its response into w.rec. It
// returns true when the request should be sent again: the connection was
// a kept-alive one that turned out closed, or the server rejected the
// length hints (min_tokens, ignore_eos).
func (g *generator) exchange(w *worker, id, intended int64, warm bool, deadline time.Time) (retry bool) {
	rec := &w.rec
	*rec = wire.RequestRecord{ID: id, Warmup: warm, Intended: intended}
	w.itl = w.itl[:0]
	start := g.clock.now()
	if w.c != nil && time.Since(w.c.lastUsed) > idleTimeout {
		g.dropConn(w)
	}
	if w.c == nil {
		ctx, cancel := context.WithDeadline(g.ctx, deadline)
		c, err := g.ep.dial(ctx, g.clock)
		cancel()
		if err == nil && !g.conns.add(c) {
			_ = c.nc.Close()
			err = context.Canceled
		}
		if err != nil {
			rec.Sent = start
			g.failed(rec, ErrConnect, err, deadline)
			return false
		}
		w.c = c
	}
	c := w.c
	reused := c.reused
	_ = c.nc.SetDeadline(deadline)

	hints := g.hints.Load()
	w.bodyBuf = g.appendBody(w.bodyBuf[:0], &w.req, hints)
	w.msg = g.appendRequest(w.msg[:0], id, w.bodyBuf)
	_, err := c.nc.Write(w.msg)
	// Sent is when the request was handed to the kernel: waiting for a
	// connection or dialing one is client-side delay, shown by send_delay
	// (and the *_intended metrics), not server latency.
	rec.Sent = g.clock.now()
	if err == nil {
		err = readResponse(c.br, &w.resp)
	}
	if err != nil {
		g.dropConn(w)
		if reused && g.ctx.Err() == nil && time.Now().Before(deadline) &&
			(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
			return true // the server closed the idle connection first
		}
		g.failed(rec, ErrConnect, err, deadline)
		return false
	}
	keep := !w.resp.close
	w.body.reset(c.br, &w.resp)
	if w.resp.status < 200 || w.resp.status > 299 {
		n, _ := io.ReadFull(&w.body, w.scratch)
		msg := strings.TrimSpace(string(w.scratch[:n]))
		if _, err := io.CopyN(io.Discard, &w.body, 64<<10); !errors.Is(err, io.EOF) {
			keep = false
		}
		rec.Done = g.clock.now()
		g.finishConn(w, keep)
		if hints && w.resp.status == http.StatusBadRequest &&
			(strings.Contains(msg, "min_tokens") || strings.Contains(msg, "ignore_eos")) {
			g.hints.Store(false)
			return true
		}
		rec.ErrorKind, rec.HTTPStatus = ErrHTTP, w.resp.status
		rec.Error = fmt.Sprintf("HTTP %d: %s", w.resp.status, msg)
		return false
	}
	clean := g.stream(w, deadline)
	g.finishConn(w, keep && clean)
	return false
}

func (g *generator) dropConn(w *worker) {
	if w.c != nil {
		g.conns.close(w.c)
		w.c = nil
	}
}

// finishConn keeps the connection for the next request, or closes it.
func (g *generator) finishConn(w *worker, keep bool) {
	if !keep {
		g.dropConn(w)
		return
	}
	w.c.lastUsed = time.Now()
	w.c.reused = true
}

// failed records a failure: a timeout when the request's deadline passed,
// else kind.
func (g *generator) failed(rec *wire.RequestRecord, kind string, err error, deadline time.Time) {
	if rec.Done == 0 {
		rec.Done = g.clock.now()
	}
	if rec.ErrorKind != "" {
		return
	}
	if g.ctx.Err() == nil && !time.Now().Before(deadline) &&
		(errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)) {
		kind = ErrTimeout
		err = fmt.Errorf("no complete response within %s", g.timeout)
	}
	rec.ErrorKind, rec.Error = kind, err.Error()
}

var doneData = []byte("[DONE]")

// isDone says the event is data: [DONE]. Chunks are JSON objects, which
// are told apart by their first byte without trimming them.
func isDone(data []byte) bool {
	if len(data) > 0 && data[0] == '{' {
		return false
	}
	return bytes.Equal(bytes.TrimSpace(data), doneData)
}

// stream reads the event stream of a 2xx response. It returns whether the
// body was read to its end, so that the connection can be reused.
func (g *generator) stream(w *worker, deadline time.Time) (clean bool) {
	rec := &w.rec
	s := w.sse
	s.reset(&w.body, &w.c.tr)
	var (
		sawDone, sawUsage        bool
		promptUsage, outputUsage int64
		prevCompletion           int64
		counted                  int
	)
	for {
		err := s.next(&w.ev)
		if err != nil {
			if errors.Is(err, io.EOF) {
				rec.Done = g.clock.now()
				rec.ErrorKind, rec.Error = ErrIncomplete, "the stream ended without data: [DONE]"
				if ct := w.resp.contentType; ct != "" && !strings.Contains(ct, "event-stream") {
					rec.Error = "the response is " + ct + ", not an event stream"
				}
				clean = true
			} else {
				g.failed(rec, ErrIncomplete, err, deadline)
			}
			break
		}
		ev := &w.ev
		if isDone(ev.data) {
			sawDone = true
			rec.Done = ev.at
			break
		}
		rec.Chunks++
		if rec.FirstChunk == 0 {
			rec.FirstChunk = ev.at
		}
		if string(ev.kind) == "error" {
			rec.Done = ev.at
			rec.ErrorKind, rec.Error = ErrStream, "error event: "+truncate(ev.data, 512)
			break
		}
		c := &w.ch
		if err := w.memo.decode(ev.data, c); err != nil {
			rec.Done = ev.at
			rec.ErrorKind, rec.Error = ErrStream, "undecodable chunk: "+err.Error()
			break
		}
		if c.failed {
			rec.Done = ev.at
			rec.ErrorKind, rec.Error = ErrStream, c.errMsg
			break
		}
		if c.tokens {
			// A chunk carrying several tokens (known when the server sends
			// usage with every chunk) spreads its gap over them.
			n := int64(1)
			if c.usage && c.completionTokens > prevCompletion {
				n = c.completionTokens - prevCompletion
			}
			if rec.FirstToken == 0 {
				rec.FirstToken = ev.at
			} else {
				gap := ev.at - rec.LastToken
				for range n {
					w.itl = append(w.itl, gap/n)
				}
			}
			rec.LastToken = ev.at
			counted += int(n)
			if c.content && rec.FirstContent == 0 {
				rec.FirstContent = ev.at
			}
		}
		if c.usage {
			sawUsage = true
			promptUsage, outputUsage = c.promptTokens, c.completionTokens
			prevCompletion = c.completionTokens
		}
	}
	if sawDone {
		// Read the end of the body so that the connection can be reused.
		clean = s.drain(64 << 10)
	}
	if sawUsage {
		rec.PromptTokens, rec.OutputTokens = int(promptUsage), int(outputUsage)
	} else {
		rec.PromptTokens, rec.OutputTokens, rec.UsageCounted = w.req.promptTokens, counted, true
	}
	return clean
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// appendRequest builds the whole request: head, then the JSON body.
func (g *generator) appendRequest(b []byte, id int64, body []byte) []byte {
	b = append(b, g.ep.head...)
	b = append(b, "X-Request-Id: "...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

// appendBody builds the JSON request body.
func (g *generator) appendBody(b []byte, r *request, hints bool) []byte {
	b = append(b, '{')
	if g.step.Model != "" {
		b = append(b, `"model":"`...)
		b = appendJSONStringBody(b, g.step.Model)
		b = append(b, `",`...)
	}
	if g.chat {
		b = append(b, `"messages":[{"role":"user","content":"`...)
		b = append(b, r.prompt...)
		b = append(b, `"}],`...)
	} else {
		b = append(b, `"prompt":"`...)
		b = append(b, r.prompt...)
		b = append(b, `",`...)
	}
	b = append(b, `"max_tokens":`...)
	b = strconv.AppendInt(b, int64(r.maxTokens), 10)
	if hints {
		b = append(b, `,"min_tokens":`...)
		b = strconv.AppendInt(b, int64(r.maxTokens), 10)
		b = append(b, `,"ignore_eos":true`...)
	}
	return append(b, `,"stream":true,"stream_options":{"include_usage":true}}`...)
}
