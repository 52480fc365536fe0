package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/service/stoploss"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
	"github.com/accordlab/accord/web/charts"
)

// Live numbers: while a run runs, its page charts the probe's interim
// windows (the ones its stop-loss check reads) as they come: TTFT p50 and
// p99 and the throughputs per window and sweep level, with the gate set's
// stop-loss lines. The page draws what is stored; the run's event stream
// sends the charts again with every new window.

// liveTableRows is how many of the newest windows the table lists.
const liveTableRows = 20

// reportWait is how long after a run is judged its page keeps waiting
// for the signed report (signing takes seconds; a failed signing must not
// keep pages streaming for ever).
const reportWait = 15 * time.Minute

// awaitingReport: the run is judged and its report is being signed.
func awaitingReport(run store.Run) bool {
	return run.State == store.RunDone && run.GateSetVersionID != nil && run.Verdict != "" && !run.HasReport &&
		run.FinishedAt != nil && time.Since(*run.FinishedAt) < reportWait
}

// liveNumbers are a run's interim windows and its stop-loss lines.
type liveNumbers struct {
	snaps   []acceptance.InterimSnapshot
	linesAt func(step, level string) []acceptance.StopLossLine
}

// loadLiveNumbers reads the run's interim windows up to event id upTo (all
// when 0) and its stop-loss lines.
func (s *Server) loadLiveNumbers(ctx context.Context, run store.Run, upTo int64) (*liveNumbers, error) {
	ln := &liveNumbers{}
	events, err := s.store.RunEventsOfType(ctx, run.ID, wire.EventInterim)
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		if upTo > 0 && e.ID > upTo {
			break
		}
		ln.add(e)
	}
	// The lines come from the baseline's samples: read only when there
	// are windows to draw them beside, or may be (an ended run without
	// interim windows, an imported one say, reads none: a baseline of a
	// million requests is 56 MB of samples).
	if len(ln.snaps) == 0 && store.RunFinal(run.State) {
		return ln, nil
	}
	in, err := stoploss.ForRun(ctx, s.store, run)
	if err != nil {
		return nil, err
	}
	if in.Monitor != nil {
		ln.linesAt = in.Monitor.LinesAt
	}
	return ln, nil
}

// add keeps a stored interim event (one that does not decode is skipped:
// the log says what the probe sent).
func (ln *liveNumbers) add(e store.RunEvent) {
	if snap, ok := stoploss.Snapshot(e); ok {
		ln.snaps = append(ln.snaps, snap)
	}
}

// view draws the live charts (no windows before the first inference
// window: nothing is drawn).
func (ln *liveNumbers) view() (web.LiveNumbers, error) {
	d := chartdata.LiveFrom(ln.snaps, ln.linesAt)
	t := charts.LiveTable(d, liveTableRows)
	v := web.LiveNumbers{Windows: len(d.Windows), Table: web.ChartTable{Head: t.Head, Rows: t.Rows}}
	if v.Windows == 0 {
		return v, nil
	}
	var err error
	if len(d.TTFT) > 0 {
		if v.TTFT, err = charts.LiveTTFT(d); err != nil {
			return v, fmt.Errorf("live TTFT chart: %w", err)
		}
	}
	if len(d.Throughput) > 0 {
		if v.Throughput, err = charts.LiveThroughput(d); err != nil {
			return v, fmt.Errorf("live throughput chart: %w", err)
		}
	}
	return v, nil
}
