package rollout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/store"
)

// GateReading is a stage's gates as they stand: the gate set version's
// verdict on each of the stage's profiles.
type GateReading struct {
	Stage    store.RolloutStage
	Profiles []ProfileEvidence
	Pass     bool
}

// ProfileEvidence is the run a stage's gates are judged on for one profile.
type ProfileEvidence struct {
	ProfileID   int64
	ProfileName string
	Pinned      bool       // chosen explicitly rather than the latest qualifying run
	Run         *store.Run // nil: no qualifying run
	Verdict     string     // the run's verdict by the stage's gate set version
	// EvaluationDigest is the digest of the evaluation behind the verdict.
	EvaluationDigest string
	// Problem says why there is no usable verdict.
	Problem string
}

// ReadGates judges a stage's gates on its profiles' evidence runs: the
// run chosen explicitly, or the latest finished run of the profile judged
// by the stage's gate set version. They pass when every profile has a run
// whose verdict is PASS.
func ReadGates(ctx context.Context, st *store.Store, stage store.RolloutStage) (GateReading, error) {
	g := GateReading{Stage: stage, Pass: len(stage.Profiles) > 0}
	for _, p := range stage.Profiles {
		ev := ProfileEvidence{ProfileID: p.ProfileID, ProfileName: p.ProfileName, Pinned: p.RunID != nil}
		var run store.Run
		var err error
		if p.RunID != nil {
			run, err = st.GetRun(ctx, stage.ProgramID, *p.RunID)
		} else {
			run, err = st.LatestJudgedRun(ctx, stage.ProgramID, p.ProfileID, stage.GateSetVersionID)
		}
		switch {
		case errors.Is(err, store.ErrNotFound) && p.RunID != nil:
			ev.Problem = fmt.Sprintf("the chosen run #%d no longer exists", *p.RunID)
		case errors.Is(err, store.ErrNotFound):
			ev.Problem = fmt.Sprintf("no finished run of %s judged by %s yet", p.ProfileName, stage.GateSetLabel())
		case err != nil:
			return g, err
		default:
			ev.Run = &run
			ev.Verdict = run.Verdict
			switch {
			case run.ProfileID == nil || *run.ProfileID != p.ProfileID:
				ev.Problem = fmt.Sprintf("run #%d is not a run of %s", run.ID, p.ProfileName)
			case run.GateSetVersionID == nil || *run.GateSetVersionID != stage.GateSetVersionID:
				ev.Problem = fmt.Sprintf("run #%d was not judged by %s", run.ID, stage.GateSetLabel())
			case run.State != store.RunDone || run.Verdict == "":
				ev.Problem = fmt.Sprintf("run #%d is %s without a verdict", run.ID, run.State)
			}
			if ev.Problem == "" {
				e, err := st.RunLatestEvaluation(ctx, run.ID)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return g, err
				}
				if err == nil && e.GateSetVersionID == stage.GateSetVersionID {
					ev.EvaluationDigest = e.Digest
				}
			}
		}
		if ev.Problem != "" || ev.Verdict != "PASS" {
			g.Pass = false
		}
		g.Profiles = append(g.Profiles, ev)
	}
	return g, nil
}

// Verdict is the gates' reading as one word.
func (g GateReading) Verdict() string {
	if g.Pass {
		return "PASS"
	}
	return "FAIL"
}

// Evidence is the reading as a decision record carries it: the runs, their
// verdicts and the digests of the gate set and the evaluations.
func (g GateReading) Evidence() attest.DecisionEvidence {
	e := attest.DecisionEvidence{RunIDs: []string{}, Verdicts: map[string]string{GatesKey: g.Verdict()}, Digests: map[string]string{}}
	e.Digests["gate_set_version/"+strconv.FormatInt(g.Stage.GateSetVersionID, 10)] = g.Stage.GateSetDigest
	for _, p := range g.Profiles {
		if p.Run == nil {
			e.Verdicts["profile/"+p.ProfileName] = "NO RUN"
			continue
		}
		id := strconv.FormatInt(p.Run.ID, 10)
		e.RunIDs = append(e.RunIDs, id)
		v := p.Verdict
		if p.Problem != "" {
			v = "UNUSABLE"
		}
		e.Verdicts[id] = v
		if p.EvaluationDigest != "" {
			e.Digests["evaluation/"+id] = p.EvaluationDigest
		}
	}
	return e
}

// Summary says the reading in one line, for the state machine's record.
func (g GateReading) Summary() string {
	parts := make([]string, 0, len(g.Profiles))
	for _, p := range g.Profiles {
		switch {
		case p.Problem != "":
			parts = append(parts, p.ProfileName+": "+p.Problem)
		default:
			parts = append(parts, fmt.Sprintf("%s: run %d %s", p.ProfileName, p.Run.ID, p.Verdict))
		}
	}
	return fmt.Sprintf("%s %s (%s)", g.Stage.GateSetLabel(), g.Verdict(), strings.Join(parts, "; "))
}
