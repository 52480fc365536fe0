package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// Who may do what with a rollout (the rules of the decisions themselves
// are acceptance's state machine, applied by rollout.RecordDecision):
//   - any member sees the board and the decision log, and may halt the
//     current stage (a halt is a safety act);
//   - approvers and owners approve, waive, reject, resume and request a
//     rollback, for the side of their organisation;
//   - owners edit the plan, the production watches and the webhooks.
//
// A site admin who is not a member takes no decision: decisions belong to
// the two organisations.

func (s *Server) rolloutCrumbs(pr *programCtx, last string) []web.Crumb {
	c := []web.Crumb{{Label: "Programs", Href: "/programs"}, {Label: pr.Name, Href: web.ProgramLink(pr.ID, "")}, {Label: "Rollout", Href: web.ProgramLink(pr.ID, "/rollout")}}
	if last != "" {
		c = append(c, web.Crumb{Label: last})
	}
	return c
}

// rolloutSide is the side a member decides for: vendor when their
// organisation is the program's vendor, customer when it is its customer;
// "" for anyone else (a site admin who is not a member).
func rolloutSide(pr *programCtx, v *viewer) acceptance.OrgKind {
	if pr.Role == "" || v == nil || v.User.OrganizationID == nil {
		return ""
	}
	switch *v.User.OrganizationID {
	case pr.VendorOrgID:
		return acceptance.OrgVendor
	case pr.CustomerOrgID:
		return acceptance.OrgCustomer
	}
	return ""
}

// showRollout is the rollout board.
func (s *Server) showRollout(w http.ResponseWriter, r *http.Request) {
	s.renderRollout(w, r, http.StatusOK, "")
}

func (s *Server) renderRollout(w http.ResponseWriter, r *http.Request, status int, errText string) {
	pr := programFrom(r.Context())
	board, _, err := s.rolloutBoard(r.Context(), pr, viewerFrom(r.Context()))
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	board.Error = errText
	p := s.page(r, "Rollout · "+pr.Name, "programs", s.rolloutCrumbs(pr, "")...)
	s.render(w, r, status, web.RolloutPage(p, pr.ProgramAccess, board))
}

// rolloutBoard reads the plan, replays the log and reads every stage's gates.
func (s *Server) rolloutBoard(ctx context.Context, pr *programCtx, v *viewer) (web.RolloutBoard, rollout.Rollout, error) {
	ro, err := rollout.Load(ctx, s.store, pr.ID)
	if err != nil {
		return web.RolloutBoard{}, ro, err
	}
	side := rolloutSide(pr, v)
	b := web.RolloutBoard{
		Side: string(side), CanApprove: side != "" && roleCan(pr.Role, capApprove), CanHalt: side != "" && pr.can(decisionNeeds(acceptance.DecisionHalt)), CanEdit: pr.can(capOwner),
		CanRun:    pr.can(capEngineer),
		Decisions: len(ro.Decisions),
	}
	watches, err := s.store.ListWatches(ctx, pr.ID)
	if err != nil {
		return b, ro, err
	}
	names := actorNames(ro.Decisions)
	replayed := ro.ReplayErr == nil && len(ro.State.Stages) == len(ro.Stages)
	if ro.ReplayErr != nil {
		b.Broken = ro.ReplayErr.Error()
	} else if dl, err := s.readDecisionLog(ctx, pr.ID); err != nil {
		return b, ro, err
	} else if dl.Err != nil {
		b.Unverified = dl.Err.Error()
	}
	if ro.ReplayErr == nil && len(ro.Stages) > 0 {
		b.Status = string(ro.State.Status())
		if ro.State.Rollback != nil {
			dv := ruleDecisionView(*ro.State.Rollback, names)
			b.Rollback = &dv
		}
	}
	for i, stage := range ro.Stages {
		reading, err := rollout.ReadGates(ctx, s.store, stage)
		if err != nil {
			return b, ro, err
		}
		sv := web.StageView{ID: stage.ID, Position: stage.Position, Name: stage.Name, Description: stage.Description, State: "unknown", Label: "unknown", Gates: gatesView(reading)}
		if replayed {
			st := ro.State.Stages[i]
			sv.State, sv.Attempt, sv.Current = string(st.State), st.Attempt, i == ro.State.Current
			sv.Label = acceptance.StageLabel(st.State, reading.Standing())
			sv.Approvals, sv.Resumes = signoffViews(st.Approvals, names), signoffViews(st.Resumes, names)
			for _, m := range st.MissingSides() {
				sv.Missing = append(sv.Missing, string(m))
			}
			if st.Halt != nil {
				dv := ruleDecisionView(*st.Halt, names)
				sv.Halt = &dv
			}
			if st.Rejection != nil {
				dv := ruleDecisionView(*st.Rejection, names)
				sv.Rejection = &dv
			}
		}
		if sv.State != string(acceptance.StageApproved) && sv.State != string(acceptance.StageRejected) {
			if sv.Qualifying, err = qualifyingViews(ctx, s.store, pr.ID, stage); err != nil {
				return b, ro, err
			}
		}
		for _, wt := range watches {
			if wt.StageID == stage.ID {
				wv := watchView(wt)
				wv.Active = sv.Current && sv.State == string(acceptance.StageAwaitingApproval) && b.Rollback == nil
				sv.Watch = &wv
			}
		}
		b.Stages = append(b.Stages, sv)
	}
	return b, ro, nil
}

// qualifyingViews lists, per profile of a stage, the runs that count and
// the link that starts one that would.
func qualifyingViews(ctx context.Context, st *store.Store, programID int64, stage store.RolloutStage) ([]web.QualifyingView, error) {
	qs, err := rollout.QualifyingRuns(ctx, st, stage)
	if err != nil {
		return nil, err
	}
	out := make([]web.QualifyingView, 0, len(qs))
	for _, q := range qs {
		v := web.QualifyingView{ProfileID: q.ProfileID, Profile: q.ProfileName, GateSet: q.GateSetLabel, More: q.More}
		if q.ProfileVersionID != 0 {
			v.Href = qualifyingRunLink(programID, q.ProfileVersionID, q.GateSetVersionID)
		}
		for _, r := range q.Runs {
			v.Runs = append(v.Runs, web.QualifyingRun{ID: r.ID, Label: fmt.Sprintf("run #%d", r.ID), State: r.State, Verdict: r.Verdict})
		}
		out = append(out, v)
	}
	return out, nil
}

// actorNames maps the records' actors (e-mail addresses) to display names.
func actorNames(ds []store.StoredDecision) map[string]string {
	out := map[string]string{}
	for _, d := range ds {
		if d.ActorName != "" {
			out[d.Record.Actor] = d.ActorName
		}
	}
	return out
}

func actorLabel(id string, names map[string]string) string {
	if id == rollout.SystemActor.UserID {
		return rollout.SystemActor.Name
	}
	if n := names[id]; n != "" && n != id {
		return n + " <" + id + ">"
	}
	return id
}

func ruleDecisionView(d acceptance.Decision, names map[string]string) web.DecisionView {
	return web.DecisionView{Kind: string(d.Kind), Stage: d.Stage, Actor: actorLabel(d.Actor.UserID, names), Side: string(d.Actor.OrgKind), Reason: d.Reason, At: d.At}
}

func signoffViews(list []acceptance.Signoff, names map[string]string) []web.SignoffView {
	out := make([]web.SignoffView, 0, len(list))
	for _, a := range list {
		out = append(out, web.SignoffView{Kind: string(a.Kind), Actor: actorLabel(a.Actor.UserID, names), Side: string(a.Actor.OrgKind), Reason: a.Reason, At: a.At})
	}
	return out
}

func gatesView(g rollout.GateReading) web.GatesView {
	v := web.GatesView{GateSet: g.Stage.GateSetLabel(), GateSetID: g.Stage.GateSetID, GateSetVersionID: g.Stage.GateSetVersionID, Pass: g.Pass}
	for _, p := range g.Profiles {
		pv := web.ProfileGateView{ProfileID: p.ProfileID, Profile: p.ProfileName, Verdict: p.Verdict, Pinned: p.Pinned, Problem: p.Problem}
		if p.Run != nil {
			pv.RunID = p.Run.ID
		}
		v.Profiles = append(v.Profiles, pv)
	}
	return v
}

func watchRule(wt store.Watch) string {
	if wt.Comparator == ">=" {
		return "must stay at or above " + rollout.FormatWatchValue(wt.Line, wt.Unit)
	}
	return "must stay at or below " + rollout.FormatWatchValue(wt.Line, wt.Unit)
}

func watchView(wt store.Watch) web.WatchView {
	v := web.WatchView{Name: wt.Name, Endpoint: rollout.RedactEndpoint(wt.Endpoint), Query: wt.Query, Rule: watchRule(wt), Consecutive: wt.Consecutive,
		Interval: wt.IntervalSeconds, Breaches: wt.Breaches, LastChecked: wt.LastCheckedAt, LastError: wt.LastError,
		Href: web.ProgramLink(wt.ProgramID, fmt.Sprintf("/rollout/stages/%d/watch", wt.StageID))}
	if wt.LastValue != nil {
		v.LastValue = rollout.FormatWatchValue(*wt.LastValue, wt.Unit)
	}
	return v
}

// loadStage loads {stageID} within the program.
func (s *Server) loadStage(w http.ResponseWriter, r *http.Request) (store.RolloutStage, bool) {
	id, ok := idParam(r, "stageID")
	if !ok {
		s.renderError(w, r, http.StatusNotFound)
		return store.RolloutStage{}, false
	}
	st, err := s.store.GetRolloutStage(r.Context(), programFrom(r.Context()).ID, id)
	if err != nil {
		s.notFoundOr(w, r, err)
		return st, false
	}
	return st, true
}

// decideOnStage takes a person's decision on a stage from the board.
func (s *Server) decideOnStage(kind acceptance.DecisionKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		stage, ok := s.loadStage(w, r)
		if !ok {
			return
		}
		if err := r.ParseForm(); err != nil {
			s.renderError(w, r, http.StatusBadRequest)
			return
		}
		s.decideFromPage(w, r, kind, stage.Name, r.PostFormValue("reason"))
	}
}

func (s *Server) requestRollback(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	s.decideFromPage(w, r, acceptance.DecisionRollbackRequested, "", r.PostFormValue("reason"))
}

func (s *Server) decideFromPage(w http.ResponseWriter, r *http.Request, kind acceptance.DecisionKind, stage, reason string) {
	pr := programFrom(r.Context())
	out, err := s.recordDecision(r, kind, stage, reason)
	var refused *acceptance.TransitionError
	if errors.As(err, &refused) && (kind == acceptance.DecisionApprove || kind == acceptance.DecisionWaive) {
		// Approvals are taken on their confirmation page: say it there,
		// with what was written.
		s.renderConfirmApproval(w, r, http.StatusUnprocessableEntity, reason, refused.Error())
		return
	}
	if errors.As(err, &refused) {
		s.renderRollout(w, r, http.StatusUnprocessableEntity, refused.Error())
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", decisionFlash(kind, stage, out))
	redirect(w, r, web.ProgramLink(pr.ID, "/rollout"))
}

// decisionFlash says what a recorded decision did.
func decisionFlash(kind acceptance.DecisionKind, stage string, out rollout.DecisionOutcome) string {
	before := out.Before.Current
	switch kind {
	case acceptance.DecisionApprove, acceptance.DecisionWaive:
		if out.After.Current != before {
			if next, ok := out.After.CurrentStage(); ok {
				return fmt.Sprintf("Stage %s is approved by both sides. Stage %s now awaits approval.", stage, next.Name)
			}
			return fmt.Sprintf("Stage %s is approved by both sides. The rollout is complete.", stage)
		}
		st := out.After.Stages[before]
		return fmt.Sprintf("Your approval of stage %s is recorded. Waiting for the %s side.", stage, sidesText(st.MissingSides()))
	case acceptance.DecisionResume:
		if st := out.After.Stages[before]; st.State == acceptance.StageHalted {
			return fmt.Sprintf("Your consent to resume stage %s is recorded. Waiting for the %s side.", stage, sidesText(st.MissingSides()))
		}
		return fmt.Sprintf("Stage %s is resumed: it awaits both sides' approval again.", stage)
	case acceptance.DecisionHalt:
		return fmt.Sprintf("Stage %s is halted. Both sides must agree to resume it.", stage)
	case acceptance.DecisionReject:
		return fmt.Sprintf("Stage %s is rejected; the rollout has ended.", stage)
	case acceptance.DecisionRollbackRequested:
		return "A rollback is requested; the rollout takes no further decisions."
	}
	return "The decision is recorded."
}

func sidesText(sides []acceptance.OrgKind) string {
	parts := make([]string, len(sides))
	for i, s := range sides {
		parts[i] = string(s)
	}
	return strings.Join(parts, " and ")
}

// recordDecision records the viewer's decision in one transaction with its
// audit entry. A refusal is an *acceptance.TransitionError.
func (s *Server) recordDecision(r *http.Request, kind acceptance.DecisionKind, stage, reason string) (rollout.DecisionOutcome, error) {
	ctx := r.Context()
	pr := programFrom(ctx)
	v := viewerFrom(ctx)
	var out rollout.DecisionOutcome
	side := rolloutSide(pr, v)
	if side == "" {
		return out, &acceptance.TransitionError{Kind: kind, Message: "only a member of the program's vendor or customer organisation may take decisions"}
	}
	in := rollout.DecisionInput{
		ProgramID: pr.ID, Kind: kind, Stage: stage, ActorUserID: v.ID, OrgName: v.User.OrgName, Reason: strings.TrimSpace(reason), At: time.Now(),
		Actor: acceptance.Actor{UserID: strings.ToLower(v.Email), Name: v.Name, OrgKind: side, Approver: roleCan(pr.Role, capApprove)},
	}
	if v.User.OrganizationID != nil {
		in.Actor.OrgID = fmt.Sprint(*v.User.OrganizationID)
	}
	env := rollout.Env{Keyring: s.keyring}
	if s.river != nil {
		env.Queue = jobs.NewQueue(s.river)
	}
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		var err error
		if out, err = rollout.RecordDecision(ctx, tx, env, in); err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "rollout_decision", ProgramID: &pr.ID, Target: stage,
			ClientAddr: clientAddr(r), Details: map[string]any{"kind": string(kind), "seq": out.Record.Record.Seq, "hash": out.Record.Hash, "events": out.Events}})
	})
	return out, err
}

// decisionLog reads a program's log and verifies it as `accord verify`
// would verify its export.
type decisionLog struct {
	Decisions []store.StoredDecision
	Chain     *store.DecisionChain
	Log       *attest.DecisionLog
	Report    *attest.ChainReport
	Err       error // verification failed (nil when verified or empty)
	BadIndex  int   // the first bad record's position (-1: none)
}

func (s *Server) readDecisionLog(ctx context.Context, programID int64) (decisionLog, error) {
	dl := decisionLog{BadIndex: -1}
	var err error
	if dl.Log, dl.Decisions, err = rollout.ProgramLog(ctx, s.store, programID, nil, time.Time{}); err != nil {
		return dl, err
	}
	if dl.Log.Checkpoint == nil && len(dl.Decisions) == 0 {
		return dl, nil
	}
	keys, err := s.keyring.KeySet()
	if err != nil {
		return dl, err
	}
	dl.Report, dl.Err = dl.Log.Verify(keys)
	var ce *attest.ChainError
	if errors.As(dl.Err, &ce) {
		dl.BadIndex = ce.Index
	}
	return dl, nil
}

func (s *Server) showDecisions(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	dl, err := s.readDecisionLog(r.Context(), pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	q := r.URL.Query()
	f := web.DecisionFilter{Kind: q.Get("kind"), Stage: q.Get("stage"), Side: q.Get("side")}
	d := web.DecisionLogPage{Total: len(dl.Decisions), Filter: f, Verified: dl.Err == nil && dl.Report != nil}
	if dl.Err != nil {
		d.Problem = dl.Err.Error()
	}
	if dl.Report != nil {
		d.HeadSeq, d.Head, d.KeyIDs = dl.Report.Seq, dl.Report.Head, dl.Report.KeyIDs
		d.Checkpoint = web.DecisionTime(dl.Report.CheckpointTime)
		d.CheckpointKeyID, d.EarlierCheckpoints, d.Warnings = dl.Report.CheckpointKeyID, dl.Report.EarlierCheckpoints, dl.Report.Warnings
	}
	for _, k := range acceptance.DecisionKinds {
		d.Kinds = append(d.Kinds, string(k))
	}
	stages, err := s.store.ListRolloutStages(r.Context(), pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	for _, st := range stages {
		d.Stages = append(d.Stages, st.Name)
	}
	for i, sd := range dl.Decisions {
		rec := sd.Record
		if !slices.Contains(d.Stages, rec.Stage) && rec.Stage != "" {
			d.Stages = append(d.Stages, rec.Stage)
		}
		side, _, _ := strings.Cut(rec.Organisation, ":")
		if (f.Kind != "" && rec.Kind != f.Kind) || (f.Stage != "" && rec.Stage != f.Stage) || (f.Side != "" && side != f.Side) {
			continue
		}
		dv := web.DecisionView{Seq: rec.Seq, Kind: rec.Kind, Stage: rec.Stage, Actor: actorLabel(rec.Actor, map[string]string{rec.Actor: sd.ActorName}),
			Organisation: rec.Organisation, Side: side, Reason: rec.Reason, At: rec.Time, RunIDs: rec.Evidence.RunIDs, Hash: sd.Hash, PrevHash: rec.PrevHash,
			Bad: i == dl.BadIndex}
		for _, k := range sortedMapKeys(rec.Evidence.Verdicts) {
			dv.Verdicts = append(dv.Verdicts, web.EvidenceItem{Key: evidenceLabel(k), Value: rec.Evidence.Verdicts[k], Href: evidenceHref(pr.ID, k)})
		}
		for _, k := range sortedMapKeys(rec.Evidence.Figures) {
			dv.Figures = append(dv.Figures, web.EvidenceItem{Key: figureLabel.Replace(k), Value: rec.Evidence.Figures[k]})
		}
		for _, k := range sortedMapKeys(rec.Evidence.Digests) {
			dv.Digests = append(dv.Digests, web.EvidenceItem{Key: k, Value: rec.Evidence.Digests[k]})
		}
		d.Decisions = append(d.Decisions, dv)
	}
	p := s.page(r, "Decisions · "+pr.Name, "programs", web.Crumb{Label: "Programs", Href: "/programs"}, web.Crumb{Label: pr.Name, Href: web.ProgramLink(pr.ID, "")}, web.Crumb{Label: "Decisions"})
	s.render(w, r, http.StatusOK, web.DecisionsPage(p, pr.ProgramAccess, d))
}

// evidenceLabel names an evidence verdict's key: "42" is run 42,
// "42/ttft-p99" its criterion.
func evidenceLabel(k string) string {
	run, rest, _ := strings.Cut(k, "/")
	if _, err := strconv.ParseInt(run, 10, 64); err == nil {
		if rest != "" {
			return "run " + run + " " + rest
		}
		return "run " + run
	}
	return k
}

// evidenceHref opens the run an evidence verdict's key names ("42",
// "42/ttft-p99"); "" for any other key. The run page checks that the run
// is of the program, as for every link.
func evidenceHref(programID int64, k string) string {
	run, _, _ := strings.Cut(k, "/")
	id, err := strconv.ParseInt(run, 10, 64)
	if err != nil || id <= 0 {
		return ""
	}
	return web.ProgramLink(programID, fmt.Sprintf("/runs/%d", id))
}

// figureLabel reads "watch/7/breach_to_halt" as "watch 7 breach to halt".
var figureLabel = strings.NewReplacer("/", " ", "_", " ")

func sortedMapKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// exportDecisions downloads the whole log as `accord verify` reads it, its
// earlier checkpoints too. An empty log carries a checkpoint signed now over
// the empty chain.
func (s *Server) exportDecisions(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	signer, err := s.keyring.Active()
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	log, _, err := rollout.ProgramLog(r.Context(), s.store, pr.ID, signer, time.Now())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	body, err := log.Marshal()
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="accord-decisions-program-%d.json"`, pr.ID))
	_, _ = w.Write(body)
}

// showLogHead publishes the program's signed log head (seq, head hash,
// time): a verifier online compares an export with it (`accord verify
// FILE --head head.json`) to tell whether the export is behind.
func (s *Server) showLogHead(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	head, err := rollout.LogHead(r.Context(), s.store, s.keyring, pr.ID, time.Now())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, head)
}
