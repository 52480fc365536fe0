package emulator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is the emulator's configuration; Main fills it from flags.
type Config struct {
	Model            string
	KVFile           string        // "" : no storage tier
	KVFileSize       int64         // size of a KV file created because it was missing
	BlockTokens      int           // tokens per KV block
	BlockBytes       int           // bytes read per missing block
	CacheBlocks      int           // in-memory LRU size, in blocks
	PrefillPerToken  time.Duration // compute per prompt token not served from memory
	ITL              time.Duration // inter-token latency
	DefaultMaxTokens int           // output tokens when a request gives no max_tokens
	Seed             int64
	DegradeAfter     time.Duration // 0: never
	DegradeFactor    float64
	KVReadMBps       float64 // 0: no cap
	// MaxNumSeqs is vLLM's --max-num-seqs: at most this many requests are
	// answered at once, the others wait (counted by
	// vllm:num_requests_waiting; their wait is part of their TTFT). 0: no limit.
	MaxNumSeqs int
	Timings    string // JSON lines per request; "" : none
	// OpenAIStrict rejects the request fields OpenAI's own API does not
	// know (min_tokens, ignore_eos, continuous_usage_stats), as that API does.
	OpenAIStrict bool
}

// Server is a running emulator: an http.Handler plus its state.
type Server struct {
	cfg     Config
	start   time.Time
	kv      *kvStore
	metrics *metrics
	timings *timingsWriter
	notes   io.Writer
	reqs    atomic.Int64
	created int64
	slots   chan struct{} // the batch's places (--max-num-seqs); nil: unlimited
	// degrade is the degradation switch thrown at run time (Degrade): the
	// bits of the factor, 0 while it was never thrown.
	degrade atomic.Uint64
	stopped chan struct{}
	stop    sync.Once
}

// New prepares an emulator: it opens (or creates) the KV file and the
// timings file. notes receives one-line remarks (fallbacks).
func New(cfg Config, notes io.Writer) (*Server, error) {
	if cfg.BlockTokens < 1 {
		return nil, fmt.Errorf("--block-tokens must be ≥ 1")
	}
	if cfg.BlockBytes < 1 || cfg.CacheBlocks < 0 || cfg.PrefillPerToken < 0 || cfg.ITL < 0 ||
		cfg.DegradeAfter < 0 || cfg.KVReadMBps < 0 || cfg.DefaultMaxTokens < 1 || cfg.MaxNumSeqs < 0 {
		return nil, fmt.Errorf("sizes, durations and rates must not be negative (block bytes and default max tokens ≥ 1)")
	}
	if cfg.DegradeFactor <= 0 {
		cfg.DegradeFactor = 1
	}
	if cfg.Model == "" {
		cfg.Model = "emulated"
	}
	kv, err := openKV(cfg.KVFile, cfg.KVFileSize, cfg.BlockBytes, cfg.CacheBlocks, cfg.KVReadMBps, cfg.Seed, notes)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, start: time.Now(), kv: kv, metrics: newMetrics(cfg.Model), notes: notes, stopped: make(chan struct{})}
	s.created = s.start.Unix()
	if cfg.MaxNumSeqs > 0 {
		s.slots = make(chan struct{}, cfg.MaxNumSeqs)
	}
	if cfg.Timings != "" {
		s.timings, err = openTimings(cfg.Timings)
		if err != nil {
			_ = kv.close()
			return nil, err
		}
	}
	return s, nil
}

// Close releases the files; call it after the HTTP server stopped.
func (s *Server) Close() error {
	s.stop.Do(func() { close(s.stopped) })
	var errs []error
	if s.timings != nil {
		errs = append(errs, s.timings.close())
	}
	errs = append(errs, s.kv.close())
	return errors.Join(errs...)
}

// Serve answers on ln until ctx ends, then shuts down gracefully (streams
// in progress are cut after a few seconds).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Second, // uvicorn's keep-alive, as vLLM serves
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if sc, ok := c.(*stampedConn); ok {
				return context.WithValue(ctx, stampedConnKey{}, sc)
			}
			return ctx
		},
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(stampedListener{ln, s}) }()
	select {
	case err := <-errc:
		return fmt.Errorf("emulator: serve: %w", err)
	case <-ctx.Done():
	}
	s.stop.Do(func() { close(s.stopped) }) // release stalled streams
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		_ = hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("emulator: serve: %w", err)
	}
	return nil
}

// Handler routes the OpenAI-compatible API, /metrics and /health.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, true) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, false) })
	mux.HandleFunc("GET /v1/models", s.models)
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("GET /emulator/degradation", s.showDegradation)
	mux.HandleFunc("PUT /emulator/degradation", s.setDegradation)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}

// stampedListener hands out connections that remember when bytes last
// arrived, so that a request's receive time is when it was read from the
// socket, before the server parsed it and dispatched it to a handler
// (which, under a burst of requests, can take milliseconds).
type stampedListener struct {
	net.Listener
	s *Server
}

func (l stampedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stampedConn{Conn: c, s: l.s}, nil
}

type stampedConn struct {
	net.Conn
	s      *Server
	readAt atomic.Int64
}

func (c *stampedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.readAt.Store(c.s.now())
	}
	return n, err
}

type stampedConnKey struct{}

// received is when request r arrived: the socket read that brought it
// (one read carries a whole request from a client writing it at once),
// or the handler's start when the connection is not stamped.
func (s *Server) received(r *http.Request) int64 {
	now := s.now()
	if c, ok := r.Context().Value(stampedConnKey{}).(*stampedConn); ok {
		if at := c.readAt.Load(); at > 0 && at <= now {
			return at
		}
	}
	return now
}

// now is nanoseconds since the emulator started, on the monotonic clock.
func (s *Server) now() int64 { return int64(time.Since(s.start)) }

// factor is the latency multiplier: the switch's factor once it was
// thrown (Degrade), else DegradeFactor once DegradeAfter passed.
func (s *Server) factor() float64 {
	if bits := s.degrade.Load(); bits != 0 {
		return math.Float64frombits(bits)
	}
	if s.cfg.DegradeAfter > 0 && time.Since(s.start) >= s.cfg.DegradeAfter {
		return s.cfg.DegradeFactor
	}
	return 1
}

// Degrade throws the degradation switch: from now on, compute, ITL and
// read times are multiplied by factor (1 restores normal service). It
// overrides --degrade-after. Requests already past their prefill keep
// their TTFT; their remaining tokens slow down.
func (s *Server) Degrade(factor float64) error {
	if !(factor > 0) || math.IsInf(factor, 0) || factor > maxDegradeFactor {
		return fmt.Errorf("the degradation factor must be in (0, %g], not %g", float64(maxDegradeFactor), factor)
	}
	s.degrade.Store(math.Float64bits(factor))
	return nil
}

// maxDegradeFactor keeps a thrown switch within reason (a 20 ms ITL
// becomes at most 20 s).
const maxDegradeFactor = 1000

type degradation struct {
	Factor float64 `json:"factor"`
}

// showDegradation answers the current latency multiplier.
func (s *Server) showDegradation(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(degradation{Factor: s.factor()})
}

// setDegradation throws the switch over HTTP: PUT {"factor": 25}.
func (s *Server) setDegradation(w http.ResponseWriter, r *http.Request) {
	var d degradation
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<10)).Decode(&d); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", `the body is {"factor": NUMBER}`)
		return
	}
	if err := s.Degrade(d.Factor); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	s.showDegradation(w, r)
}

// admit waits for a place in the batch (--max-num-seqs), the request
// counted as waiting meanwhile, then counts it as running; release gives
// the place back.
func (s *Server) admit(ctx context.Context, recv int64) (release func(), err error) {
	s.metrics.waiting.Inc()
	if s.slots != nil {
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			s.metrics.waiting.Dec()
			return nil, ctx.Err()
		case <-s.stopped:
			s.metrics.waiting.Dec()
			return nil, errors.New("emulator stopping")
		}
	}
	s.metrics.waiting.Dec()
	s.metrics.running.Inc()
	s.metrics.queueTime.Observe(float64(s.now()-recv) / 1e9)
	return func() {
		s.metrics.running.Dec()
		if s.slots != nil {
			<-s.slots
		}
	}, nil
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": s.cfg.Model, "object": "model", "created": s.created, "owned_by": "accord-emulator",
		}},
	})
}

// completionRequest holds the fields of a chat or completion request that
// the emulator honours.
type completionRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	MinTokens           *int            `json:"min_tokens"`
	IgnoreEOS           *bool           `json:"ignore_eos"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage         bool `json:"include_usage"`
		ContinuousUsageStats bool `json:"continuous_usage_stats"`
	} `json:"stream_options"`
}

// unknownToOpenAI names a field OpenAI's API would reject, or "".
func (q *completionRequest) unknownToOpenAI() string {
	switch {
	case q.MinTokens != nil:
		return "min_tokens"
	case q.IgnoreEOS != nil:
		return "ignore_eos"
	case q.StreamOptions != nil && q.StreamOptions.ContinuousUsageStats:
		return "stream_options.continuous_usage_stats"
	}
	return ""
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// promptText joins the text of the prompt or of every message.
func (q *completionRequest) promptText(chat bool) (string, error) {
	if !chat {
		var p string
		if err := json.Unmarshal(q.Prompt, &p); err == nil {
			return p, nil
		}
		var ps []string
		if err := json.Unmarshal(q.Prompt, &ps); err != nil {
			return "", errors.New("prompt must be a string or an array of strings")
		}
		return strings.Join(ps, " "), nil
	}
	if len(q.Messages) == 0 {
		return "", errors.New("messages must not be empty")
	}
	var b strings.Builder
	for i, m := range q.Messages {
		var text string
		if err := json.Unmarshal(m.Content, &text); err != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return "", fmt.Errorf("messages[%d].content must be a string or an array of parts", i)
			}
			for _, p := range parts {
				text += " " + p.Text
			}
		}
		b.WriteString(text)
		b.WriteByte(' ')
	}
	return b.String(), nil
}

// timing is one line of the timings file. Times are nanoseconds since the
// emulator started, on its monotonic clock.
type timing struct {
	ID           string `json:"id"`
	RecvUnix     int64  `json:"recv_unix_ns"`          // the handler's start on the wall clock, to line up with other processes
	Recv         int64  `json:"recv"`                  // when the request was read from the socket
	FirstToken   int64  `json:"first_token,omitempty"` // after the write and flush of the first token
	LastToken    int64  `json:"last_token,omitempty"`
	Done         int64  `json:"done"`
	Status       int    `json:"status"`
	Stream       bool   `json:"stream"`
	PromptTokens int    `json:"prompt_tokens"`
	OutputTokens int    `json:"output_tokens"`
	HitBlocks    int    `json:"hit_blocks"`
	MissBlocks   int    `json:"miss_blocks"`
	ReadNs       int64  `json:"read_ns"`
	Fault        string `json:"fault,omitempty"`
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	tm := timing{ID: r.Header.Get("X-Request-Id"), Recv: s.received(r)}
	tm.RecvUnix = s.start.UnixNano() + tm.Recv
	seq := s.reqs.Add(1)
	if tm.ID == "" {
		tm.ID = "emu-" + strconv.FormatInt(seq, 10)
	}
	defer func() {
		if tm.Done == 0 {
			tm.Done = s.now()
		}
		if s.timings != nil {
			s.timings.write(&tm)
		}
	}()

	var q completionRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err == nil {
		err = json.Unmarshal(body, &q)
	}
	var prompt string
	if err == nil {
		prompt, err = q.promptText(chat)
	}
	if err != nil {
		tm.Status = http.StatusBadRequest
		s.metrics.outcome("bad_request")
		writeError(w, http.StatusBadRequest, "BadRequestError", "invalid request: "+err.Error())
		return
	}
	if s.cfg.OpenAIStrict {
		if name := q.unknownToOpenAI(); name != "" {
			tm.Status = http.StatusBadRequest
			s.metrics.outcome("bad_request")
			writeError(w, http.StatusBadRequest, "invalid_request_error", "Unrecognized request argument supplied: "+name)
			return
		}
	}
	if q.Model != "" && q.Model != s.cfg.Model {
		tm.Status = http.StatusNotFound
		s.metrics.outcome("bad_request")
		writeError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", q.Model))
		return
	}
	maxTokens := s.cfg.DefaultMaxTokens
	if q.MaxCompletionTokens != nil {
		maxTokens = *q.MaxCompletionTokens
	} else if q.MaxTokens != nil {
		maxTokens = *q.MaxTokens
	}
	if maxTokens < 1 {
		tm.Status = http.StatusBadRequest
		s.metrics.outcome("bad_request")
		writeError(w, http.StatusBadRequest, "BadRequestError", "max_tokens must be at least 1")
		return
	}
	f, err := parseFaults(r.Header.Get(faultHeader), r.Header.Get(chunkTokensHeader), tm.ID, s.cfg.Seed)
	if err != nil {
		tm.Status = http.StatusBadRequest
		s.metrics.outcome("bad_request")
		writeError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	tm.Fault = f.String()
	if f.status != 0 {
		tm.Status = f.status
		s.metrics.outcome("http_error")
		writeError(w, f.status, "EmulatedError", fmt.Sprintf("emulated HTTP %d", f.status))
		return
	}

	tokens := countWords(prompt)
	hashes := blockHashes(prompt, s.cfg.BlockTokens, uint64(s.cfg.Seed))
	tm.PromptTokens = tokens
	tm.OutputTokens = maxTokens

	g := generation{
		s: s, w: w, r: r, chat: chat, tm: &tm, faults: f,
		id:        "cmpl-" + strconv.FormatInt(seq, 10),
		maxTokens: maxTokens,
		words:     rand.New(rand.NewPCG(uint64(s.cfg.Seed), promptHash(prompt))),
	}
	if q.StreamOptions != nil {
		g.includeUsage = q.StreamOptions.IncludeUsage
		g.continuousUsage = q.StreamOptions.ContinuousUsageStats
	}
	if f.chunkTokens > 1 {
		g.continuousUsage = true // so that a client can tell how many tokens a chunk holds
	}
	tm.Stream = q.Stream
	release, err := s.admit(r.Context(), tm.Recv)
	if err != nil {
		s.metrics.outcome("aborted")
		return
	}
	defer release()
	if q.Stream {
		g.stream(hashes, tokens)
	} else {
		g.whole(hashes, tokens)
	}
}

// prefill loads the prompt's KV blocks and waits for the emulated compute:
// PrefillPerToken for every prompt token not served from memory, scaled by
// the degradation factor (which also stretches the storage time).
func (g *generation) prefill(hashes []uint64, tokens int) error {
	s := g.s
	res, err := s.kv.load(g.r.Context(), hashes)
	g.tm.HitBlocks, g.tm.MissBlocks, g.tm.ReadNs = res.hitBlocks, res.missBlocks, int64(res.readTime)
	s.metrics.kv(tokens, res.hitBlocks*s.cfg.BlockTokens, res)
	if err != nil {
		return err
	}
	g.hitTokens = min(res.hitBlocks*s.cfg.BlockTokens, tokens)
	factor := s.factor()
	compute := time.Duration(float64(s.cfg.PrefillPerToken) * float64(tokens-g.hitTokens) * factor)
	compute += time.Duration(float64(res.readTime) * (factor - 1))
	return g.sleep(compute)
}

// generation is one request being answered.
type generation struct {
	s               *Server
	w               http.ResponseWriter
	r               *http.Request
	chat            bool
	tm              *timing
	faults          faults
	id              string
	maxTokens       int
	hitTokens       int
	includeUsage    bool
	continuousUsage bool
	words           *rand.Rand
	buf             []byte // the event being built
	out             []byte // the event as written
}

// sleep waits d, or until the client goes away or the server stops.
func (g *generation) sleep(d time.Duration) error {
	if d <= 0 {
		return g.r.Context().Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-g.r.Context().Done():
		return g.r.Context().Err()
	case <-g.s.stopped:
		return errors.New("emulator stopping")
	}
}

func (g *generation) sleepUntil(t time.Time) error { return g.sleep(time.Until(t)) }

// stream answers with server-sent events: a role-only chunk at once (chat),
// then after the prefill the tokens at ITL, a finish chunk, the usage chunk
// when asked for, and data: [DONE].
func (g *generation) stream(hashes []uint64, tokens int) {
	s, w, tm := g.s, g.w, g.tm
	flusher, ok := w.(http.Flusher)
	if !ok {
		panic("emulator: response writer cannot flush")
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	tm.Status = http.StatusOK
	if g.chat {
		g.buf = g.appendChunkStart(g.buf[:0])
		g.buf = append(g.buf, `"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`...)
		if !g.send(flusher) {
			return
		}
	} else {
		flusher.Flush() // headers now, as uvicorn does
	}
	if err := g.prefill(hashes, tokens); err != nil {
		s.metrics.outcome("aborted")
		return
	}

	per := max(g.faults.chunkTokens, 1)
	// stream-error, early-close and stall strike after half of the tokens
	// (at least one).
	failAt := max(g.maxTokens/2, 1)
	var due time.Time
	sent := 0
	for sent < g.maxTokens {
		if sent >= failAt && g.faults.failsMidStream() {
			g.failMidStream(flusher)
			return
		}
		if sent > 0 {
			// Planned times, not actual ones: timer lateness does not
			// accumulate.
			if err := g.sleepUntil(due); err != nil {
				s.metrics.outcome("aborted")
				return
			}
		}
		n := min(per, g.maxTokens-sent)
		g.buf = g.appendTokenChunk(g.buf[:0], n, sent+n)
		if !g.send(flusher) {
			return
		}
		now := s.now()
		if sent == 0 {
			due = time.Now()
			tm.FirstToken = now
			s.metrics.ttft.Observe(float64(now-tm.Recv) / 1e9)
		} else {
			s.metrics.itl.Observe(float64(now-tm.LastToken) / 1e9)
		}
		tm.LastToken = now
		sent += n
		due = due.Add(time.Duration(float64(s.cfg.ITL) * float64(n) * s.factor()))
	}
	if g.faults.failsMidStream() {
		g.failMidStream(flusher)
		return
	}
	g.buf = g.appendChunkStart(g.buf[:0])
	if g.chat {
		g.buf = append(g.buf, `"delta":{},"logprobs":null,"finish_reason":"length"}]`...)
	} else {
		g.buf = append(g.buf, `"text":"","logprobs":null,"finish_reason":"length"}]`...)
	}
	if g.continuousUsage {
		g.buf = g.appendUsage(g.buf, g.maxTokens)
	}
	g.buf = append(g.buf, '}')
	if !g.send(flusher) {
		return
	}
	if g.includeUsage && !g.faults.noUsage {
		g.buf = append(g.buf[:0], `{"id":"`...)
		g.buf = append(g.buf, g.id...)
		g.buf = append(g.buf, `","object":"`...)
		g.buf = append(g.buf, g.object()...)
		g.buf = append(g.buf, `","created":`...)
		g.buf = strconv.AppendInt(g.buf, s.created, 10)
		g.buf = append(g.buf, `,"model":`...)
		g.buf = strconv.AppendQuote(g.buf, s.cfg.Model)
		g.buf = append(g.buf, `,"choices":[]`...)
		g.buf = g.appendUsage(g.buf, g.maxTokens)
		g.buf = append(g.buf, '}')
		if !g.send(flusher) {
			return
		}
	}
	if _, err := io.WriteString(w, "data: [DONE]\n\n"); err != nil {
		s.metrics.outcome("aborted")
		return
	}
	flusher.Flush()
	tm.Done = s.now()
	s.metrics.finished(tokens, g.maxTokens, tm.Done-tm.Recv)
	s.metrics.outcome("ok")
}

// failMidStream applies stream-error, early-close or stall.
func (g *generation) failMidStream(flusher http.Flusher) {
	s := g.s
	switch {
	case g.faults.streamError:
		g.buf = append(g.buf[:0], `{"error":{"message":"emulated error in the stream","type":"InternalServerError","code":500}}`...)
		if g.send(flusher) {
			_, _ = io.WriteString(g.w, "data: [DONE]\n\n")
			flusher.Flush()
		}
		s.metrics.outcome("stream_error")
	case g.faults.earlyClose:
		s.metrics.outcome("early_close")
		g.tm.Done = s.now()
		// Cut the connection without ending the chunked body.
		panic(http.ErrAbortHandler)
	case g.faults.stall:
		s.metrics.outcome("stall")
		_ = g.sleep(24 * time.Hour) // until the client gives up or the server stops
	}
}

// send writes buf as one SSE event and flushes it; false if the client is gone.
func (g *generation) send(flusher http.Flusher) bool {
	g.out = append(g.out[:0], "data: "...)
	g.out = append(g.out, g.buf...)
	g.out = append(g.out, '\n', '\n')
	if _, err := g.w.Write(g.out); err != nil {
		g.s.metrics.outcome("aborted")
		return false
	}
	flusher.Flush()
	return true
}

func (g *generation) object() string {
	if g.chat {
		return "chat.completion.chunk"
	}
	return "text_completion"
}

// appendChunkStart writes a chunk up to the inside of its only choice.
func (g *generation) appendChunkStart(b []byte) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, g.id...)
	b = append(b, `","object":"`...)
	b = append(b, g.object()...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, g.s.created, 10)
	b = append(b, `,"model":`...)
	b = strconv.AppendQuote(b, g.s.cfg.Model)
	return append(b, `,"choices":[{"index":0,`...)
}

// appendTokenChunk writes a chunk carrying n output words; total is the
// number of output tokens so far, for continuous usage.
func (g *generation) appendTokenChunk(b []byte, n, total int) []byte {
	b = g.appendChunkStart(b)
	if g.chat {
		b = append(b, `"delta":{"content":"`...)
	} else {
		b = append(b, `"text":"`...)
	}
	for range n {
		b = append(b, ' ')
		b = append(b, outputWords[g.words.IntN(len(outputWords))]...)
	}
	if g.chat {
		b = append(b, `"},"logprobs":null,"finish_reason":null}]`...)
	} else {
		b = append(b, `","logprobs":null,"finish_reason":null}]`...)
	}
	if g.continuousUsage {
		b = g.appendUsage(b, total)
	}
	return append(b, '}')
}

func (g *generation) appendUsage(b []byte, completion int) []byte {
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(g.tm.PromptTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(g.tm.PromptTokens+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(g.hitTokens), 10)
	return append(b, `}}`...)
}

// whole answers a non-streaming request after the full generation time.
func (g *generation) whole(hashes []uint64, tokens int) {
	s, tm := g.s, g.tm
	if err := g.prefill(hashes, tokens); err != nil {
		s.metrics.outcome("aborted")
		return
	}
	tm.FirstToken = s.now()
	s.metrics.ttft.Observe(float64(tm.FirstToken-tm.Recv) / 1e9)
	// The tokens are generated at once here: each of the gaps counts the
	// planned ITL, as the engine would have seen it.
	itl := time.Duration(float64(s.cfg.ITL) * s.factor())
	if err := g.sleep(itl * time.Duration(g.maxTokens-1)); err != nil {
		s.metrics.outcome("aborted")
		return
	}
	for range g.maxTokens - 1 {
		s.metrics.itl.Observe(itl.Seconds())
	}
	var text strings.Builder
	for range g.maxTokens {
		text.WriteByte(' ')
		text.WriteString(outputWords[g.words.IntN(len(outputWords))])
	}
	usage := map[string]any{
		"prompt_tokens": tokens, "completion_tokens": g.maxTokens, "total_tokens": tokens + g.maxTokens,
		"prompt_tokens_details": map[string]int{"cached_tokens": g.hitTokens},
	}
	choice := map[string]any{"index": 0, "finish_reason": "length", "logprobs": nil}
	object := "text_completion"
	if g.chat {
		object = "chat.completion"
		choice["message"] = map[string]any{"role": "assistant", "content": text.String()}
	} else {
		choice["text"] = text.String()
	}
	g.w.Header().Set("Content-Type", "application/json")
	tm.Status = http.StatusOK
	_ = json.NewEncoder(g.w).Encode(map[string]any{
		"id": g.id, "object": object, "created": s.created, "model": s.cfg.Model,
		"choices": []any{choice}, "usage": usage,
	})
	tm.LastToken = s.now()
	tm.Done = tm.LastToken
	s.metrics.finished(tokens, g.maxTokens, tm.Done-tm.Recv)
	s.metrics.outcome("ok")
}

// writeError answers with an OpenAI-style error object.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "code": status},
	})
}

// outputWords are what the emulated model says.
var outputWords = strings.Fields(`
alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron
pi rho sigma tau upsilon phi chi psi omega red green blue amber violet indigo
river stone cloud field forest meadow harbor valley summit canyon island desert
`)

// countWords counts whitespace-separated words: the emulator's tokens.
func countWords(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		space := isSpace(s[i])
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// blockHashes hashes the prompt's full blocks of blockTokens words, each
// hash covering the whole prefix up to the end of its block (a chain, as
// vLLM's prefix caching does), so equal hashes mean equal prefixes. Words
// are compared as written; runs of whitespace do not matter.
func blockHashes(s string, blockTokens int, seed uint64) []uint64 {
	var out []uint64
	h := uint64(fnvOffset) ^ seed
	n := 0
	for i := 0; i < len(s); {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			break
		}
		for i < len(s) && !isSpace(s[i]) {
			h = (h ^ uint64(s[i])) * fnvPrime
			i++
		}
		h = (h ^ ' ') * fnvPrime
		n++
		if n%blockTokens == 0 {
			out = append(out, mix(h))
		}
	}
	return out
}

// mix spreads a hash's bits (splitmix64 finaliser) before it picks an offset.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func promptHash(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return mix(h)
}

// timingsWriter appends timing lines, flushed every 100 ms and at close.
type timingsWriter struct {
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	err  error
	stop chan struct{}
	done chan struct{}
}

func openTimings(path string) (*timingsWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("timings: %w", err)
	}
	t := &timingsWriter{f: f, w: bufio.NewWriterSize(f, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go t.flushLoop()
	return t, nil
}

func (t *timingsWriter) flushLoop() {
	defer close(t.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			t.mu.Lock()
			if err := t.w.Flush(); err != nil && t.err == nil {
				t.err = err
			}
			t.mu.Unlock()
		}
	}
}

func (t *timingsWriter) write(tm *timing) {
	line, err := json.Marshal(tm)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		line = append(line, '\n')
		_, err = t.w.Write(line)
	}
	if err != nil && t.err == nil {
		t.err = err
	}
}

func (t *timingsWriter) close() error {
	close(t.stop)
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	err := errors.Join(t.err, t.w.Flush(), t.f.Close())
	if err != nil {
		return fmt.Errorf("timings: %w", err)
	}
	return nil
}
