// Package standing says where a program stands: its latest verdicts, its
// rollout's current stage (with its gates and any halt), and what waits
// for whom — a qualifying run for the current stage, a side's approval or
// consent to resume, the other side's co-signature on a report the stage
// rests on, a run that failed to start, and what only an owner can set
// up. The program's overview shows all of it; Home shows each member
// what is theirs to do (Wait.For), from the same reading.
package standing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// Need is what a member must be able to do to act on a wait. The
// program's roles grant needs (handlers hold that policy): engineers run
// profiles and co-sign reports, approvers decide on stages, owners set the
// program up.
type Need string

const (
	NeedEngineer Need = "engineer"
	NeedApprover Need = "approver"
	NeedOwner    Need = "owner"
)

// Kind is what a wait is for.
type Kind string

const (
	KindQualifyingRun Kind = "qualifying-run" // the current stage lacks a passing qualifying run
	KindApproval      Kind = "approval"       // the current stage awaits a side's approval (or waiver)
	KindResume        Kind = "resume"         // the halted stage awaits a side's consent to resume
	KindCoSign        Kind = "co-signature"   // a report the stage rests on awaits the other side's signature
	KindFailedStart   Kind = "failed-start"   // a member's run failed before its probe started
	KindPlan          Kind = "plan"           // the program has no rollout plan
	KindApprover      Kind = "approver"       // a side has no member who may approve
)

// Wait is one thing the program waits for, from whom.
type Wait struct {
	Kind Kind
	// Text says what waits for whom, in words ("run #12's report awaits
	// the customer's co-signature").
	Text string
	// Side is the side that acts ("" either side); Need what its member
	// must be able to do; UserID, when set, the one member who acts.
	Side   acceptance.OrgKind
	Need   Need
	UserID int64
	// What the wait is about, for links: a run, a stage, and for a
	// qualifying run the profile and gate set versions to run (or the run
	// on its way, RunID).
	RunID            int64
	StageID          int64
	Stage            string
	ProfileVersionID int64
	GateSetVersionID int64
}

// For says whether a member is one who acts on the wait: of its side (any
// side when it names none), able to do what it needs (has applies the
// member's role), and the member it names, when it names one.
func (w Wait) For(side acceptance.OrgKind, userID int64, has func(Need) bool) bool {
	if w.UserID != 0 && w.UserID != userID {
		return false
	}
	if w.Side != "" && w.Side != side {
		return false
	}
	return has(w.Need)
}

// Rollout is where the program's rollout stands.
type Rollout struct {
	Planned bool
	Status  acceptance.RolloutStatus
	// Broken: the decision log does not replay on the plan.
	Broken string
	Stages int
	// Current is the stage decisions apply to (nil once complete, or
	// without a plan, or when the log does not replay).
	Current  *Stage
	Rollback *acceptance.Decision
	// Names maps the decisions' actors (e-mail addresses) to display names.
	Names map[string]string
}

// Stage is the rollout's current stage as it stands.
type Stage struct {
	Position int // 1-based
	Stage    store.RolloutStage
	Status   acceptance.StageStatus
	Gates    rollout.GateReading
	// Label is the state in words (acceptance.StageLabel).
	Label string
	// Qualifying is, per profile, the runs that count and what to run.
	Qualifying []rollout.Qualifying
}

// Standing is where a program stands.
type Standing struct {
	// Judged are the program's newest judged runs, newest first.
	Judged  []store.Run
	Rollout Rollout
	Waits   []Wait
}

// MaxJudged is how many judged runs Read lists.
const MaxJudged = 5

// recentRuns is how many of the newest runs Read looks at.
const recentRuns = 100

// Read reads where a program stands.
func Read(ctx context.Context, st *store.Store, programID int64) (Standing, error) {
	var s Standing
	runs, err := st.ListRuns(ctx, programID, store.RunFilter{Limit: recentRuns})
	if err != nil {
		return s, err
	}
	for _, r := range runs {
		if r.State == store.RunDone && r.Verdict != "" && len(s.Judged) < MaxJudged {
			s.Judged = append(s.Judged, r)
		}
	}
	ro, err := rollout.Load(ctx, st, programID)
	if err != nil {
		return s, err
	}
	if s.Rollout, err = readRollout(ctx, st, ro); err != nil {
		return s, err
	}
	if cur := s.Rollout.Current; cur != nil {
		s.Waits = append(s.Waits, stageWaits(ro, *cur)...)
	}
	cosign, err := coSignWaits(ctx, st, s)
	if err != nil {
		return s, err
	}
	s.Waits = append(s.Waits, cosign...)
	s.Waits = append(s.Waits, failedStarts(runs)...)
	setup, err := setupWaits(ctx, st, programID, s.Rollout)
	if err != nil {
		return s, err
	}
	s.Waits = append(s.Waits, setup...)
	return s, nil
}

func readRollout(ctx context.Context, st *store.Store, ro rollout.Rollout) (Rollout, error) {
	r := Rollout{Planned: len(ro.Stages) > 0, Stages: len(ro.Stages)}
	if !r.Planned {
		return r, nil
	}
	if ro.ReplayErr != nil {
		r.Broken = ro.ReplayErr.Error()
		return r, nil
	}
	r.Status, r.Rollback = ro.State.Status(), ro.State.Rollback
	r.Names = map[string]string{}
	for _, d := range ro.Decisions {
		if d.ActorName != "" {
			r.Names[d.Record.Actor] = d.ActorName
		}
	}
	stage, status, ok := ro.CurrentStage()
	if !ok {
		return r, nil
	}
	gates, err := rollout.ReadGates(ctx, st, stage)
	if err != nil {
		return r, err
	}
	q, err := rollout.QualifyingRuns(ctx, st, stage)
	if err != nil {
		return r, err
	}
	r.Current = &Stage{Position: ro.State.Current + 1, Stage: stage, Status: status, Gates: gates,
		Label: acceptance.StageLabel(status.State, gates.Standing()), Qualifying: q}
	return r, nil
}

// StageName names a stage as waits say it: "stage 2, pilot-5pct".
func StageName(position int, name string) string {
	return fmt.Sprintf("stage %d, %s,", position, name)
}

// stageWaits is what the current stage waits for: its approvals (or
// consents to resume) by side, and a qualifying run while its gates do
// not pass. A rollout that has ended (rejected, rolled back) waits for
// nothing.
func stageWaits(ro rollout.Rollout, cur Stage) []Wait {
	if ro.State.Rollback != nil {
		return nil
	}
	name := StageName(cur.Position, cur.Stage.Name)
	base := Wait{StageID: cur.Stage.ID, Stage: cur.Stage.Name}
	var out []Wait
	switch cur.Status.State {
	case acceptance.StageHalted:
		for _, side := range cur.Status.MissingSides() {
			w := base
			w.Kind, w.Side, w.Need = KindResume, side, NeedApprover
			w.Text = fmt.Sprintf("%s is halted: it awaits the %s approver's consent to resume", name, side)
			out = append(out, w)
		}
	case acceptance.StageAwaitingApproval:
		if !cur.Gates.Pass {
			for _, q := range cur.Qualifying {
				w := base
				w.Kind, w.Need = KindQualifyingRun, NeedEngineer
				w.ProfileVersionID, w.GateSetVersionID = q.ProfileVersionID, q.GateSetVersionID
				w.Text = fmt.Sprintf("%s awaits a qualifying run: %s judged by %s%s (an engineer of either side)",
					name, q.ProfileName, q.GateSetLabel, evidenceNote(cur.Gates, q.ProfileID))
				if len(q.Runs) > 0 && !store.RunFinal(q.Runs[0].State) {
					// One is on its way: say so, rather than invite a second.
					w.RunID = q.Runs[0].ID
					w.Text = fmt.Sprintf("%s awaits run #%d (%s), a qualifying run of %s that counts once judged by %s",
						name, w.RunID, store.RunStateLabel(q.Runs[0].State), q.ProfileName, q.GateSetLabel)
				}
				out = append(out, w)
			}
		}
		for _, side := range cur.Status.MissingSides() {
			w := base
			w.Kind, w.Side, w.Need = KindApproval, side, NeedApprover
			w.Text = fmt.Sprintf("%s awaits the %s approver", name, side)
			if !cur.Gates.Pass {
				w.Text += ": an approval once its gates pass, or a waiver with a reason"
			}
			for _, a := range cur.Status.Approvals {
				if a.Kind == acceptance.DecisionWaive {
					w.Text += fmt.Sprintf(" (the %s side approved it with a waiver: %s)", a.Actor.OrgKind, clip(a.Reason, 120))
				}
			}
			out = append(out, w)
		}
	}
	return out
}

// evidenceNote says why a profile's evidence does not do: its latest
// qualifying run's verdict, or its problem.
func evidenceNote(g rollout.GateReading, profileID int64) string {
	for _, p := range g.Profiles {
		if p.ProfileID != profileID {
			continue
		}
		switch {
		case p.Run != nil && p.Problem != "":
			return " (" + p.Problem + ")"
		case p.Run != nil && p.Verdict != string(acceptance.Pass):
			return fmt.Sprintf(" (run #%d is %s)", p.Run.ID, p.Verdict)
		}
	}
	return ""
}

// coSignWaits lists the reports that await the other side's co-signature:
// those of the runs the current stage rests on (without a plan, the
// newest judged runs). A run whose requester is of neither side has no
// other side, and waits for nothing.
func coSignWaits(ctx context.Context, st *store.Store, s Standing) ([]Wait, error) {
	var runs []store.Run
	switch {
	case s.Rollout.Current != nil:
		for _, p := range s.Rollout.Current.Gates.Profiles {
			if p.Run != nil && p.Problem == "" {
				runs = append(runs, *p.Run)
			}
		}
	case !s.Rollout.Planned:
		runs = s.Judged
	}
	var out []Wait
	for _, run := range runs {
		if !run.HasReport {
			continue
		}
		other, err := report.OtherSideOf(ctx, st, run)
		var refused *report.CoSignRefusal
		if errors.As(err, &refused) {
			continue
		}
		if err != nil {
			return nil, err
		}
		signed, err := st.ListReportCosignatures(ctx, run.ID)
		if err != nil {
			return nil, err
		}
		done := false
		for _, c := range signed {
			done = done || c.OrganizationID == other.OrgID
		}
		if done {
			continue
		}
		out = append(out, Wait{Kind: KindCoSign, Side: acceptance.OrgKind(other.OrgKind), Need: NeedEngineer, RunID: run.ID,
			Text: fmt.Sprintf("run #%d's report awaits the %s's co-signature", run.ID, other.OrgKind)})
	}
	return out, nil
}

// failedStarts lists runs that failed before their probe started (a host
// unreachable, a key refused, a place not allowed), for the member who
// requested each, unless they have requested the same profile since.
func failedStarts(runs []store.Run) []Wait {
	var out []Wait
	since := map[string]bool{} // requester/profile version of a newer run
	for _, r := range runs {   // newest first
		if r.CreatedBy == nil || r.ProfileVersionID == nil {
			continue
		}
		key := fmt.Sprintf("%d/%d", *r.CreatedBy, *r.ProfileVersionID)
		if r.State == store.RunFailed && !r.Launched && !since[key] {
			out = append(out, Wait{Kind: KindFailedStart, Need: NeedEngineer, UserID: *r.CreatedBy, RunID: r.ID,
				Text: fmt.Sprintf("run #%d, requested by %s, failed to start (%s): it awaits them to fix it and run it again",
					r.ID, r.CreatedByName, strings.TrimSuffix(r.Reason, "."))})
		}
		since[key] = true
	}
	return out
}

// setupWaits is what only an owner can do: give the program a rollout
// plan, and a member who may approve on each side (a stage needs both).
func setupWaits(ctx context.Context, st *store.Store, programID int64, ro Rollout) ([]Wait, error) {
	var out []Wait
	if !ro.Planned {
		out = append(out, Wait{Kind: KindPlan, Need: NeedOwner, Text: "the program has no rollout plan: an owner sets one up"})
	}
	members, err := st.ListMembers(ctx, programID)
	if err != nil {
		return nil, err
	}
	for _, side := range []acceptance.OrgKind{acceptance.OrgVendor, acceptance.OrgCustomer} {
		approver := false
		for _, m := range members {
			approver = approver || (m.OrgKind == string(side) && !m.Disabled && (m.Role == store.RoleApprover || m.Role == store.RoleOwner))
		}
		if !approver {
			out = append(out, Wait{Kind: KindApprover, Need: NeedOwner,
				Text: fmt.Sprintf("the %s side has no approver, so no stage can be approved: an owner adds one", side)})
		}
	}
	return out, nil
}

// clip shortens a written reason for a line of a list.
func clip(s string, n int) string {
	r := []rune(strings.TrimSpace(s))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n]) + "…"
}
