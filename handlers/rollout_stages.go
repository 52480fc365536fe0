package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// The rollout stages editor (program owners): the rollout plan's stages,
// their gates and production watches. Every change takes the decision
// chain's lock, so that it never races a decision, and keeps what the
// decision log depends on: stages named by a decision stay; the gates of a
// stage that was approved or rejected, or has approvals in its current
// attempt, do not change under those approvals.

func (s *Server) showRolloutStages(w http.ResponseWriter, r *http.Request) {
	s.renderStagesEditor(w, r, http.StatusOK, stageErrors{})
}

// stageErrors carries a failed form back to the editor.
type stageErrors struct {
	general   string
	newStage  *web.StageForm
	stageID   int64
	stageForm *web.StageForm
	watchForm *web.WatchForm
}

func (s *Server) renderStagesEditor(w http.ResponseWriter, r *http.Request, status int, pe stageErrors) {
	pr := programFrom(r.Context())
	ctx := r.Context()
	ro, err := rollout.Load(ctx, s.store, pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	watches, err := s.store.ListWatches(ctx, pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	d := web.RolloutStagesPage{Error: pe.general, NewStage: web.StageForm{Profiles: map[int64]bool{}}}
	if pe.newStage != nil {
		d.NewStage = *pe.newStage
	}
	if err := s.stageChoices(r, &d); err != nil {
		s.serverError(w, r, err)
		return
	}
	for i, st := range ro.Stages {
		ps := web.EditedStage{Stage: st, State: "unknown", Locked: stageLocked(ro, i), Deletable: ro.ReplayErr == nil && !ro.Named(st.Name),
			Form: stageFormOf(st), WatchForm: s.watchFormFromGates(ctx, pr.ID, st)}
		if ro.ReplayErr == nil && i < len(ro.State.Stages) {
			ps.State = string(ro.State.Stages[i].State)
			for _, a := range ro.State.Stages[i].Approvals {
				if a.Kind == acceptance.DecisionWaive {
					who := a.Actor.Name
					if who == "" {
						who = a.Actor.UserID
					}
					ps.Waivers = append(ps.Waivers, fmt.Sprintf("%s (%s side): %s", who, a.Actor.OrgKind, a.Reason))
				}
			}
		}
		for _, wt := range watches {
			if wt.StageID == st.ID {
				wt := wt
				ps.Watch = &wt
				ps.WatchForm = watchFormOf(wt)
			}
		}
		if pe.stageID == st.ID {
			if pe.stageForm != nil {
				ps.Form = *pe.stageForm
			}
			if pe.watchForm != nil {
				ps.WatchForm = *pe.watchForm
			}
		}
		d.Stages = append(d.Stages, ps)
	}
	p := s.page(r, "Rollout plan · "+pr.Name, "programs", s.rolloutCrumbs(pr, "Plan")...)
	s.render(w, r, status, web.RolloutStagesEditor(p, pr.ProgramAccess, d))
}

// stageChoices lists every gate set version and every profile.
func (s *Server) stageChoices(r *http.Request, d *web.RolloutStagesPage) error {
	pr := programFrom(r.Context())
	ctx := r.Context()
	gates, err := s.store.ListSpecs(ctx, store.KindGateSet, pr.ID)
	if err != nil {
		return err
	}
	for _, g := range gates {
		versions, err := s.store.ListSpecVersions(ctx, store.KindGateSet, pr.ID, g.ID)
		if err != nil {
			return err
		}
		for _, v := range versions {
			d.GateSets = append(d.GateSets, web.RunChoice{ID: v.ID, Label: fmt.Sprintf("%s v%d", g.Name, v.Version)})
		}
	}
	profiles, err := s.store.ListSpecs(ctx, store.KindProfile, pr.ID)
	if err != nil {
		return err
	}
	for _, p := range profiles {
		d.Profiles = append(d.Profiles, web.RunChoice{ID: p.ID, Label: p.Name})
	}
	return nil
}

// stageLocked says why a stage's gates may not change ("" when they may).
func stageLocked(ro rollout.Rollout, i int) string {
	if ro.ReplayErr != nil {
		return "The decision log does not replay on the plan; the plan is frozen."
	}
	if i >= len(ro.State.Stages) {
		return ""
	}
	st := ro.State.Stages[i]
	switch {
	case st.State == acceptance.StageApproved:
		return "Approved: its gates are part of the record."
	case st.State == acceptance.StageRejected:
		return "Rejected: its gates are part of the record."
	case len(st.Approvals) > 0:
		return "It has approvals given on these gates; they cannot change under them."
	case ro.State.Rollback != nil:
		return "A rollback was requested; the plan is frozen."
	}
	return ""
}

func stageFormOf(st store.RolloutStage) web.StageForm {
	f := web.StageForm{Name: st.Name, Description: st.Description, GateSetVersion: st.GateSetVersionID, Profiles: map[int64]bool{}}
	var pinned []string
	for _, p := range st.Profiles {
		f.Profiles[p.ProfileID] = true
		if p.RunID != nil {
			pinned = append(pinned, strconv.FormatInt(*p.RunID, 10))
		}
	}
	f.PinnedRuns = strings.Join(pinned, ", ")
	return f
}

// watchFormFromGates starts a stage's new watch from its gate set: the
// first absolute stop-loss line (a relative one needs a baseline that a
// production fleet does not have), its unit and k. The query stays to be
// written: only the team knows how its fleet exports the figure.
func (s *Server) watchFormFromGates(ctx context.Context, programID int64, st store.RolloutStage) web.WatchForm {
	f := web.WatchForm{Comparator: "<=", Consecutive: "3", Interval: "30"}
	v, err := s.store.GetSpecVersionByID(ctx, store.KindGateSet, programID, st.GateSetVersionID)
	if err != nil {
		return f // the stage's own page says what is wrong with its gates
	}
	var g acceptance.GateSetSpec
	if err := json.Unmarshal(v.Spec, &g); err != nil {
		return f
	}
	g = g.Normalized()
	for _, c := range g.Criteria {
		if c.StopLoss == nil || c.Mode != acceptance.Absolute {
			continue
		}
		f.Name, f.Comparator, f.Unit = c.Name, string(c.Comparator), c.Unit
		f.Line = strconv.FormatFloat(*c.StopLoss, 'g', -1, 64)
		f.Consecutive = strconv.Itoa(g.StopLossConsecutive)
		f.From = fmt.Sprintf("The line, unit and k are those of the stop-loss of criterion %s (%s %s) in %s; write the query that gives the same figure from the serving fleet.",
			c.Name, c.Statistic, web.MetricName(c.Metric), st.GateSetLabel())
		return f
	}
	return f
}

func watchFormOf(wt store.Watch) web.WatchForm {
	return web.WatchForm{Name: wt.Name, Endpoint: wt.Endpoint, Query: wt.Query, Comparator: wt.Comparator,
		Line: strconv.FormatFloat(wt.Line, 'g', -1, 64), Unit: wt.Unit, Consecutive: strconv.Itoa(wt.Consecutive), Interval: strconv.Itoa(wt.IntervalSeconds)}
}

// parseStageForm validates a stage's gates: a gate set version and one or
// more profiles of the program, and the runs chosen explicitly (done,
// judged by that version, at most one per chosen profile).
func (s *Server) parseStageForm(r *http.Request) (web.StageForm, store.StageGates, error) {
	pr := programFrom(r.Context())
	ctx := r.Context()
	f := web.StageForm{Name: strings.TrimSpace(r.PostFormValue("name")), Description: strings.TrimSpace(r.PostFormValue("description")),
		PinnedRuns: strings.TrimSpace(r.PostFormValue("pinned_runs")), Profiles: map[int64]bool{}, Errors: map[string]string{}}
	g := store.StageGates{Description: f.Description}
	if utf8.RuneCountInString(f.Description) > acceptance.MaxHelpLen {
		f.Errors["description"] = fmt.Sprintf("At most %d characters.", acceptance.MaxHelpLen)
	}
	f.GateSetVersion, _ = strconv.ParseInt(r.PostFormValue("gate_set_version"), 10, 64)
	if f.GateSetVersion <= 0 {
		f.Errors["gate_set_version"] = "Choose the gate set version that must pass."
	} else if _, err := s.store.GetSpecVersionByID(ctx, store.KindGateSet, pr.ID, f.GateSetVersion); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			return f, g, err
		}
		f.Errors["gate_set_version"] = "Choose a gate set version of this program."
	}
	g.GateSetVersionID = f.GateSetVersion
	names := map[int64]string{}
	for _, raw := range r.PostForm["profile"] {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id <= 0 {
			f.Errors["profiles"] = "Choose profiles of this program."
			continue
		}
		sp, err := s.store.GetSpec(ctx, store.KindProfile, pr.ID, id)
		if errors.Is(err, store.ErrNotFound) {
			f.Errors["profiles"] = "Choose profiles of this program."
			continue
		}
		if err != nil {
			return f, g, err
		}
		if !f.Profiles[id] {
			f.Profiles[id] = true
			names[id] = sp.Name
			g.Profiles = append(g.Profiles, store.StageProfile{ProfileID: id, ProfileName: sp.Name})
		}
	}
	if len(g.Profiles) == 0 && f.Errors["profiles"] == "" {
		f.Errors["profiles"] = "Choose at least one profile the gates must pass on."
	}
	for _, part := range strings.FieldsFunc(f.PinnedRuns, func(r rune) bool { return r == ',' || r == ' ' || r == ';' }) {
		id, err := strconv.ParseInt(strings.TrimPrefix(part, "#"), 10, 64)
		if err != nil || id <= 0 {
			f.Errors["pinned_runs"] = fmt.Sprintf("%q is not a run number.", part)
			break
		}
		run, err := s.store.GetRun(ctx, pr.ID, id)
		if errors.Is(err, store.ErrNotFound) {
			f.Errors["pinned_runs"] = fmt.Sprintf("Run #%d is not a run of this program.", id)
			break
		}
		if err != nil {
			return f, g, err
		}
		msg := ""
		switch {
		case run.ProfileID == nil || !f.Profiles[*run.ProfileID]:
			msg = fmt.Sprintf("Run #%d is not a run of one of the chosen profiles.", id)
		case run.GateSetVersionID == nil || *run.GateSetVersionID != f.GateSetVersion:
			msg = fmt.Sprintf("Run #%d was not judged by the chosen gate set version.", id)
		case run.State != store.RunDone || run.Verdict == "":
			msg = fmt.Sprintf("Run #%d has no verdict yet (%s).", id, run.State)
		}
		if msg != "" {
			f.Errors["pinned_runs"] = msg
			break
		}
		for i := range g.Profiles {
			if g.Profiles[i].ProfileID == *run.ProfileID {
				if g.Profiles[i].RunID != nil {
					msg = fmt.Sprintf("Choose at most one run of %s.", names[*run.ProfileID])
				}
				g.Profiles[i].RunID = &run.ID
			}
		}
		if msg != "" {
			f.Errors["pinned_runs"] = msg
			break
		}
	}
	return f, g, nil
}

func (s *Server) addStage(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	f, g, err := s.parseStageForm(r)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	var refusal string
	err = s.store.InTx(ctx, func(tx *store.Store) error {
		if _, err := tx.LockDecisionChain(ctx, pr.ID); err != nil {
			return err
		}
		ro, err := rollout.Load(ctx, tx, pr.ID)
		if err != nil {
			return err
		}
		plan := ro.Plan()
		plan.Stages = append(plan.Stages, acceptance.RolloutStage{Name: f.Name, Description: f.Description})
		if verr := plan.Validate(); verr != nil {
			f.Errors["name"] = stageNameProblem(verr, len(plan.Stages)-1)
		}
		switch {
		case ro.ReplayErr != nil:
			refusal = "The decision log does not replay on the plan; the plan is frozen."
		case ro.State.Rollback != nil:
			refusal = "A rollback was requested; the plan is frozen."
		}
		if refusal != "" || len(f.Errors) > 0 {
			return nil
		}
		id, err := tx.AddRolloutStage(ctx, pr.ID, f.Name, g, v.ID)
		if err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "rollout_stage_added", ProgramID: &pr.ID, Target: f.Name,
			ClientAddr: clientAddr(r), Details: map[string]any{"stage_id": id, "gate_set_version_id": g.GateSetVersionID, "profiles": len(g.Profiles)}})
	})
	if errors.Is(err, store.ErrConflict) {
		f.Errors["name"] = "A stage of that name exists."
		err = nil
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if refusal != "" || len(f.Errors) > 0 {
		s.renderStagesEditor(w, r, http.StatusUnprocessableEntity, stageErrors{general: refusal, newStage: &f})
		return
	}
	s.setFlash(w, "ok", fmt.Sprintf("Stage %s added to the plan.", f.Name))
	redirect(w, r, web.ProgramLink(pr.ID, "/rollout/plan"))
}

// stageNameProblem picks the plan validation's words about one stage.
func stageNameProblem(err error, index int) string {
	prefix := fmt.Sprintf("stages[%d].name: ", index)
	for _, part := range strings.Split(err.Error(), "; ") {
		part = strings.TrimPrefix(part, "rollout plan: ")
		if strings.HasPrefix(part, prefix) {
			return strings.TrimPrefix(part, prefix)
		}
		if strings.HasPrefix(part, "stages: ") {
			return strings.TrimPrefix(part, "stages: ")
		}
	}
	return err.Error()
}

func (s *Server) editStage(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	stage, ok := s.loadStage(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	f, g, err := s.parseStageForm(r)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	f.Name = stage.Name
	var refusal string
	err = s.store.InTx(ctx, func(tx *store.Store) error {
		if _, err := tx.LockDecisionChain(ctx, pr.ID); err != nil {
			return err
		}
		ro, err := rollout.Load(ctx, tx, pr.ID)
		if err != nil {
			return err
		}
		for i, st := range ro.Stages {
			if st.ID == stage.ID {
				refusal = stageLocked(ro, i)
			}
		}
		if refusal != "" || len(f.Errors) > 0 {
			return nil
		}
		if err := tx.UpdateRolloutStage(ctx, pr.ID, stage.ID, g); err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "rollout_stage_changed", ProgramID: &pr.ID, Target: stage.Name,
			ClientAddr: clientAddr(r), Details: map[string]any{"gate_set_version_id": g.GateSetVersionID, "profiles": len(g.Profiles)}})
	})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if refusal != "" || len(f.Errors) > 0 {
		if refusal != "" {
			refusal = fmt.Sprintf("Stage %s cannot change: %s", stage.Name, refusal)
		}
		s.renderStagesEditor(w, r, http.StatusUnprocessableEntity, stageErrors{general: refusal, stageID: stage.ID, stageForm: &f})
		return
	}
	s.setFlash(w, "ok", fmt.Sprintf("Stage %s saved.", stage.Name))
	redirect(w, r, web.ProgramLink(pr.ID, "/rollout/plan"))
}

func (s *Server) deleteStage(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	stage, ok := s.loadStage(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	refusal := ""
	if r.PostFormValue("confirm") != "1" {
		refusal = fmt.Sprintf("Tick the box to confirm that stage %s is to be removed.", stage.Name)
	}
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		if _, err := tx.LockDecisionChain(ctx, pr.ID); err != nil {
			return err
		}
		ro, err := rollout.Load(ctx, tx, pr.ID)
		if err != nil {
			return err
		}
		switch {
		case refusal != "":
		case ro.ReplayErr != nil:
			refusal = "The decision log does not replay on the plan; the plan is frozen."
		case ro.Named(stage.Name):
			refusal = fmt.Sprintf("Stage %s is named by decisions in the log; it stays in the plan.", stage.Name)
		}
		if refusal != "" {
			return nil
		}
		if err := tx.DeleteRolloutStage(ctx, pr.ID, stage.ID); err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "rollout_stage_removed", ProgramID: &pr.ID, Target: stage.Name,
			ClientAddr: clientAddr(r)})
	})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if refusal != "" {
		s.renderStagesEditor(w, r, http.StatusUnprocessableEntity, stageErrors{general: refusal})
		return
	}
	s.setFlash(w, "ok", fmt.Sprintf("Stage %s removed from the plan.", stage.Name))
	redirect(w, r, web.ProgramLink(pr.ID, "/rollout/plan"))
}

// parseWatchForm validates a production watch.
func parseWatchForm(r *http.Request) (web.WatchForm, store.NewWatch) {
	f := web.WatchForm{Name: strings.TrimSpace(r.PostFormValue("name")), Endpoint: strings.TrimSpace(r.PostFormValue("endpoint")),
		Query: strings.TrimSpace(r.PostFormValue("query")), Comparator: r.PostFormValue("comparator"), Line: strings.TrimSpace(r.PostFormValue("line")),
		Unit: strings.TrimSpace(r.PostFormValue("unit")), Consecutive: strings.TrimSpace(r.PostFormValue("consecutive")),
		Interval: strings.TrimSpace(r.PostFormValue("interval")), Errors: map[string]string{}}
	w := store.NewWatch{Name: f.Name, Endpoint: f.Endpoint, Query: f.Query, Comparator: f.Comparator, Unit: f.Unit}
	if n := utf8.RuneCountInString(f.Name); n == 0 || n > 100 || strings.ContainsAny(f.Name, "\n\r\t") {
		f.Errors["name"] = "Name the watch in one line (at most 100 characters)."
	}
	if u, err := url.Parse(f.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(f.Endpoint) > 2000 {
		f.Errors["endpoint"] = "Give the http:// or https:// base URL of a Prometheus-compatible API."
	}
	if n := utf8.RuneCountInString(f.Query); n == 0 || n > 4000 {
		f.Errors["query"] = "Write the query (at most 4000 characters)."
	}
	if f.Comparator != "<=" && f.Comparator != ">=" {
		f.Errors["comparator"] = "Choose at or below, or at or above."
	}
	line, err := strconv.ParseFloat(f.Line, 64)
	if err != nil || math.IsNaN(line) || math.IsInf(line, 0) {
		f.Errors["line"] = "The line is a number, in the unit of the query's value."
	}
	w.Line = line
	if utf8.RuneCountInString(f.Unit) > 20 {
		f.Errors["unit"] = "At most 20 characters."
	}
	k, err := strconv.Atoi(f.Consecutive)
	if err != nil || k < 1 || k > 100 {
		f.Errors["consecutive"] = "From 1 to 100 checks in a row."
	}
	w.Consecutive = k
	interval, err := strconv.Atoi(f.Interval)
	if err != nil || interval < 5 || interval > 86400 {
		f.Errors["interval"] = "From 5 to 86400 seconds."
	}
	w.IntervalSeconds = interval
	return f, w
}

func (s *Server) setWatch(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	stage, ok := s.loadStage(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	f, nw := parseWatchForm(r)
	if f.Errors["endpoint"] == "" {
		// The policy the checks dial through, now, so that a refused
		// endpoint is said on the form rather than on every check.
		if err := s.egress.CheckEndpoint(ctx, f.Endpoint); err != nil {
			f.Errors["endpoint"] = egressProblem(err, "Production watches")
		}
	}
	if len(f.Errors) > 0 {
		s.renderStagesEditor(w, r, http.StatusUnprocessableEntity, stageErrors{stageID: stage.ID, watchForm: &f})
		return
	}
	nw.CreatedBy = v.ID
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		if _, err := tx.LockDecisionChain(ctx, pr.ID); err != nil {
			return err
		}
		if _, err := tx.SetWatch(ctx, pr.ID, stage.ID, nw); err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "rollout_watch_set", ProgramID: &pr.ID, Target: stage.Name,
			ClientAddr: clientAddr(r), Details: map[string]any{"name": nw.Name, "query": nw.Query, "line": nw.Line, "comparator": nw.Comparator, "consecutive": nw.Consecutive}})
	})
	if err != nil {
		s.notFoundOr(w, r, err)
		return
	}
	s.setFlash(w, "ok", fmt.Sprintf("Production watch of stage %s saved; it runs while the stage awaits approval.", stage.Name))
	redirect(w, r, web.ProgramLink(pr.ID, "/rollout/plan"))
}

func (s *Server) deleteWatch(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	stage, ok := s.loadStage(w, r)
	if !ok {
		return
	}
	removed := false
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		if _, err := tx.LockDecisionChain(ctx, pr.ID); err != nil {
			return err
		}
		var err error
		if removed, err = tx.DeleteWatch(ctx, pr.ID, stage.ID); err != nil || !removed {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "rollout_watch_removed", ProgramID: &pr.ID, Target: stage.Name,
			ClientAddr: clientAddr(r)})
	})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if removed {
		s.setFlash(w, "ok", fmt.Sprintf("Production watch of stage %s removed.", stage.Name))
	} else {
		s.setFlash(w, "info", fmt.Sprintf("Stage %s has no production watch.", stage.Name))
	}
	redirect(w, r, web.ProgramLink(pr.ID, "/rollout/plan"))
}
