package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// liveHub turns PostgreSQL notifications (channel run_updates, payload the
// run id, sent in the transaction that changed the run) into wake-ups for
// the run pages following that run. One connection listens for the whole
// process.
type liveHub struct {
	pool   *pgxpool.Pool
	log    interface{ Warn(string, ...any) }
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// ready is closed once the first LISTEN has been executed: a page that
	// reads the run after that cannot miss a change.
	ready     chan struct{}
	readyOnce sync.Once

	once sync.Once
	mu   sync.Mutex
	subs map[int64]map[chan struct{}]struct{}
}

func newLiveHub(pool *pgxpool.Pool, log interface{ Warn(string, ...any) }) *liveHub {
	ctx, cancel := context.WithCancel(context.Background())
	return &liveHub{pool: pool, log: log, ctx: ctx, cancel: cancel, done: make(chan struct{}), ready: make(chan struct{}), subs: map[int64]map[chan struct{}]struct{}{}}
}

// close stops the listener and gives its connection back to the pool
// (which cannot close while it is held).
func (h *liveHub) close() {
	h.cancel()
	h.once.Do(func() { close(h.done) }) // never started: nothing to wait for
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
	}
}

// subscribe returns a channel woken (without blocking the hub) whenever the
// run changes, and a function to unsubscribe. It waits (briefly) until the
// listener is listening, so that a change made after the caller's next read
// of the run is never missed; if the database is slow to answer, the
// stream's periodic poll covers the gap.
func (h *liveHub) subscribe(ctx context.Context, runID int64) (<-chan struct{}, func()) {
	h.once.Do(func() {
		go func() {
			defer close(h.done)
			h.listen()
		}()
	})
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs[runID] == nil {
		h.subs[runID] = map[chan struct{}]struct{}{}
	}
	h.subs[runID][ch] = struct{}{}
	h.mu.Unlock()
	select {
	case <-h.ready:
	case <-ctx.Done():
	case <-time.After(3 * time.Second):
	}
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[runID], ch)
		if len(h.subs[runID]) == 0 {
			delete(h.subs, runID)
		}
		h.mu.Unlock()
	}
}

// wakeAll wakes every page: after a reconnect, changes may have been missed.
func (h *liveHub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, chans := range h.subs {
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (h *liveHub) wake(runID int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[runID] {
		select {
		case ch <- struct{}{}:
		default: // already woken
		}
	}
}

// listen holds one connection with LISTEN run_updates, reconnecting after
// failures, until the pool is closed.
func (h *liveHub) listen() {
	for attempt := 1; ; attempt++ {
		err := h.listenOnce()
		if h.ctx.Err() != nil || (err != nil && strings.Contains(err.Error(), "closed pool")) {
			return // the server is shutting down
		}
		h.log.Warn("live updates: listener stopped, reconnecting", "err", err)
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt)*time.Second, 10*time.Second)):
		}
	}
}

func (h *liveHub) listenOnce() error {
	ctx := h.ctx
	conn, err := h.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN run_updates`); err != nil {
		return err
	}
	h.readyOnce.Do(func() { close(h.ready) })
	h.wakeAll()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			conn.Conn().Close(ctx) //nolint:errcheck // a broken listener is not reused
			return err
		}
		if id, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			h.wake(id)
		}
	}
}

// streamRunEvents serves a run's live view as server-sent events: log
// lines, progress, state, the live charts redrawn with each interim window
// ("live"), and the signed report's links once it is signed ("report"),
// woken by notifications (and every few seconds in case one is missed). It
// follows from the page's newest event (?after=ID), or from Last-Event-ID
// when the browser reconnects. It ends when the run is settled and its
// report signed (or not to be waited for), the client goes, or the server
// shuts down.
func (s *Server) streamRunEvents(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	runID, ok := idParam(r, "runID")
	if !ok {
		s.renderError(w, r, http.StatusNotFound)
		return
	}
	run, err := s.store.GetRun(r.Context(), pr.ID, runID)
	if err != nil {
		s.notFoundOr(w, r, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.renderError(w, r, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	wake, unsubscribe := s.live.subscribe(r.Context(), run.ID)
	defer unsubscribe()
	var cursor int64
	if v, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && v >= 0 {
		cursor = v
	} else if v, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64); err == nil && v >= 0 {
		cursor = v // the page shows the run up to here already
	} else if v, err := s.store.RunLastEventID(r.Context(), run.ID); err == nil {
		cursor = v
	}
	numbers, err := s.loadLiveNumbers(r.Context(), run, cursor)
	if err != nil {
		s.log.Warn("live numbers unavailable", "request_id", requestID(r.Context()), "run", run.ID, "err", err)
		numbers = &liveNumbers{}
	}
	lastState, lastProgress, lastHosts := "", "", ""
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		run, err := s.store.GetRun(r.Context(), pr.ID, run.ID)
		if err != nil {
			return
		}
		events, err := s.store.RunEventsAfter(r.Context(), run.ID, cursor, []string{wire.EventLog, wire.EventInterim}, 200)
		if err != nil {
			return
		}
		windows := false
		for _, e := range events {
			cursor = e.ID
			if e.Type == wire.EventInterim {
				numbers.add(e)
				windows = true
				continue
			}
			writeSSE(w, "log", e.ID, map[string]string{"level": e.Level, "text": e.At.UTC().Format("15:04:05") + " " + e.Message})
		}
		if windows {
			if v, err := numbers.view(); err == nil && v.Windows > 0 {
				// The id lets a reconnect resume after these windows.
				writeSSE(w, "live", cursor, map[string]any{"windows": v.Windows, "ttft": v.TTFT, "throughput": v.Throughput, "rows": v.Table.Rows})
			}
		}
		if run.MultiHost() {
			hosts, err := s.store.RunHosts(r.Context(), run.ID)
			if err != nil {
				return
			}
			if b, _ := json.Marshal(hostViews(hosts)); string(b) != lastHosts {
				lastHosts = string(b)
				writeSSE(w, "hosts", 0, json.RawMessage(b))
			}
		}
		if p := progressView(run); p.Label != lastProgress {
			lastProgress = p.Label
			writeSSE(w, "progress", 0, map[string]any{"fraction": p.Fraction, "label": p.Label})
		}
		if run.State != lastState {
			lastState = run.State
			writeSSE(w, "state", 0, map[string]any{"state": run.State, "label": store.RunStateLabel(run.State), "final": runSettled(run)})
		}
		if run.HasReport && runSettled(run) {
			writeSSE(w, "report", 0, map[string]string{
				"download": web.ProgramLink(pr.ID, fmt.Sprintf("/runs/%d/report.tar.gz", run.ID)),
				"verify":   web.ProgramLink(pr.ID, fmt.Sprintf("/runs/%d/report", run.ID)),
			})
		}
		flusher.Flush()
		if runSettled(run) && !awaitingReport(run) {
			return
		}
		if len(events) == 200 {
			continue // more are stored: read on at once
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-tick.C:
		}
	}
}

// runSettled: nothing more will change live: the run failed or was
// cancelled, or it is done and judged (or has no gate set to judge it).
func runSettled(run store.Run) bool {
	switch run.State {
	case store.RunFailed, store.RunCancelled:
		return true
	case store.RunDone:
		return run.Verdict != "" || run.GateSetVersionID == nil
	}
	return false
}

func writeSSE(w http.ResponseWriter, event string, id int64, data any) {
	b, _ := json.Marshal(data)
	if id > 0 {
		fmt.Fprintf(w, "id: %d\n", id)
	}
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
}

// unfollowed says, of a run whose worker stopped renewing its host lease
// (it is gone: another takes the run over within about the lease's
// lifetime), that nobody follows it now; "" for any other run.
func unfollowed(run store.Run) string {
	if run.LeaseLapsedAt == nil || (run.State != store.RunPreparing && run.State != store.RunRunning && run.State != store.RunCollecting) {
		return ""
	}
	return "no worker is following this run (its host lease lapsed at " + run.LeaseLapsedAt.UTC().Format("15:04:05 UTC") + "); taking over"
}

// runReason is what a run's page and the API give as its reason: what is
// happening to it now.
func runReason(run store.Run) string {
	if s := unfollowed(run); s != "" {
		return s
	}
	return run.Reason
}

// progressView describes a run's progress in words.
func progressView(run store.Run) struct {
	Fraction float64
	Label    string
} {
	out := struct {
		Fraction float64
		Label    string
	}{}
	if s := unfollowed(run); s != "" {
		out.Label = s
		return out
	}
	switch run.State {
	case store.RunQueued:
		out.Label = "queued: waiting for a worker"
		return out
	case store.RunWaitingForHost, store.RunPreparing:
		out.Label = run.Reason
		if out.Label == "" {
			out.Label = store.RunStateLabel(run.State)
		}
		return out
	case store.RunCollecting:
		out.Fraction, out.Label = 1, "collecting the raw outputs"
		return out
	case store.RunEvaluating:
		out.Fraction, out.Label = 1, "judging the results against the gate set"
		return out
	case store.RunDone:
		out.Fraction, out.Label = 1, "done"
		return out
	case store.RunFailed, store.RunCancelled:
		out.Label = store.RunStateLabel(run.State) + ": " + run.Reason
		return out
	}
	if len(run.Progress) == 0 {
		out.Label = "running: waiting for the probe's first progress"
		return out
	}
	var p wire.Progress
	if err := json.Unmarshal(run.Progress, &p); err != nil {
		return out
	}
	out.Fraction, out.Label = p.Fraction, progressLabel(p)
	if run.MultiHost() {
		out.Label += " (the host furthest behind)"
	}
	return out
}

// progressLabel says where a probe's run stands.
func progressLabel(p wire.Progress) string {
	label := fmt.Sprintf("Step %d of %d (%s), repetition %d of %d", p.Step, p.Steps, p.StepName, p.Repetition, p.Repetitions)
	if p.Level != "" {
		label += ", level " + p.Level
	}
	label += fmt.Sprintf(" · %s elapsed", (time.Duration(p.ElapsedSec) * time.Second).String())
	if p.EstimateSec > 0 {
		label += fmt.Sprintf(" of about %s", (time.Duration(p.EstimateSec) * time.Second).String())
	}
	return label
}

// hostViews says where each host of a multi-host run stands.
func hostViews(hosts []store.RunHost) []web.RunHostView {
	out := make([]web.RunHostView, len(hosts))
	for i, h := range hosts {
		v := web.RunHostView{Ordinal: h.Ordinal, Role: h.Role, Name: h.HostName, HostID: h.HostID, State: h.State, Reason: h.Reason}
		var p wire.Progress
		if len(h.Progress) > 0 && json.Unmarshal(h.Progress, &p) == nil {
			v.Fraction, v.Label = p.Fraction, progressLabel(p)
		}
		if h.State == store.RunHostEnded {
			v.Fraction = 1
		}
		out[i] = v
	}
	return out
}

// progressFraction is the share of the run a probe's progress document
// says is done (0 when there is none).
func progressFraction(raw []byte) float64 {
	if len(raw) == 0 {
		return 0
	}
	var p wire.Progress
	if json.Unmarshal(raw, &p) != nil {
		return 0
	}
	return p.Fraction
}
