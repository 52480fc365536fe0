// Package runplan is what Accord says of a run before it starts: whether
// its gate set can judge it against its baseline (the pre-run check, the
// same for the run form and the API), and what the run form proposes when
// it opens (the program's most recent profile, its gate set, and the last
// passing run on its baseline path).
package runplan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/service/evaluation"
	"github.com/accordlab/accord/store"
)

// Request is a run request as far as judging it goes (0: not chosen).
type Request struct {
	ProgramID        int64
	ProfileVersionID int64
	GateSetVersionID int64
	BaselineRunID    int64
	HostID           int64
	// Roles are a multi-host run's hosts by role (instead of HostID).
	Roles map[string][]int64
}

// Check reads what the request would run and judge and says what would
// keep its criteria from being judged. A choice that does not exist (a
// version of another program, say) is left to the request's own
// validation: nothing is said of it here.
func Check(ctx context.Context, st *store.Store, req Request) ([]acceptance.RunWarning, error) {
	if req.ProfileVersionID == 0 || req.GateSetVersionID == 0 {
		return nil, nil
	}
	var in acceptance.PreRunInput
	pv, err := st.GetSpecVersionByID(ctx, store.KindProfile, req.ProgramID, req.ProfileVersionID)
	if err != nil {
		return nil, ignoreNotFound(err)
	}
	if err := json.Unmarshal(pv.Spec, &in.Profile); err != nil {
		return nil, fmt.Errorf("runplan: profile version %d: %w", pv.ID, err)
	}
	gv, err := st.GetSpecVersionByID(ctx, store.KindGateSet, req.ProgramID, req.GateSetVersionID)
	if err != nil {
		return nil, ignoreNotFound(err)
	}
	var gates acceptance.GateSetSpec
	if err := json.Unmarshal(gv.Spec, &gates); err != nil {
		return nil, fmt.Errorf("runplan: gate set version %d: %w", gv.ID, err)
	}
	in.Gates = &gates
	if req.BaselineRunID != 0 {
		b, err := baseline(ctx, st, req.ProgramID, req.BaselineRunID)
		if err != nil {
			return nil, ignoreNotFound(err)
		}
		in.Baseline = b
	}
	switch {
	case len(req.Roles) > 0:
		if in.HostFacts, err = rolesFacts(ctx, st, req.Roles); err != nil {
			return nil, err
		}
	case req.HostID != 0:
		if in.HostFacts, err = hostFacts(ctx, st, req.HostID); err != nil {
			return nil, err
		}
	}
	if in.Observed, err = observed(ctx, st, req.ProgramID, pv); err != nil {
		return nil, err
	}
	return acceptance.PreRunCheck(in), nil
}

func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// baseline reads the baseline run as the gate engine will: its profile,
// its comparable facts and its samples per series.
func baseline(ctx context.Context, st *store.Store, programID, runID int64) (*acceptance.PreRunBaseline, error) {
	run, err := st.GetRun(ctx, programID, runID)
	if err != nil {
		return nil, err
	}
	b := &acceptance.PreRunBaseline{RunID: run.ID, Verdict: run.Verdict}
	if run.ProfileVersionID != nil {
		pv, err := st.GetSpecVersionByID(ctx, store.KindProfile, programID, *run.ProfileVersionID)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(pv.Spec, &b.Profile); err != nil {
			return nil, fmt.Errorf("runplan: profile of baseline run %d: %w", run.ID, err)
		}
	}
	f, err := evaluation.StoredFacts(ctx, st, run.ID)
	if err != nil {
		return nil, err
	}
	if len(f) > 0 {
		b.Facts = f
	}
	if b.Samples, err = samples(ctx, st, run.ID); err != nil {
		return nil, err
	}
	return b, nil
}

// samples counts a run's samples per metric and series, over its repetitions.
func samples(ctx context.Context, st *store.Store, runID int64) (map[string]map[acceptance.SeriesKey]int64, error) {
	rows, err := st.RunMeasurementSummaries(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := map[string]map[acceptance.SeriesKey]int64{}
	for _, r := range rows {
		if out[r.Metric] == nil {
			out[r.Metric] = map[acceptance.SeriesKey]int64{}
		}
		out[r.Metric][acceptance.SeriesKey{Step: r.Step, Level: r.Level}] += r.Summary.N
	}
	return out, nil
}

// hostFacts are the host's comparable facts as last taken (nil: none).
func hostFacts(ctx context.Context, st *store.Store, hostID int64) (map[string]string, error) {
	history, err := st.HostFactsHistory(ctx, hostID, 1)
	if err != nil || len(history) == 0 {
		return nil, err
	}
	f, err := facts.ComparableJSON(history[0].Facts)
	if err != nil {
		return nil, fmt.Errorf("runplan: facts of host %d: %w", hostID, err)
	}
	return f, nil
}

// rolesFacts are a multi-host run's hosts' latest facts combined as the
// gate engine combines a multi-host run's (acceptance.CombineHostFacts);
// nil when a host has none yet.
func rolesFacts(ctx context.Context, st *store.Store, roles map[string][]int64) (map[string]string, error) {
	var list []acceptance.HostFacts
	for role, ids := range roles {
		for _, id := range ids {
			f, err := hostFacts(ctx, st, id)
			if err != nil || f == nil {
				return nil, err
			}
			list = append(list, acceptance.HostFacts{Role: role, Facts: f})
		}
	}
	return acceptance.CombineHostFacts(list), nil
}

// observed counts the samples of the newest finished run of the same
// profile version (nil when there is none).
func observed(ctx context.Context, st *store.Store, programID int64, pv store.SpecVersion) (map[string]map[acceptance.SeriesKey]int64, error) {
	runs, err := st.ListRuns(ctx, programID, store.RunFilter{ProfileID: &pv.SpecID, State: store.RunDone, Limit: 20})
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		if r.ProfileVersionID != nil && *r.ProfileVersionID == pv.ID {
			return samples(ctx, st, r.ID)
		}
	}
	return nil, nil
}
