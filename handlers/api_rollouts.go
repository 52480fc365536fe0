package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/web"
)

// apiRollout is a program's rollout as the API shows it.
type apiRollout struct {
	Status string `json:"status"`
	// Broken says the decision log does not replay on the plan.
	Broken       string           `json:"broken,omitempty"`
	CurrentStage string           `json:"current_stage,omitempty"`
	Stages       []apiStage       `json:"stages"`
	Rollback     *apiRuleDecision `json:"rollback,omitempty"`
	Decisions    int              `json:"decisions"`
}

type apiStage struct {
	Position    int               `json:"position"`
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	State       string            `json:"state"`
	Attempt     int               `json:"attempt"`
	Current     bool              `json:"current"`
	Gates       apiGates          `json:"gates"`
	Approvals   []apiSignoff      `json:"approvals"`
	Resumes     []apiSignoff      `json:"resumes"`
	Awaiting    []string          `json:"awaiting"`
	Waived      bool              `json:"waived"`
	Halt        *apiRuleDecision  `json:"halt,omitempty"`
	Rejection   *apiRuleDecision  `json:"rejection,omitempty"`
	Watch       *apiWatch         `json:"watch,omitempty"`
	Links       map[string]string `json:"-"`
}

type apiGates struct {
	GateSet          string            `json:"gate_set"`
	GateSetVersionID int64             `json:"gate_set_version_id"`
	Pass             bool              `json:"pass"`
	Profiles         []apiGateEvidence `json:"profiles"`
}

type apiGateEvidence struct {
	ProfileID int64  `json:"profile_id"`
	Profile   string `json:"profile"`
	RunID     int64  `json:"run_id,omitempty"`
	Verdict   string `json:"verdict,omitempty"`
	Pinned    bool   `json:"pinned"`
	Problem   string `json:"problem,omitempty"`
}

type apiSignoff struct {
	Kind   string    `json:"kind"`
	Actor  string    `json:"actor"`
	Side   string    `json:"side"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

type apiRuleDecision struct {
	Kind   string    `json:"kind"`
	Actor  string    `json:"actor"`
	Side   string    `json:"side"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

type apiWatch struct {
	Name        string     `json:"name"`
	Query       string     `json:"query"`
	Rule        string     `json:"rule"`
	Consecutive int        `json:"consecutive"`
	Interval    int        `json:"interval_seconds"`
	Breaches    int        `json:"breaches"`
	Active      bool       `json:"active"`
	LastValue   string     `json:"last_value,omitempty"`
	LastChecked *time.Time `json:"last_checked_at,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
}

func toAPIRuleDecision(d *web.DecisionView) *apiRuleDecision {
	if d == nil {
		return nil
	}
	return &apiRuleDecision{Kind: d.Kind, Actor: d.Actor, Side: d.Side, Reason: d.Reason, At: d.At}
}

func toAPISignoffs(list []web.SignoffView) []apiSignoff {
	out := make([]apiSignoff, 0, len(list))
	for _, s := range list {
		out = append(out, apiSignoff{Kind: s.Kind, Actor: s.Actor, Side: s.Side, Reason: s.Reason, At: s.At})
	}
	return out
}

func toAPIRollout(b web.RolloutBoard) apiRollout {
	out := apiRollout{Status: b.Status, Broken: b.Broken, Rollback: toAPIRuleDecision(b.Rollback), Decisions: b.Decisions, Stages: []apiStage{}}
	for _, st := range b.Stages {
		as := apiStage{Position: st.Position, Name: st.Name, Description: st.Description, State: st.State, Attempt: st.Attempt, Current: st.Current,
			Approvals: toAPISignoffs(st.Approvals), Resumes: toAPISignoffs(st.Resumes), Awaiting: append([]string{}, st.Missing...), Waived: st.Waived(),
			Halt: toAPIRuleDecision(st.Halt), Rejection: toAPIRuleDecision(st.Rejection),
			Gates: apiGates{GateSet: st.Gates.GateSet, GateSetVersionID: st.Gates.GateSetVersionID, Pass: st.Gates.Pass, Profiles: []apiGateEvidence{}}}
		for _, p := range st.Gates.Profiles {
			as.Gates.Profiles = append(as.Gates.Profiles, apiGateEvidence{ProfileID: p.ProfileID, Profile: p.Profile, RunID: p.RunID, Verdict: p.Verdict, Pinned: p.Pinned, Problem: p.Problem})
		}
		if w := st.Watch; w != nil {
			as.Watch = &apiWatch{Name: w.Name, Query: w.Query, Rule: w.Rule, Consecutive: w.Consecutive, Interval: w.Interval, Breaches: w.Breaches,
				Active: w.Active, LastValue: w.LastValue, LastChecked: w.LastChecked, LastError: w.LastError}
		}
		if st.Current {
			out.CurrentStage = st.Name
		}
		out.Stages = append(out.Stages, as)
	}
	return out
}

func (s *Server) apiShowRollout(w http.ResponseWriter, r *http.Request) {
	board, _, err := s.rolloutBoard(r.Context(), programFrom(r.Context()), viewerFrom(r.Context()))
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIRollout(board))
}

// DecisionRequest is a decision asked through the API.
type DecisionRequest struct {
	Kind   string `json:"kind"`
	Stage  string `json:"stage,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// apiDecision is a record of the log as the API shows it.
type apiDecision struct {
	Record attest.Decision `json:"record"`
	Hash   string          `json:"hash"`
}

// apiCreateDecision records a decision (DecisionRequest): 201 with the
// record and the rollout; 422 with the rules' refusal.
func (s *Server) apiCreateDecision(w http.ResponseWriter, r *http.Request) {
	var req DecisionRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, apiError{Error: "the body must be a JSON decision request: " + err.Error(), RequestID: requestID(r.Context())})
		return
	}
	if !slices.Contains(acceptance.DecisionKinds, acceptance.DecisionKind(req.Kind)) {
		writeJSON(w, http.StatusUnprocessableEntity, apiError{Error: "unknown decision kind", RequestID: requestID(r.Context()),
			Fields: map[string]string{"kind": "one of approve, waive, reject, halt, stop-loss-triggered, resume, rollback-requested"}})
		return
	}
	if c := decisionNeeds(acceptance.DecisionKind(req.Kind)); !programFrom(r.Context()).can(c) || !apiScopeAllows(r, c) {
		who := "any member of the program"
		if c == capApprove {
			who = "an approver or owner"
		}
		writeJSON(w, http.StatusForbidden, apiError{Error: fmt.Sprintf("a %s decision is for %s, with a token that carries the approve scope", req.Kind, who),
			RequestID: requestID(r.Context())})
		return
	}
	out, err := s.recordDecision(r, acceptance.DecisionKind(req.Kind), req.Stage, req.Reason)
	var refused *acceptance.TransitionError
	if errors.As(err, &refused) {
		writeJSON(w, http.StatusUnprocessableEntity, apiError{Error: refused.Error(), RequestID: requestID(r.Context())})
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	board, _, err := s.rolloutBoard(r.Context(), programFrom(r.Context()), viewerFrom(r.Context()))
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"decision": apiDecision{Record: out.Record.Record, Hash: out.Record.Hash}, "events": append([]string{}, out.Events...), "rollout": toAPIRollout(board),
	})
}

// apiListDecisions returns the log with its verification.
func (s *Server) apiListDecisions(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	dl, err := s.readDecisionLog(r.Context(), pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	out := map[string]any{"chain": dl.Log.Chain, "verified": dl.Err == nil, "decisions": []apiDecision{}}
	if dl.Err != nil {
		out["problem"] = dl.Err.Error()
	}
	if dl.Report != nil {
		out["head_seq"], out["head"] = dl.Report.Seq, dl.Report.Head
	}
	list := make([]apiDecision, 0, len(dl.Decisions))
	for _, d := range dl.Decisions {
		list = append(list, apiDecision{Record: d.Record, Hash: d.Hash})
	}
	out["decisions"] = list
	writeJSON(w, http.StatusOK, out)
}
