// Package loadgen is the probe's load generator for OpenAI-compatible
// streaming APIs: closed-loop (fixed concurrency) and open-loop (constant or
// Poisson request rate) load, timing every chunk before decoding it.
//
// What it measures follows DESIGN.md's definitions. Per request, on the
// monotonic clock since the level started: the intended send time, the send
// (just before the HTTP request is handed to the client), the first data
// chunk of any kind, the first chunk carrying content, reasoning or a tool
// call (the role-only first chunk of vLLM and SGLang does not count), the
// first visible content, the last token and the end of the stream. Each
// chunk is timestamped when the read that delivered its bytes returned,
// before it is parsed. Token counts come from the final usage chunk; a
// stream without one is counted chunk by chunk and flagged.
//
// A level runs Warmup first (requests intended in it are recorded with
// warmup=true and left out of every statistic), then the measured part:
// Step.Duration and/or Step.Requests measured requests, whichever ends
// first. Requests in flight at the end are waited for (each is bounded by
// Step.RequestTimeout); ending ctx aborts them, and aborted requests are not
// recorded.
//
// Memory does not grow with the number of requests: records are encoded and
// written as requests finish, and distributions live in HDR histograms.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// Level is one load level of a step: a concurrency or a request rate.
type Level struct {
	Concurrency int     // closed loop when > 0
	Rate        float64 // open loop (requests per second) when > 0
	Label       string  // "c=16" or "r=8", used as the Measurement level
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
}

// Error kinds of wire.RequestRecord.
const (
	ErrHTTP        = "http"         // HTTP status outside 2xx
	ErrStream      = "stream-error" // an error event or error object inside the stream
	ErrIncomplete  = "incomplete"   // the stream ended without data: [DONE]
	ErrTimeout     = "timeout"      // Step.RequestTimeout passed
	ErrConnect     = "connect"      // no response: dial, reset or closed before the headers
	defaultTimeout = 10 * time.Minute
	defaultInterim = 2 * time.Second
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
	cfg       Config
	step      acceptance.InferenceStep
	url       *url.URL
	chat      bool
	client    *http.Client
	transport *http.Transport
	prompts   promptSource
	timeout   time.Duration
	requests  int64 // measured requests to send; 0: no count limit

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

	recMu sync.Mutex
	recW  *bufio.Writer

	freeMu sync.Mutex
	free   []*worker
}

func newGenerator(cfg Config) (*generator, error) {
	step := cfg.Step
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
	g.prompts, err = newPromptSource(step)
	if err != nil {
		return nil, err
	}
	g.hints.Store(true)
	g.stats = newStats()
	if cfg.Records != nil {
		g.recW = bufio.NewWriterSize(cfg.Records, 256<<10)
	}

	pool := cfg.Level.Concurrency
	if pool == 0 {
		pool = step.Load.MaxConcurrency
	}
	if pool == 0 {
		pool = 1024
	}
	g.transport = &http.Transport{
		Proxy: nil, // a proxy in the path would be measured too
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:        pool,
		MaxIdleConnsPerHost: pool,
		// Below uvicorn's 5 s keep-alive (vLLM, SGLang), so that the client
		// never sends on a connection the server is closing: a POST is not
		// retried.
		IdleConnTimeout:    4 * time.Second,
		DisableCompression: true,
		// One stream per connection, as the usual benchmark clients do.
		TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{},
		ReadBufferSize:  16 << 10,
		WriteBufferSize: 16 << 10,
	}
	g.client = &http.Client{
		Transport:     g.transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return g, nil
}

func (g *generator) release() {
	g.transport.CloseIdleConnections()
	_ = g.prompts.close()
}

// fatal stops the level because it cannot go on.
func (g *generator) fatal(err error) { g.cancel(err) }

func (g *generator) run(parent context.Context) (*wire.InferenceSummary, error) {
	g.ctx, g.cancel = context.WithCancelCause(parent)
	defer g.cancel(nil)
	g.clock = clock{t0: time.Now()}
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

	var werr error
	if g.recW != nil {
		if err := g.recW.Flush(); err != nil {
			werr = fmt.Errorf("loadgen: write request records: %w", err)
		}
	}
	sum := g.summary()
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
// as soon as the previous one is done, so intended and sent times coincide.
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

// worker holds the buffers one in-flight request needs; they are reused,
// so a request allocates little beyond what net/http does.
type worker struct {
	req     request
	body    []byte
	rb      reqBody
	pending bool // rb was handed to the transport and not closed yet
	header  http.Header
	sse     *sseReader
	ev      event
	ch      chunk
	itl     []int64
	rec     wire.RequestRecord
	out     []byte
	scratch []byte
	trace   *httptrace.ClientTrace
	wrote   atomic.Int64 // when the transport finished writing the request
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
	w := &worker{
		sse:     newSSEReader(g.clock, 16<<10),
		rb:      reqBody{closed: make(chan struct{}, 1)},
		scratch: make([]byte, 4<<10),
	}
	w.header = g.newHeader()
	// The hook runs on the transport's write goroutine, just before it
	// flushes the request, and it may run after the body was closed: a late
	// call for the previous request could land after the reset for the next
	// one, so only a later time is kept, and times before the attempt are
	// ignored.
	w.trace = &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err != nil {
			return
		}
		now := g.clock.now()
		for {
			old := w.wrote.Load()
			if old >= now || w.wrote.CompareAndSwap(old, now) {
				return
			}
		}
	}}
	return w
}

func (g *generator) putWorker(w *worker) {
	g.freeMu.Lock()
	g.free = append(g.free, w)
	g.freeMu.Unlock()
}

func (g *generator) newHeader() http.Header {
	h := make(http.Header, len(g.cfg.Header)+4)
	for k, v := range g.cfg.Header {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	h.Set("User-Agent", "accord-probe")
	h["X-Request-Id"] = []string{""}
	return h
}

// reqBody is a request body whose buffer the worker reuses: Close (which
// the transport always calls, possibly after Do returned) says the buffer
// is free again.
type reqBody struct {
	r      bytes.Reader
	open   atomic.Bool
	closed chan struct{}
}

func (b *reqBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *reqBody) Close() error {
	if b.open.CompareAndSwap(true, false) {
		b.closed <- struct{}{}
	}
	return nil
}

// do sends request id and records it.
func (g *generator) do(w *worker, id, intended int64, warm bool) {
	if err := g.prompts.next(id, &w.req); err != nil {
		g.fatal(err)
		return
	}
	ctx, cancel := context.WithTimeout(g.ctx, g.timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		retry := g.exchange(ctx, w, id, intended, warm)
		if !retry || attempt > 0 {
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

// exchange sends the request once and reads its stream into w.rec. It
// returns true when the server rejected the length hints (min_tokens,
// ignore_eos) and the request should be sent again without them.
func (g *generator) exchange(ctx context.Context, w *worker, id, intended int64, warm bool) (retry bool) {
	rec := &w.rec
	*rec = wire.RequestRecord{ID: id, Warmup: warm, Intended: intended}
	w.itl = w.itl[:0]
	hints := g.hints.Load()
	if w.pending {
		<-w.rb.closed // the transport is done with the previous body
		w.pending = false
	}
	w.body = g.appendBody(w.body[:0], &w.req, hints)
	w.rb.r.Reset(w.body)
	w.rb.open.Store(true)
	w.pending = true
	w.header["X-Request-Id"][0] = strconv.FormatInt(id, 10)
	req := &http.Request{
		Method:        http.MethodPost,
		URL:           g.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          &w.rb,
		ContentLength: int64(len(w.body)),
		Host:          g.url.Host,
	}

	start := g.clock.now()
	if g.cfg.Level.Concurrency > 0 {
		rec.Intended = start // a closed loop means to send at once
	}
	w.wrote.Store(0)
	req = req.WithContext(httptrace.WithClientTrace(ctx, w.trace))
	resp, err := g.client.Do(req)
	// Sent is when the request was written to the connection: waiting for a
	// connection from the pool or dialing one is client-side delay, shown
	// by send_delay (and the *_intended metrics), not server latency.
	defer func() {
		rec.Sent = w.wrote.Load()
		if rec.Sent < start || (rec.FirstChunk > 0 && rec.Sent > rec.FirstChunk) {
			rec.Sent = start // not written (or the hook ran late): the attempt's start
		}
	}()
	if err != nil {
		// The transport may still hold the header map: use a fresh one.
		w.header = g.newHeader()
		g.failed(ctx, rec, ErrConnect, err)
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		n, _ := io.ReadFull(resp.Body, w.scratch)
		msg := strings.TrimSpace(string(w.scratch[:n]))
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		rec.Done = g.clock.now()
		if hints && resp.StatusCode == http.StatusBadRequest &&
			(strings.Contains(msg, "min_tokens") || strings.Contains(msg, "ignore_eos")) {
			g.hints.Store(false)
			return true
		}
		rec.ErrorKind, rec.HTTPStatus = ErrHTTP, resp.StatusCode
		rec.Error = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, msg)
		return false
	}
	g.stream(ctx, w, resp.Body)
	return false
}

// failed records a failure of the exchange: a timeout when the request's
// own deadline passed, else kind.
func (g *generator) failed(ctx context.Context, rec *wire.RequestRecord, kind string, err error) {
	if rec.Done == 0 {
		rec.Done = g.clock.now()
	}
	if rec.ErrorKind != "" {
		return
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && g.ctx.Err() == nil {
		kind = ErrTimeout
		err = fmt.Errorf("no complete response within %s", g.timeout)
	}
	rec.ErrorKind, rec.Error = kind, err.Error()
}

var doneData = []byte("[DONE]")

// stream reads the event stream of a 2xx response.
func (g *generator) stream(ctx context.Context, w *worker, body io.Reader) {
	rec := &w.rec
	s := w.sse
	s.reset(body)
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
				if rec.ErrorKind == "" {
					rec.ErrorKind, rec.Error = ErrIncomplete, "the stream ended without data: [DONE]"
				}
			} else {
				g.failed(ctx, rec, ErrIncomplete, err)
			}
			break
		}
		ev := &w.ev
		if bytes.Equal(bytes.TrimSpace(ev.data), doneData) {
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
		if err := decodeChunk(ev.data, c); err != nil {
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
		_, _ = io.CopyN(io.Discard, s.br, 64<<10)
	}
	if sawUsage {
		rec.PromptTokens, rec.OutputTokens = int(promptUsage), int(outputUsage)
	} else {
		rec.PromptTokens, rec.OutputTokens, rec.UsageCounted = w.req.promptTokens, counted, true
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
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
