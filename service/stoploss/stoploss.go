// Package stoploss is where a run's stop-loss lines are decided, for the
// whole way of a run: the interim check while the probe measures (the
// execute_run worker feeds Monitor with the probe's interim snapshots),
// the final check on the evaluation, and the record of a crossing, which
// halts the rollout stage the run is evidence for. The rules themselves
// are acceptance's (StopLossMonitor, FinalStopLoss).
package stoploss

import (
	"context"
	"encoding/json"
	"fmt"

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
	if run.GateSetVersionID == nil {
		return Interim{}, nil
	}
	gv, err := st.GetSpecVersionByID(ctx, store.KindGateSet, run.ProgramID, *run.GateSetVersionID)
	if err != nil {
		return Interim{}, err
	}
	var gates acceptance.GateSetSpec
	if err := json.Unmarshal(gv.Spec, &gates); err != nil {
		return Interim{}, err
	}
	var points []acceptance.BaselinePoint
	if run.BaselineRunID != nil {
		base, err := st.LoadMeasurements(ctx, *run.BaselineRunID)
		if err != nil {
			return Interim{}, err
		}
		if points, err = acceptance.BaselinePoints(gates, base); err != nil {
			return Interim{}, err
		}
	}
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

// Resume brings the interim check of a run that an earlier attempt
// followed to where that attempt left it, and returns the crossing found
// (nil when none): the crossing the attempt recorded (it is recorded
// before the probe is stopped, and the attempt may have died stopping
// it), or else the one the stored interim windows make when replayed into
// the monitor, so that windows past a line before the resume still count
// towards the breaches in a row.
func (in Interim) Resume(ctx context.Context, st *store.Store, runID int64) (*acceptance.StopLossBreach, error) {
	raw, err := st.RunStopLoss(ctx, runID)
	if err != nil {
		return nil, err
	}
	if len(raw) > 0 {
		var b acceptance.StopLossBreach
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("stop-loss of run %d: %w", runID, err)
		}
		return &b, nil
	}
	if in.Monitor == nil {
		return nil, nil
	}
	events, err := st.RunEventsOfType(ctx, runID, wire.EventInterim)
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		if snap, ok := Snapshot(e); ok {
			if b, hit := in.Monitor.Observe(snap); hit {
				return b, nil
			}
		}
	}
	return nil, nil
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
