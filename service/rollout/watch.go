package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/store"
)

// The production watch: while a stage is current and awaits approval, its
// watch asks a Prometheus-compatible API (GET /api/v1/query) for a value
// (for example the serving fleet's p99 TTFT) every interval and compares it
// with the stop-loss line. k checks past the line in a row halt the stage
// with Accord's stop-loss decision. A check that finds no value (the API
// failed, or the query matched nothing) leaves the count as it is; a check
// within the line resets it. The count is kept in the watch's row, so it
// survives restarts and is shared by every worker.

// When the stage is halted, the time from the breach to the halt is
// measured: Prometheus is asked for the query's values since the last
// check within the line, and the crossing is the first step past the line
// after the last step within it. It goes into the decision's evidence.

// Prometheus is where a watch reads its values: a Prometheus-compatible
// HTTP API (jobs asks it over HTTP).
type Prometheus interface {
	// Value is the query's value now: the worst of its series for the
	// comparator.
	Value(ctx context.Context, endpoint, query, comparator string) (float64, error)
	// Range is the query's worst value at each step from start to end.
	Range(ctx context.Context, endpoint, query, comparator string, start, end time.Time, step time.Duration) ([]store.WatchPoint, error)
}

// WatchActive: the watch's stage is the current stage and awaits approval
// (a halted, rejected or rolled-back stage is not watched).
func WatchActive(ro Rollout, wt store.Watch) bool {
	stage, status, ok := ro.CurrentStage()
	return ok && ro.State.Rollback == nil && stage.ID == wt.StageID && status.State == acceptance.StageAwaitingApproval
}

// WatchResult is what one check found and did.
type WatchResult struct {
	Value     *float64
	Err       string
	Breaches  int
	Triggered bool
	Skipped   bool // the stage was not current (or the watch changed meanwhile)
	// BreachAt and HaltedAt are set when the check halted the stage.
	BreachAt, HaltedAt time.Time
}

// CheckWatch queries a watch's endpoint once and updates its count of
// consecutive breaches; the k-th breach in a row records the stop-loss
// decision (which halts the stage and calls the webhooks).
func CheckWatch(ctx context.Context, st *store.Store, env Env, prom Prometheus, watchID int64, now time.Time) (WatchResult, error) {
	var res WatchResult
	wt, err := st.WatchByID(ctx, watchID)
	if errors.Is(err, store.ErrNotFound) {
		res.Skipped = true
		return res, nil
	}
	if err != nil {
		return res, err
	}
	// Ask only for a watch whose stage is current (checked again below,
	// under the lock, before anything is counted).
	ro, err := Load(ctx, st, wt.ProgramID)
	if err != nil {
		return res, err
	}
	if !WatchActive(ro, wt) {
		res.Skipped = true
		return res, st.ResetWatch(ctx, wt.ID)
	}
	value, qerr := prom.Value(ctx, wt.Endpoint, wt.Query, wt.Comparator)
	// A check that will halt the stage dates the breach first, outside the
	// transaction (no network call while the chain is locked).
	var dated *breachDate
	if qerr == nil && acceptance.PastLine(acceptance.Comparator(wt.Comparator), value, wt.Line) && wt.Breaches+1 >= wt.Consecutive {
		first := now.UTC()
		if len(wt.Recent) > 0 && wt.Consecutive > 1 {
			first = wt.Recent[max(0, len(wt.Recent)-(wt.Consecutive-1))].At
		}
		d := dateBreach(ctx, st, prom, wt, first, now)
		dated = &d
	}
	err = st.InTx(ctx, func(tx *store.Store) error {
		// The chain's lock first, as every rollout change takes it.
		if _, err := tx.LockDecisionChain(ctx, wt.ProgramID); err != nil {
			return err
		}
		cur, err := tx.LockWatch(ctx, watchID)
		if errors.Is(err, store.ErrNotFound) {
			res.Skipped = true
			return nil
		}
		if err != nil {
			return err
		}
		ro, err := Load(ctx, tx, cur.ProgramID)
		if err != nil {
			return err
		}
		if !WatchActive(ro, cur) || cur.Endpoint != wt.Endpoint || cur.Query != wt.Query {
			res.Skipped = true
			return tx.ResetWatch(ctx, cur.ID)
		}
		check := store.WatchCheck{WatchID: cur.ID, At: now, Line: cur.Line}
		if qerr != nil {
			res.Err, res.Breaches = qerr.Error(), cur.Breaches
			check.Error, check.Breaches = res.Err, cur.Breaches
			return recordCheck(ctx, tx, check, cur.Recent)
		}
		res.Value, check.Value = &value, &value
		if !acceptance.PastLine(acceptance.Comparator(cur.Comparator), value, cur.Line) {
			return recordCheck(ctx, tx, check, nil)
		}
		check.PastLine = true
		recent := append(cur.Recent, store.WatchPoint{At: now.UTC(), Value: value})
		if len(recent) > cur.Consecutive {
			recent = recent[len(recent)-cur.Consecutive:]
		}
		res.Breaches = cur.Breaches + 1
		check.Breaches = res.Breaches
		if res.Breaches < cur.Consecutive {
			return recordCheck(ctx, tx, check, recent)
		}
		if dated == nil || !dated.first.Equal(recent[0].At) {
			// The run changed since the breach was dated: its first check.
			d := breachDate{first: recent[0].At, at: recent[0].At, by: byFirstCheck}
			dated = &d
		}
		stage, _, _ := ro.CurrentStage()
		halt := now.UTC().Truncate(time.Microsecond) // the decision's own time
		if _, err := RecordDecision(ctx, tx, env, DecisionInput{ProgramID: cur.ProgramID, Kind: acceptance.DecisionStopLoss, Stage: stage.Name,
			Actor: SystemActor, Reason: watchReason(cur, recent, *dated, halt), At: halt, Extra: watchEvidence(cur, *dated, halt)}); err != nil {
			return err
		}
		res.Triggered, check.Triggered = true, true
		res.BreachAt, res.HaltedAt = dated.at, halt
		// The stage is halted; counting starts afresh when it resumes.
		return recordCheck(ctx, tx, check, nil)
	})
	return res, err
}

// recordCheck stores a check in the watch's row (its run of breaches) and
// in its history (the watch page's chart).
func recordCheck(ctx context.Context, tx *store.Store, c store.WatchCheck, recent []store.WatchPoint) error {
	breaches := c.Breaches
	if c.Triggered {
		breaches = 0
	}
	if err := tx.RecordWatchCheck(ctx, c.WatchID, c.At, c.Value, c.Error, breaches, recent); err != nil {
		return err
	}
	return tx.AddWatchCheck(ctx, c)
}

// breachDate is when a run of breaches began.
type breachDate struct {
	first time.Time // the run's first check past the line
	at    time.Time // the crossing, as well as it could be told
	by    string    // how it was told
}

const byFirstCheck = "the first check past the line (Prometheus gave no finer answer)"

// dateBreach asks Prometheus for the query's values from the last check
// within the line (or one interval before the first check past it) to
// now, and dates the crossing: the first step past the line after the
// last step within it, no later than the first check past the line.
// Without an answer, the crossing is the first check past the line.
func dateBreach(ctx context.Context, st *store.Store, prom Prometheus, wt store.Watch, first, now time.Time) breachDate {
	d := breachDate{first: first, at: first, by: byFirstCheck}
	interval := time.Duration(wt.IntervalSeconds) * time.Second
	from := first.Add(-interval)
	if ok, err := st.LastWatchCheckWithinLine(ctx, wt.ID, first); err == nil && ok.Before(first) && first.Sub(ok) <= maxBreachWindow {
		from = ok
	}
	// 1 s steps, coarser for a long window: at most 1000 of them.
	step := max(time.Second, (now.Sub(from) / 1000).Truncate(time.Second))
	points, err := prom.Range(ctx, wt.Endpoint, wt.Query, wt.Comparator, from, now, step)
	if err != nil || len(points) == 0 {
		return d
	}
	within := -1
	for i, p := range points {
		if p.At.After(first) {
			break
		}
		if !acceptance.PastLine(acceptance.Comparator(wt.Comparator), p.Value, wt.Line) {
			within = i
		}
	}
	switch {
	case within == -1 && !points[0].At.After(first):
		d.at, d.by = points[0].At, fmt.Sprintf("Prometheus at %s steps: already past the line when the window opened", step)
	case within >= 0 && within+1 < len(points) && points[within+1].At.Before(first):
		d.at, d.by = points[within+1].At, fmt.Sprintf("Prometheus at %s steps", step)
	}
	return d
}

// maxBreachWindow bounds how far back a crossing is looked for.
const maxBreachWindow = 24 * time.Hour

// watchEvidence is what the watch adds to the stop-loss decision: its
// verdict, its query's digest, and the figures of the breach.
func watchEvidence(w store.Watch, d breachDate, halt time.Time) *attest.DecisionEvidence {
	sum := sha256.Sum256([]byte(w.Endpoint + "\n" + w.Query))
	key := "watch/" + strconv.FormatInt(w.ID, 10)
	return &attest.DecisionEvidence{RunIDs: []string{},
		Verdicts: map[string]string{key: "STOP-LOSS"},
		Digests:  map[string]string{key + "/query": "sha256:" + hex.EncodeToString(sum[:])},
		Figures: map[string]string{
			key + "/breach_at":       d.at.UTC().Format(time.RFC3339Nano),
			key + "/breach_dated_by": d.by,
			key + "/halted_at":       halt.UTC().Format(time.RFC3339Nano),
			key + "/breach_to_halt":  FormatSeconds(halt.Sub(d.at)),
			key + "/check_interval":  FormatSeconds(time.Duration(w.IntervalSeconds) * time.Second),
			key + "/consecutive":     strconv.Itoa(w.Consecutive),
		}}
}

// FormatSeconds writes a duration in seconds to the millisecond.
func FormatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + " s"
}

// watchReason says why the watch stopped the stage, with its numbers.
func watchReason(w store.Watch, recent []store.WatchPoint, d breachDate, halt time.Time) string {
	vals := make([]string, len(recent))
	for i, p := range recent {
		vals[i] = FormatWatchValue(p.Value, w.Unit)
	}
	must := "at or below"
	if w.Comparator == ">=" {
		must = "at or above"
	}
	first, last := recent[0], recent[len(recent)-1]
	return fmt.Sprintf("Production watch %q: %d consecutive checks past the stop-loss line %s (the value must stay %s it): %s, from %s to %s. "+
		"The line was crossed at %s (dated by %s); the stage was halted %s later. Query %q at %s.",
		w.Name, len(recent), FormatWatchValue(w.Line, w.Unit), must, strings.Join(vals, ", "),
		first.At.UTC().Format(time.RFC3339), last.At.UTC().Format(time.RFC3339),
		d.at.UTC().Format("2006-01-02T15:04:05.000Z07:00"), d.by, FormatSeconds(halt.Sub(d.at)), w.Query, RedactEndpoint(w.Endpoint))
}

// FormatWatchValue writes a value with its unit.
func FormatWatchValue(v float64, unit string) string {
	s := strconv.FormatFloat(v, 'g', 6, 64)
	if unit != "" {
		s += " " + unit
	}
	return s
}

// RedactEndpoint drops credentials and the query from an endpoint URL for
// records and pages.
func RedactEndpoint(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "(unreadable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	return u.String()
}
