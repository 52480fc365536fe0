package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/apiclient"
	"github.com/accordlab/accord/store"
)

func (s *Server) apiListHosts(w http.ResponseWriter, r *http.Request) {
	hosts, err := s.store.ListHosts(r.Context(), programFrom(r.Context()).ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	out := make([]apiclient.Host, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, apiclient.Host{ID: h.ID, Name: h.Name, Address: h.Address, Port: h.Port, Pinned: h.Pinned(), Emulated: h.Emulated, Labels: h.Labels})
	}
	writeJSON(w, http.StatusOK, map[string]any{"hosts": out})
}

func (s *Server) toAPIRun(run store.Run) apiclient.Run {
	p := progressView(run)
	out := apiclient.Run{ID: run.ID, State: run.State, Final: store.RunFinal(run.State), Settled: runSettled(run), Reason: runReason(run), Verdict: run.Verdict,
		Label: run.Label, Kind: run.Kind, Emulated: run.Emulated, ProfileVersionID: run.ProfileVersionID, GateSetVersionID: run.GateSetVersionID,
		HostID: run.HostID, Host: run.HostName, BaselineRunID: run.BaselineRunID, Progress: p.Fraction, ProgressText: p.Label,
		CreatedAt: run.CreatedAt, StartedAt: run.StartedAt, FinishedAt: run.FinishedAt, HasReport: run.HasReport, Contaminated: run.Contaminated}
	if run.ProfileName != "" {
		out.Profile = fmt.Sprintf("%s v%d", run.ProfileName, run.ProfileVersion)
	}
	if len(run.Warnings) > 0 {
		// Written by this server from []acceptance.RunWarning, which has the same fields.
		_ = json.Unmarshal(run.Warnings, &out.Warnings)
	}
	if run.GateSetName != "" {
		out.GateSet = fmt.Sprintf("%s v%d", run.GateSetName, run.GateSetVersion)
	}
	if s.baseURL != nil {
		out.URL = s.baseURL.JoinPath(fmt.Sprintf("/programs/%d/runs/%d", run.ProgramID, run.ID)).String()
	}
	return out
}

func (s *Server) apiListRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := s.store.ListRuns(r.Context(), programFrom(r.Context()).ID, store.RunFilter{State: r.URL.Query().Get("state")})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	out := make([]apiclient.Run, 0, len(runs))
	for _, run := range runs {
		out = append(out, s.toAPIRun(run))
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out})
}

// apiCreateRun submits a run (RunRequest as JSON): 201 with the run; 422
// with fields, including confirm_readiness when the host fails blocking
// readiness checks and the request did not confirm.
func (s *Server) apiCreateRun(w http.ResponseWriter, r *http.Request) {
	var req RunRequest
	var err error
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err = dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, apiError{Error: "the body must be a JSON run request: " + err.Error(), RequestID: requestID(r.Context())})
		return
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if msg := checkIdempotencyKey(key); msg != "" {
			writeJSON(w, http.StatusUnprocessableEntity, apiError{Error: msg, RequestID: requestID(r.Context())})
			return
		}
		req.IdempotencyKey = key
		if s.answerRepeatedRequest(w, r, req) {
			return
		}
	}
	// The pre-run check's warnings do not stop a pipeline's run: they are
	// kept with it and in the answer.
	if req.Warnings, err = s.runWarnings(r, req); err != nil {
		s.serverError(w, r, err)
		return
	}
	runID, errs, failing, err := s.submitRun(r, req)
	if errors.Is(err, store.ErrConflict) && req.IdempotencyKey != "" && s.answerRepeatedRequest(w, r, req) {
		return // the same request, sent twice at once: the other one started the run
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if len(failing) > 0 {
		errs = map[string]string{"confirm_readiness": "the host fails blocking readiness checks: " + joinChecks(failing) + "; send confirm_readiness: true to run anyway (recorded with the run)"}
	}
	if len(errs) > 0 {
		writeJSON(w, http.StatusUnprocessableEntity, apiError{Error: "the run request is not valid", Fields: errs, RequestID: requestID(r.Context())})
		return
	}
	run, err := s.store.GetRun(r.Context(), programFrom(r.Context()).ID, runID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.toAPIRun(run))
}

// checkIdempotencyKey says what is wrong with an Idempotency-Key ("" when
// nothing is): 1 to 200 printable ASCII characters.
func checkIdempotencyKey(key string) string {
	if len(key) > 200 {
		return "the Idempotency-Key header is longer than 200 characters"
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return "the Idempotency-Key header may hold only printable ASCII characters without spaces"
		}
	}
	return ""
}

// answerRepeatedRequest answers a run request whose Idempotency-Key already
// started a run (and reports whether it did): that run again (200) for the
// same request, a refusal for a different one. Nothing new is started.
func (s *Server) answerRepeatedRequest(w http.ResponseWriter, r *http.Request, req RunRequest) bool {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	id, digest, err := s.store.RunByIdempotencyKey(r.Context(), pr.ID, v.ID, req.IdempotencyKey)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		s.serverError(w, r, err)
		return true
	}
	if digest != req.digest() {
		writeJSON(w, http.StatusUnprocessableEntity, apiError{Error: fmt.Sprintf("this Idempotency-Key started run %d with a different request; use a new key for a new run", id),
			RequestID: requestID(r.Context())})
		return true
	}
	run, err := s.store.GetRun(r.Context(), pr.ID, id)
	if err != nil {
		s.serverError(w, r, err)
		return true
	}
	w.Header().Set("Idempotent-Replayed", "true")
	writeJSON(w, http.StatusOK, s.toAPIRun(run))
	return true
}

func joinChecks(checks []string) string {
	out := ""
	for i, c := range checks {
		if i > 0 {
			out += "; "
		}
		out += c
	}
	return out
}

func (s *Server) apiShowRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	out := s.toAPIRun(run)
	if run.Contaminated {
		neighbours, err := s.store.RunNeighbours(r.Context(), run.ID)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		for _, n := range neighbours {
			out.Contamination = append(out.Contamination, n.Describe())
		}
	}
	if run.MultiHost() {
		hosts, err := s.store.RunHosts(r.Context(), run.ID)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		for _, h := range hosts {
			out.Hosts = append(out.Hosts, apiclient.RunHost{Role: h.Role, HostID: h.HostID, Host: h.HostName, State: h.State, Reason: h.Reason,
				Progress: progressFraction(h.Progress)})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// apiShowEvaluation returns the run's latest evaluation: the verdict of
// every criterion with its explanation and numbers.
func (s *Server) apiShowEvaluation(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	ev, err := s.store.RunLatestEvaluation(r.Context(), run.ID)
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, apiError{Error: "this run has no evaluation (yet)", RequestID: requestID(r.Context())})
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	var e acceptance.Evaluation
	if err := json.Unmarshal(ev.Result, &e); err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

type apiMeasurement struct {
	Metric      string             `json:"metric"`
	Unit        string             `json:"unit"`
	Step        string             `json:"step"`
	Level       string             `json:"level,omitempty"`
	Repetition  int                `json:"repetition"`
	Host        string             `json:"host,omitempty"`
	Summary     store.Summary      `json:"summary"`
	ToolSummary map[string]float64 `json:"tool_summary,omitempty"`
	Source      acceptance.Source  `json:"source"`
}

func (s *Server) apiListMeasurements(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	rows, err := s.store.RunMeasurementSummaries(r.Context(), run.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	// A multi-host run's rows are its hosts combined; ?hosts=1 adds each
	// host's own, marked with the host.
	if r.URL.Query().Get("hosts") == "1" {
		own, err := s.store.RunHostMeasurementSummaries(r.Context(), run.ID)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		rows = append(rows, own...)
	}
	out := make([]apiMeasurement, 0, len(rows))
	for _, m := range rows {
		am := apiMeasurement{Metric: m.Metric, Step: m.Step, Level: m.Level, Repetition: m.Repetition, Host: m.Host, Summary: m.Summary, ToolSummary: m.ToolSummary, Source: m.Source}
		if meta, ok := acceptance.LookupMetric(m.Metric); ok {
			am.Unit = string(meta.Unit)
		}
		out = append(out, am)
	}
	writeJSON(w, http.StatusOK, map[string]any{"measurements": out})
}

func (s *Server) apiCancelRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	if !store.RunFinal(run.State) {
		if err := s.requestCancel(r, run); err != nil {
			s.serverError(w, r, err)
			return
		}
		if run, ok = s.loadRun(w, r); !ok {
			return
		}
	}
	writeJSON(w, http.StatusAccepted, s.toAPIRun(run))
}
