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

// Query asks a watch's endpoint for its value now (jobs asks
// Prometheus's HTTP API).
type Query func(ctx context.Context, endpoint, query, comparator string) (float64, error)

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
}

// CheckWatch queries a watch's endpoint once and updates its count of
// consecutive breaches; the k-th breach in a row records the stop-loss
// decision (which halts the stage and calls the webhooks).
func CheckWatch(ctx context.Context, st *store.Store, env Env, ask Query, watchID int64, now time.Time) (WatchResult, error) {
	var res WatchResult
	wt, err := st.GetWatch(ctx, watchID)
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
	value, qerr := ask(ctx, wt.Endpoint, wt.Query, wt.Comparator)
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
		if qerr != nil {
			res.Err, res.Breaches = qerr.Error(), cur.Breaches
			return tx.RecordWatchCheck(ctx, cur.ID, now, nil, res.Err, cur.Breaches, cur.Recent)
		}
		res.Value = &value
		if !acceptance.PastLine(acceptance.Comparator(cur.Comparator), value, cur.Line) {
			return tx.RecordWatchCheck(ctx, cur.ID, now, &value, "", 0, nil)
		}
		recent := append(cur.Recent, store.WatchPoint{At: now.UTC(), Value: value})
		if len(recent) > cur.Consecutive {
			recent = recent[len(recent)-cur.Consecutive:]
		}
		res.Breaches = cur.Breaches + 1
		if res.Breaches < cur.Consecutive {
			return tx.RecordWatchCheck(ctx, cur.ID, now, &value, "", res.Breaches, recent)
		}
		stage, _, _ := ro.CurrentStage()
		sum := sha256.Sum256([]byte(cur.Endpoint + "\n" + cur.Query))
		id := strconv.FormatInt(cur.ID, 10)
		extra := attest.DecisionEvidence{RunIDs: []string{},
			Verdicts: map[string]string{"watch/" + id: "STOP-LOSS"},
			Digests:  map[string]string{"watch/" + id + "/query": "sha256:" + hex.EncodeToString(sum[:])}}
		if _, err := RecordDecision(ctx, tx, env, DecisionInput{ProgramID: cur.ProgramID, Kind: acceptance.DecisionStopLoss, Stage: stage.Name,
			Actor: SystemActor, Reason: watchReason(cur, recent), At: now, Extra: &extra}); err != nil {
			return err
		}
		res.Triggered = true
		// The stage is halted; counting starts afresh when it resumes.
		return tx.RecordWatchCheck(ctx, cur.ID, now, &value, "", 0, nil)
	})
	return res, err
}

// watchReason says why the watch stopped the stage, with its numbers.
func watchReason(w store.Watch, recent []store.WatchPoint) string {
	vals := make([]string, len(recent))
	for i, p := range recent {
		vals[i] = FormatWatchValue(p.Value, w.Unit)
	}
	must := "at or below"
	if w.Comparator == ">=" {
		must = "at or above"
	}
	first, last := recent[0], recent[len(recent)-1]
	return fmt.Sprintf("Production watch %q: %d consecutive checks past the stop-loss line %s (the value must stay %s it): %s, from %s to %s. Query %q at %s.",
		w.Name, len(recent), FormatWatchValue(w.Line, w.Unit), must, strings.Join(vals, ", "),
		first.At.UTC().Format(time.RFC3339), last.At.UTC().Format(time.RFC3339), w.Query, RedactEndpoint(w.Endpoint))
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
