// Package stoploss is where a run's stop-loss lines are decided, for the
// whole way of a run: the interim check while the probe measures (the
// execute_run worker feeds a Watch with the probe's interim snapshots),
// the final check on the evaluation, and the record of a crossing, which
// halts the rollout stage the run is evidence for. The rules themselves
// are acceptance's (StopLossMonitor, FinalStopLoss).
package stoploss

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// Interim is a run's interim stop-loss check.
type Interim struct {
	// Monitor judges the probe's interim snapshots (nil: the gate set has
	// no stop-loss line).
	Monitor *acceptance.StopLossMonitor
	// Metrics are the metrics the probe reports interim values of.
	Metrics []string
}

// ForRun builds a run's interim check from its gate set and, for
// relative lines, its baseline's points (zero when the run has no gate
// set). An unreadable gate set is an error.
func ForRun(ctx context.Context, st *store.Store, run store.Run) (Interim, error) {
	gates, points, err := loadLines(ctx, st, run)
	if err != nil || gates == nil {
		return Interim{}, err
	}
	return interimOf(*gates, points)
}

// loadLines reads what a run's stop-loss lines are drawn from: its gate
// set and, for relative lines, its baseline's points (no gate set: nil).
func loadLines(ctx context.Context, st *store.Store, run store.Run) (*acceptance.GateSetSpec, []acceptance.BaselinePoint, error) {
	if run.GateSetVersionID == nil {
		return nil, nil, nil
	}
	gv, err := st.GetSpecVersionByID(ctx, store.KindGateSet, run.ProgramID, *run.GateSetVersionID)
	if err != nil {
		return nil, nil, err
	}
	var gates acceptance.GateSetSpec
	if err := json.Unmarshal(gv.Spec, &gates); err != nil {
		return nil, nil, err
	}
	var points []acceptance.BaselinePoint
	if run.BaselineRunID != nil {
		base, err := st.RunMeasurements(ctx, *run.BaselineRunID)
		if err != nil {
			return nil, nil, err
		}
		if points, err = acceptance.BaselinePoints(gates, base); err != nil {
			return nil, nil, err
		}
	}
	return &gates, points, nil
}

// interimOf is the interim check of a gate set's lines.
func interimOf(gates acceptance.GateSetSpec, points []acceptance.BaselinePoint) (Interim, error) {
	m, err := acceptance.NewStopLossMonitor(gates, points)
	if err != nil {
		return Interim{}, err
	}
	in := Interim{Metrics: metrics(gates)}
	if m.Lines() > 0 {
		in.Monitor = m
	}
	return in, nil
}

// metrics lists the metrics of the stop-loss lines, each once.
func metrics(g acceptance.GateSetSpec) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range g.Criteria {
		if c.StopLoss != nil && !seen[c.Metric] {
			seen[c.Metric] = true
			out = append(out, c.Metric)
		}
	}
	return out
}

// Snapshot decodes a stored interim event of the probe (false when it
// does not decode: the log says what the probe sent).
func Snapshot(e store.RunEvent) (acceptance.InterimSnapshot, bool) {
	var in wire.Interim
	if e.Type != wire.EventInterim || json.Unmarshal(e.Data, &in) != nil {
		return acceptance.InterimSnapshot{}, false
	}
	var seq int64
	if e.Seq != nil {
		seq = *e.Seq
	}
	return in.Snapshot(seq, e.At), true
}

// Recorded is the crossing kept on the run (nil: none); a record that
// does not decode is an error, never "no crossing".
func Recorded(ctx context.Context, st *store.Store, runID int64) (*acceptance.StopLossBreach, error) {
	raw, err := st.RunStopLoss(ctx, runID)
	if err != nil || len(raw) == 0 {
		return nil, err
	}
	var b acceptance.StopLossBreach
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("stop-loss of run %d: %w", runID, err)
	}
	return &b, nil
}

// Record keeps a crossing on the run and halts the rollout stage the run
// is evidence for (rollout.HaltForRunStopLoss), in tx. A run keeps its
// first crossing: recording again does nothing (the interim check records
// it before the probe is stopped, the ingest at the run's end once more).
func Record(ctx context.Context, tx *store.Store, env rollout.Env, run store.Run, breach *acceptance.StopLossBreach) error {
	if prior, err := tx.RunStopLoss(ctx, run.ID); err != nil || len(prior) > 0 {
		return err
	}
	if err := tx.RecordStopLoss(ctx, run.ID, breach); err != nil {
		return err
	}
	if _, err := rollout.HaltForRunStopLoss(ctx, tx, env, run, breach); err != nil {
		return fmt.Errorf("stop-loss of run %d: %w", run.ID, err)
	}
	return nil
}

// Final records a stop-loss line crossed by the final evaluation, in tx,
// unless the run already has one (its interim check aborted it, or an
// earlier evaluation found it); the crossing is also a note on the run.
func Final(ctx context.Context, tx *store.Store, env rollout.Env, run store.Run, gates acceptance.GateSetSpec, ev acceptance.Evaluation) error {
	breach, err := acceptance.FinalStopLoss(gates, ev)
	if err != nil || breach == nil {
		return err
	}
	if prior, err := tx.RunStopLoss(ctx, run.ID); err != nil || len(prior) > 0 {
		return err
	}
	if err := tx.AddRunNote(ctx, run.ID, "warn", breach.Explanation); err != nil {
		return err
	}
	return Record(ctx, tx, env, run, breach)
}

// Watch is the interim check of one attempt at a run, the one both
// execute_run paths use: it decides whether the windows the probe sends
// cross a line, and records the crossing in the transaction that stores
// those windows, before the caller stops the probe. The gate set and
// baseline are read once per attempt. Each host of a multi-host run is
// judged on its own windows (k windows in a row are k of one host's);
// a run crosses once, on whichever host first. Safe for concurrent hosts.
type Watch struct {
	run     store.Run
	metrics []string

	mu       sync.Mutex
	monitors map[string]*hostMonitor // by host name, "" for a one-host run
	crossed  *acceptance.StopLossBreach
}

// Host is a host of a multi-host run: its ordinal in the run, which its
// stored events carry, and its name, which a crossing names.
type Host struct {
	Ordinal int
	Name    string
}

// hostMonitor judges one host's windows (a one-host run's: multi false).
type hostMonitor struct {
	Host
	multi   bool
	monitor *acceptance.StopLossMonitor
}

// NewWatch builds the interim check of a run: one monitor per host given
// (a multi-host run's), or one for the run (none given). An unreadable
// gate set is an error.
func NewWatch(ctx context.Context, st *store.Store, run store.Run, hosts ...Host) (*Watch, error) {
	w := &Watch{run: run, monitors: map[string]*hostMonitor{}}
	gates, points, err := loadLines(ctx, st, run)
	if err != nil || gates == nil {
		return w, err
	}
	multi := len(hosts) > 0
	if !multi {
		hosts = []Host{{}}
	}
	for _, h := range hosts {
		in, err := interimOf(*gates, points)
		if err != nil {
			return nil, err
		}
		w.metrics = in.Metrics
		if in.Monitor != nil {
			w.monitors[h.Name] = &hostMonitor{Host: h, multi: multi, monitor: in.Monitor}
		}
	}
	return w, nil
}

// Metrics are the metrics the probe reports interim values of.
func (w *Watch) Metrics() []string { return w.metrics }

// Resume brings the check to where an earlier attempt at the run left it
// and returns the run's crossing so far (nil: none): the crossing that
// attempt recorded (it is recorded before the probe is stopped, and the
// attempt may have died stopping it), or else the one the stored interim
// windows make when each host's are replayed into its monitor, so that
// windows past a line before the resume still count towards the breaches
// in a row (of several hosts crossing, the one whose window came first).
// A crossing found by the replay is not recorded yet: the caller records
// it (Record) before it stops the probe.
func (w *Watch) Resume(ctx context.Context, st *store.Store) (*acceptance.StopLossBreach, error) {
	b, err := Recorded(ctx, st, w.run.ID)
	if err != nil {
		return nil, err
	}
	if b == nil {
		if b, err = w.replay(ctx, st); err != nil {
			return nil, err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.crossed == nil {
		w.crossed = b
	}
	return w.crossed, nil
}

// replay feeds every host's stored interim windows to its monitor and
// returns the crossing of the earliest window that made one.
func (w *Watch) replay(ctx context.Context, st *store.Store) (*acceptance.StopLossBreach, error) {
	var first *acceptance.StopLossBreach
	var firstEvent int64
	for _, hm := range w.monitors {
		events, err := hm.storedWindows(ctx, st, w.run.ID)
		if err != nil {
			return nil, err
		}
		for _, e := range events {
			snap, ok := Snapshot(e)
			if !ok {
				continue
			}
			if b, hit := hm.monitor.Observe(snap); hit {
				if first == nil || e.ID < firstEvent {
					first, firstEvent = hm.named(b), e.ID
				}
				break
			}
		}
	}
	return first, nil
}

// storedWindows are the interim events the host sent (a one-host run's
// are the run's).
func (hm *hostMonitor) storedWindows(ctx context.Context, st *store.Store, runID int64) ([]store.RunEvent, error) {
	if !hm.multi {
		return st.RunEventsOfType(ctx, runID, wire.EventInterim)
	}
	return st.RunHostEventsOfType(ctx, runID, hm.Ordinal, wire.EventInterim)
}

// named is a copy of the monitor's crossing that names the host of a
// multi-host run.
func (hm *hostMonitor) named(b *acceptance.StopLossBreach) *acceptance.StopLossBreach {
	crossed := *b // the monitor keeps its own
	if hm.multi {
		crossed.Explanation = "on host " + hm.Name + ": " + b.Explanation
	}
	return &crossed
}

// Crossed is the run's crossing so far (nil: none).
func (w *Watch) Crossed() *acceptance.StopLossBreach {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.crossed
}

// Check judges a batch of interim windows from the host named ("" for a
// one-host run) and returns the crossing they make, recorded in tx
// (Record), the transaction that stores the batch: the caller then stops
// the probe. It returns nil when they cross no line, or when the run
// crossed before (the windows a stopped probe still sends must not stop
// it again). Should tx fail, the caller retracts the crossing (Retract)
// and ends its attempt; the next one judges the windows again.
func (w *Watch) Check(ctx context.Context, tx *store.Store, env rollout.Env, host string, snaps []acceptance.InterimSnapshot) (*acceptance.StopLossBreach, error) {
	b := w.observe(host, snaps)
	if b == nil {
		return nil, nil
	}
	if err := Record(ctx, tx, env, w.run, b); err != nil {
		w.Retract(b)
		return nil, err
	}
	return b, nil
}

// Retract takes back a crossing Check returned whose transaction did not
// commit: it is not the run's crossing (the windows that made it were not
// stored), so the attempt's end must not act on it. The next attempt
// judges those windows again as the probe sends them.
func (w *Watch) Retract(b *acceptance.StopLossBreach) {
	if b == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.crossed == b {
		w.crossed = nil
	}
}

// observe feeds host's monitor and returns the run's first crossing, once.
func (w *Watch) observe(host string, snaps []acceptance.InterimSnapshot) *acceptance.StopLossBreach {
	w.mu.Lock()
	defer w.mu.Unlock()
	hm := w.monitors[host]
	if hm == nil || w.crossed != nil {
		return nil
	}
	for _, snap := range snaps {
		if b, hit := hm.monitor.Observe(snap); hit {
			w.crossed = hm.named(b)
			return w.crossed
		}
	}
	return nil
}
