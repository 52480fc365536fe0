package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/accordlab/accord/service/standing"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// The program's overview and Home read where a program stands from one
// place (service/standing): the overview shows everything that waits and
// for whom, Home each member what is theirs to do.

// needsOf grants a role the needs of the waits it acts on, by the
// authorization policy (roleCan): engineers run and co-sign, approvers
// decide, owners set the program up (and do all three).
func needsOf(role store.Role) func(standing.Need) bool {
	return func(n standing.Need) bool {
		switch n {
		case standing.NeedEngineer:
			return roleCan(role, capEngineer)
		case standing.NeedApprover:
			return roleCan(role, capApprove)
		case standing.NeedOwner:
			return roleCan(role, capOwner)
		}
		return false
	}
}

// waitHref is where a wait is acted on, for one who acts on it (mine);
// anyone else is shown where it stands (the stage on the board), so that
// no link answers 403.
func waitHref(programID int64, w standing.Wait, mine bool) string {
	if !mine && (w.Kind == standing.KindQualifyingRun || w.Kind == standing.KindApproval || w.Kind == standing.KindPlan) {
		return boardLink(programID, w.Stage)
	}
	switch w.Kind {
	case standing.KindQualifyingRun:
		if w.RunID != 0 { // one is on its way
			return web.ProgramLink(programID, fmt.Sprintf("/runs/%d", w.RunID))
		}
		if w.ProfileVersionID != 0 {
			return qualifyingRunLink(programID, w.ProfileVersionID, w.GateSetVersionID)
		}
	case standing.KindCoSign, standing.KindFailedStart:
		return web.ProgramLink(programID, fmt.Sprintf("/runs/%d", w.RunID))
	case standing.KindApproval:
		return web.ProgramLink(programID, fmt.Sprintf("/rollout/stages/%d/approve", w.StageID))
	case standing.KindPlan:
		return web.ProgramLink(programID, "/rollout/plan")
	case standing.KindApprover:
		return web.ProgramLink(programID, "/members")
	}
	return boardLink(programID, w.Stage)
}

// boardLink is the rollout board, at a stage when one is named.
func boardLink(programID int64, stage string) string {
	if stage == "" {
		return web.ProgramLink(programID, "/rollout")
	}
	return web.ProgramLink(programID, "/rollout#stage-"+stage)
}

// qualifyingRunLink opens the run form on a stage's profile version and
// gate set version (the form proposes the host and the baseline).
func qualifyingRunLink(programID, profileVersionID, gateSetVersionID int64) string {
	q := url.Values{"profile_version": {strconv.FormatInt(profileVersionID, 10)}, "gate_set_version": {strconv.FormatInt(gateSetVersionID, 10)}}
	return web.ProgramLink(programID, "/runs/new?"+q.Encode())
}

// programStatus reads where the program stands for its overview, as v
// sees it.
func (s *Server) programStatus(ctx context.Context, pr *programCtx, v *viewer) (web.ProgramStatus, error) {
	var out web.ProgramStatus
	st, err := standing.Read(ctx, s.store, pr.ID)
	if err != nil {
		return out, err
	}
	for _, r := range st.Judged {
		j := web.JudgedRun{ID: r.ID, Label: r.DisplayLabel(), Profile: fmt.Sprintf("%s v%d", r.ProfileName, r.ProfileVersion),
			GateSet: fmt.Sprintf("%s v%d", r.GateSetName, r.GateSetVersion), Verdict: r.Verdict}
		if r.FinishedAt != nil {
			j.At = r.FinishedAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		out.Judged = append(out.Judged, j)
	}
	out.Rollout = rolloutSummary(st.Rollout)
	side := rolloutSide(pr, v)
	for _, w := range st.Waits {
		mine := w.For(side, v.ID, needsOf(pr.Role))
		out.Waits = append(out.Waits, web.WaitView{Kind: string(w.Kind), Text: sentence(w.Text), Href: waitHref(pr.ID, w, mine)})
	}
	if out.Readiness, err = s.readinessSummary(ctx, pr.ID, st.Rollout.Current); err != nil {
		return out, err
	}
	return out, nil
}

func rolloutSummary(r standing.Rollout) web.RolloutSummary {
	out := web.RolloutSummary{Planned: r.Planned, Status: string(r.Status), Broken: r.Broken, Stages: r.Stages}
	if r.Rollback != nil {
		dv := ruleDecisionView(*r.Rollback, r.Names)
		out.Rollback = &dv
	}
	cur := r.Current
	if cur == nil {
		return out
	}
	out.Position, out.Stage, out.Label = cur.Position, cur.Stage.Name, cur.Label
	out.Evidence = gatesView(cur.Gates).Profiles
	for _, m := range cur.Status.MissingSides() {
		out.Missing = append(out.Missing, string(m))
	}
	if cur.Status.Halt != nil && r.Rollback == nil {
		dv := ruleDecisionView(*cur.Status.Halt, r.Names)
		out.Halt = &dv
	}
	return out
}

// readinessSummary is the hosts' readiness in short: each host's checks
// and the profiles it is ready for, and who is ready for the current
// stage's profiles.
func (s *Server) readinessSummary(ctx context.Context, programID int64, cur *standing.Stage) (web.ReadinessSummary, error) {
	rd, err := s.loadProgramReadiness(ctx, programID)
	if err != nil {
		return web.ReadinessSummary{}, err
	}
	m := rd.matrix
	out := web.ReadinessSummary{Profiles: len(m.Profiles)}
	ready := map[int64]int{}
	for _, p := range m.Profiles {
		for _, f := range p.Hosts {
			if !f.NoFacts && len(f.Failures) == 0 {
				ready[f.HostID]++
			}
		}
		if cur != nil && stageHasProfile(cur.Stage, p.SpecID) {
			out.StageProfiles = append(out.StageProfiles, p)
		}
	}
	for _, row := range m.Rows {
		out.Hosts = append(out.Hosts, web.HostReadiness{ID: row.Host.ID, Name: row.Host.Name, FactsAt: row.FactsAt,
			Pass: row.Pass, Warn: row.Warn, Fail: row.Fail, Unknown: row.Unknown, Ready: ready[row.Host.ID]})
	}
	return out, nil
}

func stageHasProfile(stage store.RolloutStage, profileID int64) bool {
	for _, p := range stage.Profiles {
		if p.ProfileID == profileID {
			return true
		}
	}
	return false
}

// sentence capitalises a wait's words for a list.
func sentence(text string) string {
	if text == "" || text[0] < 'a' || text[0] > 'z' {
		return text
	}
	return string(text[0]-'a'+'A') + text[1:] + "."
}

// waitingFor lists what waits for the viewer in each of their programs,
// and the programs where nothing can (they only view it).
func (s *Server) waitingFor(r *http.Request, v *viewer, programs []store.ProgramAccess) ([]web.WaitView, []string, error) {
	var out []web.WaitView
	var viewing []string
	keys := -1 // the viewer's registered SSH keys, read when a co-signature waits
	for _, p := range programs {
		if p.Role == "" {
			continue // a site admin who is not a member acts on nothing
		}
		if p.Role == store.RoleViewer {
			viewing = append(viewing, p.Name)
			continue
		}
		st, err := standing.Read(r.Context(), s.store, p.ID)
		if err != nil {
			return nil, nil, err
		}
		side := rolloutSide(&programCtx{ProgramAccess: p}, v)
		for _, w := range st.Waits {
			if !w.For(side, v.ID, needsOf(p.Role)) {
				continue
			}
			text := sentence(w.Text)
			if w.Kind == standing.KindCoSign {
				if keys < 0 {
					list, err := s.store.ListUserSSHKeys(r.Context(), v.ID)
					if err != nil {
						return nil, nil, err
					}
					keys = len(list)
				}
				if keys == 0 {
					text += " Co-signing takes an SSH key you register under SSH keys first."
				}
			}
			out = append(out, web.WaitView{Kind: string(w.Kind), Text: text, Href: waitHref(p.ID, w, true), Program: p.Name})
		}
	}
	return out, viewing, nil
}
