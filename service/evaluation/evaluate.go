// Package evaluation judges a run (step 7 of a run): its gate set applied
// to its measurements against its baseline's (acceptance.Evaluate), the
// evaluation stored with its explanation, the final stop-loss check
// (service/stoploss), and the signing enqueued.
package evaluation

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/service/stoploss"
	"github.com/accordlab/accord/store"
)

// ErrCannotJudge: the run cannot be judged, and retrying does not help
// (it has no gate set, or its inputs are bad: the run is then failed
// with the reason).
var ErrCannotJudge = errors.New("the run cannot be judged")

// errUnreadableFacts: a run's host facts are there but do not decode, so
// comparability cannot be judged.
var errUnreadableFacts = errors.New("the host facts cannot be read")

// Evaluate judges a run against its gate set and its baseline, stores the
// evaluation (a new row each time; the bytes are the same for the same
// inputs) and, for a run still evaluating, ends it as done. A stop-loss
// line crossed by the final numbers is recorded on the run and halts the
// rollout stage the run is evidence for, as an interim crossing would.
// env's queue takes the signing (service.Queue.SignRun).
func Evaluate(ctx context.Context, st *store.Store, env rollout.Env, runID int64) (acceptance.Evaluation, int64, error) {
	run, err := st.RunByID(ctx, runID)
	if err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	if run.GateSetVersionID == nil || run.ProfileVersionID == nil {
		return acceptance.Evaluation{}, 0, fmt.Errorf("%w: run %d has no gate set", ErrCannotJudge, runID)
	}
	gv, err := st.GetSpecVersionByID(ctx, store.KindGateSet, run.ProgramID, *run.GateSetVersionID)
	if err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	pv, err := st.GetSpecVersionByID(ctx, store.KindProfile, run.ProgramID, *run.ProfileVersionID)
	if err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	var gates acceptance.GateSetSpec
	if err := json.Unmarshal(gv.Spec, &gates); err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	in := acceptance.EvaluationInput{Gates: gates, ProfileDigest: pv.Digest, GateDigest: gv.Digest}
	if in.Candidate, err = st.RunMeasurements(ctx, run.ID); err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	// Another run measured on the host meanwhile: the run cannot pass.
	neighbours, err := st.RunNeighbours(ctx, run.ID)
	if err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	for _, n := range neighbours {
		in.Contamination = append(in.Contamination, n.Describe())
	}
	// Unreadable facts fail the run as bad inputs do (below); a database
	// error is retried.
	var factsErr error
	if in.CandidateFacts, in.CandidateHosts, err = storedFacts(ctx, st, run.ID); errors.Is(err, errUnreadableFacts) {
		factsErr = err
	} else if err != nil {
		return acceptance.Evaluation{}, 0, err
	}
	if run.BaselineRunID != nil {
		if in.Baseline, err = st.RunMeasurements(ctx, *run.BaselineRunID); err != nil {
			return acceptance.Evaluation{}, 0, err
		}
		if in.BaselineFacts, in.BaselineHosts, err = storedFacts(ctx, st, *run.BaselineRunID); errors.Is(err, errUnreadableFacts) {
			factsErr = cmp.Or(factsErr, err)
		} else if err != nil {
			return acceptance.Evaluation{}, 0, err
		}
	}
	var ev acceptance.Evaluation
	err = factsErr
	if err == nil {
		ev, err = acceptance.Evaluate(in)
	}
	if errors.Is(err, acceptance.ErrSamplesUnreadable) {
		return ev, 0, err // the database's failure, not the inputs': retried
	}
	if err != nil {
		// Bad inputs never get better by retrying.
		why := "the gate set could not be applied: " + err.Error()
		serr := st.InTx(ctx, func(tx *store.Store) error {
			if err := tx.AddRunNote(ctx, run.ID, "error", why); err != nil {
				return err
			}
			if err := tx.SetRunState(ctx, run.ID, store.RunFailed, why); !errors.Is(err, store.ErrRunFinal) {
				return err
			}
			return nil
		})
		if serr != nil {
			return ev, 0, serr
		}
		return ev, 0, fmt.Errorf("%w: %w", ErrCannotJudge, err)
	}
	canon, err := ev.CanonicalJSON()
	if err != nil {
		return ev, 0, err
	}
	var id int64
	err = st.InTx(ctx, func(tx *store.Store) error {
		var err error
		id, err = tx.SaveEvaluation(ctx, store.StoredEvaluation{
			RunID: run.ID, BaselineRunID: run.BaselineRunID, GateSetVersionID: *run.GateSetVersionID,
			Overall: string(ev.Verdict), Result: canon, Canonical: canon, Digest: ev.Inputs.Digest, EngineVersion: ev.EngineVersion,
		})
		if err != nil {
			return err
		}
		if run.State == store.RunEvaluating {
			reason := "verdict: " + string(ev.Verdict)
			if len(ev.Contamination) > 0 {
				reason += " (contaminated: another run measured on the host meanwhile)"
			}
			if err := tx.SetRunState(ctx, run.ID, store.RunDone, reason); err != nil && !errors.Is(err, store.ErrRunFinal) {
				return err
			}
		}
		if err := stoploss.Final(ctx, tx, env, run, gates, ev); err != nil {
			return err
		}
		// Step 8: the signing.
		return env.Queue.SignRun(ctx, tx, run.ID)
	})
	return ev, id, err
}

// StoredFacts reads the facts that decide comparability from a run's host
// facts, or, for an imported run, from the facts file among its
// artifacts: an empty map when the run has neither. Facts that do not
// decode are an error, not "no facts".
func StoredFacts(ctx context.Context, st *store.Store, runID int64) (map[string]string, error) {
	f, _, err := storedFacts(ctx, st, runID)
	return f, err
}

// storedFacts is StoredFacts with, for a multi-host run, its hosts'
// names by their place in the facts' keys (acceptance.HostFactPlaces).
func storedFacts(ctx context.Context, st *store.Store, runID int64) (map[string]string, map[string]string, error) {
	hosts, err := st.RunHosts(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	if len(hosts) > 0 {
		list, err := multiHostFacts(ctx, st, runID, hosts)
		if err != nil {
			return nil, nil, err
		}
		return acceptance.CombineHostFacts(list), acceptance.HostFactPlaces(list), nil
	}
	raw, err := storedFactsJSON(ctx, st, runID)
	if err != nil || raw == nil {
		return map[string]string{}, nil, err
	}
	f, err := facts.ComparableJSON(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("run %d: %w: %w", runID, errUnreadableFacts, err)
	}
	return f, nil, nil
}

// multiHostFacts are the comparable facts of every host of a multi-host
// run, to combine (acceptance.CombineHostFacts) so that comparability
// covers every host; a host without facts has none of its own keys, which
// a baseline with them reports as a difference.
func multiHostFacts(ctx context.Context, st *store.Store, runID int64, hosts []store.RunHost) ([]acceptance.HostFacts, error) {
	byHost, err := st.RunHostFacts(ctx, runID)
	if err != nil {
		return nil, err
	}
	var list []acceptance.HostFacts
	for _, h := range hosts {
		f := map[string]string{}
		if hf, ok := byHost[h.HostID]; ok {
			if f, err = facts.ComparableJSON(hf.Facts); err != nil {
				return nil, fmt.Errorf("run %d host %s: %w: %w", runID, h.HostName, errUnreadableFacts, err)
			}
		}
		list = append(list, acceptance.HostFacts{Role: h.Role, Facts: f, Name: h.HostName})
	}
	return list, nil
}

// storedFactsJSON returns the host facts taken for a run, or, for an
// imported run, the facts file among its artifacts (nil when there are
// none).
func storedFactsJSON(ctx context.Context, st *store.Store, runID int64) (json.RawMessage, error) {
	hf, err := st.RunFacts(ctx, runID)
	if err == nil {
		return hf.Facts, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	a, err := st.RunArtifactByPath(ctx, runID, wire.FactsFile)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rc, err := st.Artifacts().Open(ctx, a.SHA256)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("facts of run %d: %w", runID, err)
	}
	return b, nil
}
