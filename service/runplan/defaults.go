package runplan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// Defaults are what the run form proposes (0: nothing to propose), each
// with the reason it was chosen, for the form to say.
type Defaults struct {
	ProfileVersionID int64
	ProfileWhy       string
	GateSetVersionID int64
	GateSetWhy       string
	BaselineRunID    int64
	BaselineWhy      string
}

// Propose chooses a run's profile version (the given one, else the
// program's most recent profile: the one last saved or last run,
// whichever happened last), its gate set (the rollout's current stage's
// when the stage judges this profile, else the one its latest run was
// judged by) and its baseline (the last passing run on the profile's
// baseline path: the profile its runs were compared with, else a
// local-NVMe profile of the same steps).
func Propose(ctx context.Context, st *store.Store, programID, profileVersionID int64) (Defaults, error) {
	var d Defaults
	runs, err := st.ListRuns(ctx, programID, store.RunFilter{Limit: 200})
	if err != nil {
		return d, err
	}
	profiles, err := st.ListSpecs(ctx, store.KindProfile, programID)
	if err != nil {
		return d, err
	}
	var profileID int64
	if profileVersionID != 0 {
		pv, err := st.GetSpecVersionByID(ctx, store.KindProfile, programID, profileVersionID)
		if err != nil {
			return d, ignoreNotFound(err)
		}
		d.ProfileVersionID, profileID = pv.ID, pv.SpecID
	} else {
		var why string
		if profileID, why = mostRecentProfile(runs, profiles); profileID == 0 {
			return d, nil
		}
		pv, err := st.GetSpecVersion(ctx, store.KindProfile, programID, profileID, 0)
		if err != nil {
			return d, err
		}
		d.ProfileVersionID, d.ProfileWhy = pv.ID, why
	}
	if d.GateSetVersionID, d.GateSetWhy, err = gateSetFor(ctx, st, programID, profileID, runs); err != nil {
		return d, err
	}
	pathID, pathWhy, err := baselinePath(ctx, st, programID, profileID, runs, profiles)
	if err != nil || pathID == 0 {
		return d, err
	}
	for _, r := range runs {
		if r.ProfileID != nil && *r.ProfileID == pathID && r.State == store.RunDone && r.Verdict == string(acceptance.Pass) {
			d.BaselineRunID = r.ID
			d.BaselineWhy = fmt.Sprintf("the last passing run of %s, %s", r.ProfileName, pathWhy)
			break
		}
	}
	return d, nil
}

// mostRecentProfile is the profile last saved or last run, whichever
// happened last (runs and profiles come newest first or in any order).
func mostRecentProfile(runs []store.Run, profiles []store.Spec) (int64, string) {
	var id int64
	var why string
	var at int64
	if len(runs) > 0 && runs[0].ProfileID != nil {
		id, at, why = *runs[0].ProfileID, runs[0].CreatedAt.UnixNano(), fmt.Sprintf("the profile of the latest run, #%d", runs[0].ID)
	}
	for _, p := range profiles {
		if t := p.UpdatedAt.UnixNano(); t > at {
			id, at, why = p.ID, t, "the profile saved last"
		}
	}
	return id, why
}

// gateSetFor is the gate set a profile is judged by: the rollout's current
// stage's when it names the profile (a run judged by anything else does not
// count for the stage), else the latest version of the gate set its latest
// judged run used.
func gateSetFor(ctx context.Context, st *store.Store, programID, profileID int64, runs []store.Run) (int64, string, error) {
	ro, err := rollout.Load(ctx, st, programID)
	if err != nil {
		return 0, "", err
	}
	if stage, _, ok := ro.CurrentStage(); ok && stageJudges(stage, profileID) {
		return stage.GateSetVersionID, fmt.Sprintf("the gate set of the rollout's current stage, %s", stage.Name), nil
	}
	for _, stage := range ro.Stages {
		if stageJudges(stage, profileID) {
			return stage.GateSetVersionID, fmt.Sprintf("the gate set of the rollout stage %s, which judges this profile", stage.Name), nil
		}
	}
	for _, r := range runs {
		if r.ProfileID == nil || *r.ProfileID != profileID || r.GateSetID == nil {
			continue
		}
		gv, err := st.GetSpecVersion(ctx, store.KindGateSet, programID, *r.GateSetID, 0)
		if err != nil {
			return 0, "", err
		}
		return gv.ID, fmt.Sprintf("the gate set run #%d was judged by", r.ID), nil
	}
	return 0, "", nil
}

func stageJudges(stage store.RolloutStage, profileID int64) bool {
	return slices.ContainsFunc(stage.Profiles, func(p store.StageProfile) bool { return p.ProfileID == profileID })
}

// baselinePath is the profile a profile's runs are compared with: the one
// its latest compared run's baseline ran, else the newest local-NVMe
// profile with the same steps (0 when there is none, or when the profile
// is on local NVMe itself: it is the baseline path).
func baselinePath(ctx context.Context, st *store.Store, programID, profileID int64, runs []store.Run, profiles []store.Spec) (int64, string, error) {
	byID := map[int64]store.Run{}
	for _, r := range runs {
		byID[r.ID] = r
	}
	for _, r := range runs {
		if r.ProfileID == nil || *r.ProfileID != profileID || r.BaselineRunID == nil {
			continue
		}
		if b, ok := byID[*r.BaselineRunID]; ok && b.ProfileID != nil && *b.ProfileID != profileID {
			return *b.ProfileID, fmt.Sprintf("the baseline path run #%d was compared with", r.ID), nil
		}
	}
	own, err := latestProfile(ctx, st, programID, profileID)
	if err != nil || own.Storage.Transport == acceptance.TransportLocalNVMe {
		return 0, "", err
	}
	var best store.Spec
	for _, sp := range profiles {
		if sp.ID == profileID || sp.UpdatedAt.Before(best.UpdatedAt) {
			continue
		}
		p, err := latestProfile(ctx, st, programID, sp.ID)
		if err != nil {
			return 0, "", err
		}
		if p.Storage.Transport == acceptance.TransportLocalNVMe && sameSteps(p, own) {
			best = sp
		}
	}
	if best.ID == 0 {
		return 0, "", nil
	}
	return best.ID, "the local-NVMe profile with the same steps", nil
}

func latestProfile(ctx context.Context, st *store.Store, programID, profileID int64) (acceptance.ProfileSpec, error) {
	var p acceptance.ProfileSpec
	v, err := st.GetSpecVersion(ctx, store.KindProfile, programID, profileID, 0)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(v.Spec, &p); err != nil {
		return p, fmt.Errorf("runplan: profile %d: %w", profileID, err)
	}
	return p, nil
}

// sameSteps reports whether two profiles run steps of the same names,
// kinds and levels.
func sameSteps(a, b acceptance.ProfileSpec) bool {
	if len(a.Steps) != len(b.Steps) {
		return false
	}
	for i := range a.Steps {
		x, y := a.Steps[i], b.Steps[i]
		if x.Name != y.Name || x.Kind != y.Kind || !slices.Equal(acceptance.StepLevels(x), acceptance.StepLevels(y)) {
			return false
		}
	}
	return true
}
