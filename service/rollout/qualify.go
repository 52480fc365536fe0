package rollout

import (
	"context"
	"errors"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// Standing says how the gates stand, for acceptance.StageLabel: met,
// not met by a qualifying run, or waiting for one (a profile has no
// usable run judged by the stage's gate set).
func (g GateReading) Standing() acceptance.GatesStanding {
	if g.Pass {
		return acceptance.GatesMet
	}
	for _, p := range g.Profiles {
		if p.Run == nil || p.Problem != "" {
			return acceptance.GatesAwaitRun
		}
	}
	return acceptance.GatesNotMet
}

// MaxQualifyingRuns is how many runs Qualifying lists per profile.
const MaxQualifyingRuns = 5

// Qualifying is what counts for one profile of a stage: a run of the
// profile (any of its versions) judged by the stage's gate set version,
// the newest judged one unless a run is chosen explicitly (ReadGates).
type Qualifying struct {
	ProfileID   int64
	ProfileName string
	// ProfileVersionID is the profile's latest version: what a new
	// qualifying run runs (0 when the profile has no version left).
	ProfileVersionID int64
	GateSetVersionID int64
	GateSetLabel     string
	// Runs are the newest runs that count or will once judged (queued,
	// running or evaluating), newest first, at most MaxQualifyingRuns;
	// More says there are older ones.
	Runs []store.Run
	More bool
}

// QualifyingRuns lists, for each profile of a stage, the runs that count
// for it and the profile version a new qualifying run would run.
func QualifyingRuns(ctx context.Context, st *store.Store, stage store.RolloutStage) ([]Qualifying, error) {
	out := make([]Qualifying, 0, len(stage.Profiles))
	for _, p := range stage.Profiles {
		q := Qualifying{ProfileID: p.ProfileID, ProfileName: p.ProfileName, GateSetVersionID: stage.GateSetVersionID, GateSetLabel: stage.GateSetLabel()}
		v, err := st.GetSpecVersion(ctx, store.KindProfile, stage.ProgramID, p.ProfileID, 0)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			q.ProfileVersionID = v.ID
		}
		id := p.ProfileID
		runs, err := st.ListRuns(ctx, stage.ProgramID, store.RunFilter{ProfileID: &id, Limit: 200})
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			if r.GateSetVersionID == nil || *r.GateSetVersionID != stage.GateSetVersionID || !mayCount(r) {
				continue
			}
			if len(q.Runs) == MaxQualifyingRuns {
				q.More = true
				break
			}
			q.Runs = append(q.Runs, r)
		}
		out = append(out, q)
	}
	return out, nil
}

// mayCount: a judged run counts; a run still on its way may once judged;
// a failed or cancelled one never does.
func mayCount(r store.Run) bool {
	if r.State == store.RunDone {
		return r.Verdict != ""
	}
	return !store.RunFinal(r.State)
}
