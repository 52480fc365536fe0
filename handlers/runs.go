package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/riverqueue/river/rivertype"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/acceptance/stats"
	"github.com/accordlab/accord/apiclient"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/service/runplan"
	"github.com/accordlab/accord/service/runsubmit"
	"github.com/accordlab/accord/service/stoploss"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

func (s *Server) runCrumbs(pr *programCtx, last string) []web.Crumb {
	c := []web.Crumb{{Label: "Programs", Href: "/programs"}, {Label: pr.Name, Href: web.ProgramLink(pr.ID, "")}, {Label: "Runs", Href: web.ProgramLink(pr.ID, "/runs")}}
	if last != "" {
		c = append(c, web.Crumb{Label: last})
	}
	return c
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	runs, err := s.store.ListRuns(r.Context(), pr.ID, store.RunFilter{State: r.URL.Query().Get("state")})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, "Runs · "+pr.Name, "programs", s.runCrumbs(pr, "")...)
	s.render(w, r, http.StatusOK, web.RunListPage(p, pr.ProgramAccess, runs, pr.can(capEngineer)))
}

// runChoices fills the new-run form's lists: every version of every
// profile and gate set (newest first), pinned hosts, finished runs.
func (s *Server) runChoices(r *http.Request, f *web.RunForm) error {
	pr := programFrom(r.Context())
	ctx := r.Context()
	for _, kind := range []store.SpecKind{store.KindProfile, store.KindGateSet} {
		specs, err := s.store.ListSpecs(ctx, kind, pr.ID)
		if err != nil {
			return err
		}
		for _, sp := range specs {
			versions, err := s.store.ListSpecVersions(ctx, kind, pr.ID, sp.ID)
			if err != nil {
				return err
			}
			for _, v := range versions {
				c := web.RunChoice{ID: v.ID, Label: fmt.Sprintf("%s v%d", sp.Name, v.Version)}
				if kind == store.KindProfile {
					f.Profiles = append(f.Profiles, c)
				} else {
					f.GateSets = append(f.GateSets, c)
				}
			}
		}
	}
	hosts, err := s.store.ListHosts(ctx, pr.ID)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if h.Pinned() {
			f.Hosts = append(f.Hosts, web.RunChoice{ID: h.ID, Label: h.Name})
		}
	}
	runs, err := s.store.ListRuns(ctx, pr.ID, store.RunFilter{Limit: 200})
	if err != nil {
		return err
	}
	for _, run := range runs {
		if run.State == store.RunDone {
			f.Baselines = append(f.Baselines, web.RunChoice{ID: run.ID, Label: fmt.Sprintf("%s on %s (%s)", run.DisplayLabel(), run.HostName, run.Verdict)})
		}
	}
	return nil
}

func (s *Server) showNewRun(w http.ResponseWriter, r *http.Request) {
	f := runFormFrom(r.URL.Query())
	if err := s.proposeRun(r, &f); err != nil {
		s.serverError(w, r, err)
		return
	}
	s.renderNewRun(w, r, http.StatusOK, f)
}

// runFormFrom reads the run form's choices from a query or a posted form.
func runFormFrom(v url.Values) web.RunForm {
	f := web.RunForm{Label: v.Get("label"), Confirmed: v.Get("confirm_readiness") == "1", ConfirmWarnings: v.Get("confirm_warnings") == "1"}
	f.Profile, _ = strconv.ParseInt(v.Get("profile_version"), 10, 64)
	f.Host, _ = strconv.ParseInt(v.Get("host"), 10, 64)
	f.GateSet, _ = strconv.ParseInt(v.Get("gate_set_version"), 10, 64)
	f.Baseline, _ = strconv.ParseInt(v.Get("baseline"), 10, 64)
	f.RoleHosts = formRoles(v)
	if f.RoleHosts != nil {
		f.Host = 0 // the roles' hosts stand for it
	}
	return f
}

// formRoles reads the hosts chosen for each role (fields role.NAME).
func formRoles(v url.Values) map[string][]int64 {
	out := map[string][]int64{}
	for key, values := range v {
		role, ok := strings.CutPrefix(key, "role.")
		if !ok || role == "" {
			continue
		}
		for _, s := range values {
			if id, err := strconv.ParseInt(s, 10, 64); err == nil {
				out[role] = append(out[role], id)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// roleChoices fills the form's roles when its profile version runs
// across hosts, with the hosts chosen for each.
func (s *Server) roleChoices(r *http.Request, f *web.RunForm) error {
	if f.Profile == 0 {
		return nil
	}
	pv, err := s.store.GetSpecVersionByID(r.Context(), store.KindProfile, programFrom(r.Context()).ID, f.Profile)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var profile acceptance.ProfileSpec
	if err := json.Unmarshal(pv.Spec, &profile); err != nil {
		return fmt.Errorf("new run: decode profile version %d: %w", pv.ID, err)
	}
	for _, role := range profile.Roles {
		f.Roles = append(f.Roles, web.RoleChoice{Name: role.Name, Description: role.Description, Steps: role.Steps, Limits: role.LimitsText(), Selected: f.RoleHosts[role.Name]})
	}
	return nil
}

// proposeRun fills what the form was not given with runplan's proposal:
// the program's most recent profile, its gate set, the last passing run on
// its baseline path; and the host, when the program has one pinned host.
func (s *Server) proposeRun(r *http.Request, f *web.RunForm) error {
	pr := programFrom(r.Context())
	d, err := runplan.Propose(r.Context(), s.store, pr.ID, f.Profile)
	if err != nil {
		return err
	}
	f.Proposed = map[string]string{}
	if f.Profile == 0 && d.ProfileVersionID != 0 {
		f.Profile, f.Proposed["profile_version"] = d.ProfileVersionID, "Proposed: "+d.ProfileWhy+"."
	}
	if f.GateSet == 0 && d.GateSetVersionID != 0 {
		f.GateSet, f.Proposed["gate_set_version"] = d.GateSetVersionID, "Proposed: "+d.GateSetWhy+"."
	}
	if f.Baseline == 0 && d.BaselineRunID != 0 {
		f.Baseline, f.Proposed["baseline"] = d.BaselineRunID, "Proposed: "+d.BaselineWhy+"."
	}
	return nil
}

// runWarnings is the pre-run check of a request (runplan.Check).
func (s *Server) runWarnings(r *http.Request, req RunRequest) ([]acceptance.RunWarning, error) {
	return runplan.Check(r.Context(), s.store, runplan.Request{ProgramID: programFrom(r.Context()).ID, ProfileVersionID: req.ProfileVersionID,
		GateSetVersionID: req.GateSetVersionID, BaselineRunID: req.BaselineRunID, HostID: req.HostID, Roles: req.Roles})
}

// showRunPrecheck answers the run form as its choices change (htmx): what
// the pre-run check says of them.
func (s *Server) showRunPrecheck(w http.ResponseWriter, r *http.Request) {
	f := runFormFrom(r.URL.Query())
	var err error
	if f.Warnings, err = s.runWarnings(r, RunRequest{RunRequest: f.Request()}); err != nil {
		s.serverError(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, web.RunPrecheck(f))
}

func (s *Server) renderNewRun(w http.ResponseWriter, r *http.Request, status int, f web.RunForm) {
	pr := programFrom(r.Context())
	if err := s.runChoices(r, &f); err != nil {
		s.serverError(w, r, err)
		return
	}
	if err := s.roleChoices(r, &f); err != nil {
		s.serverError(w, r, err)
		return
	}
	if f.Warnings == nil {
		var err error
		if f.Warnings, err = s.runWarnings(r, RunRequest{RunRequest: f.Request()}); err != nil {
			s.serverError(w, r, err)
			return
		}
	}
	p := s.page(r, "Start a run", "programs", s.runCrumbs(pr, "Start")...)
	s.render(w, r, status, web.RunNewPage(p, pr.ProgramAccess, f))
}

// RunRequest is a run submission, from the form or the API (whose JSON
// document is apiclient.RunRequest).
type RunRequest struct {
	apiclient.RunRequest
	// IdempotencyKey comes from the API's Idempotency-Key header.
	IdempotencyKey string `json:"-"`
	// Warnings is what the pre-run check said, kept with the run.
	Warnings []acceptance.RunWarning `json:"-"`
}

// digest identifies the request's fields (not its key), to tell a request
// sent again from another one under the same key.
func (r RunRequest) digest() string {
	b, _ := json.Marshal(r)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// submitRun starts the run a request asks for (runsubmit.Submit): the
// run and its River job in one transaction. Field errors come back keyed
// by form field; readiness lists failed blocking checks awaiting
// confirmation.
func (s *Server) submitRun(r *http.Request, req RunRequest) (int64, map[string]string, []string, error) {
	v := viewerFrom(r.Context())
	env := runsubmit.Env{Queue: jobs.NewQueue(s.river), Readiness: s.blockingReadinessFailures}
	res, err := runsubmit.Submit(r.Context(), s.store, env, runsubmit.Request{
		ProgramID: programFrom(r.Context()).ID, ProfileVersionID: req.ProfileVersionID, GateSetVersionID: req.GateSetVersionID,
		BaselineRunID: req.BaselineRunID, HostID: req.HostID, Roles: req.Roles, Label: req.Label, ConfirmReadiness: req.ConfirmReadiness,
		Warnings: req.Warnings, IdempotencyKey: req.IdempotencyKey, RequestDigest: req.digest(),
		By: runsubmit.Actor{UserID: v.ID, Email: v.Email, ClientAddr: clientAddr(r)},
	})
	return res.RunID, res.Errors, res.Readiness, err
}

func (s *Server) createRun(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	form := runFormFrom(r.PostForm)
	req := RunRequest{RunRequest: form.Request()}
	warnings, err := s.runWarnings(r, req)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	// The form says what the pre-run check found before anything starts;
	// starting anyway is a choice the engineer makes on it.
	if len(warnings) > 0 && !form.ConfirmWarnings {
		form.Warnings, form.NeedsConfirm = warnings, true
		s.renderNewRun(w, r, http.StatusUnprocessableEntity, form)
		return
	}
	req.Warnings = warnings
	runID, errs, failing, err := s.submitRun(r, req)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if len(errs) > 0 || len(failing) > 0 {
		form.Errors, form.Readiness, form.Warnings = errs, failing, warnings
		s.renderNewRun(w, r, http.StatusUnprocessableEntity, form)
		return
	}
	redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/runs/%d", runID)))
}

// loadRun loads {runID} within the program.
func (s *Server) loadRun(w http.ResponseWriter, r *http.Request) (store.Run, bool) {
	pr := programFrom(r.Context())
	id, ok := idParam(r, "runID")
	if !ok {
		s.renderError(w, r, http.StatusNotFound)
		return store.Run{}, false
	}
	run, err := s.store.GetRun(r.Context(), pr.ID, id)
	if err != nil {
		s.notFoundOr(w, r, err)
		return run, false
	}
	return run, true
}

func (s *Server) showRun(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	d, err := s.runPageData(r, run)
	if err != nil {
		s.notFoundOr(w, r, err) // ?host= naming no host of the run
		return
	}
	d.CanRun = pr.can(capEngineer)
	p := s.page(r, fmt.Sprintf("Run #%d · %s", run.ID, pr.Name), "programs", s.runCrumbs(pr, fmt.Sprintf("#%d", run.ID))...)
	s.render(w, r, http.StatusOK, web.RunPage(p, pr.ProgramAccess, d))
}

func (s *Server) runPageData(r *http.Request, run store.Run) (web.RunPageData, error) {
	ctx := r.Context()
	run.Reason = runReason(run)
	d := web.RunPageData{Run: run, Live: !runSettled(run) || awaitingReport(run)}
	var err error
	if d.Transitions, err = s.store.RunTransitions(ctx, run.ID); err != nil {
		return d, err
	}
	// The page shows the run up to its newest event; its stream sends the
	// ones after.
	if d.LiveAfter, err = s.store.RunLastEventID(ctx, run.ID); err != nil {
		return d, err
	}
	if d.Log, err = s.store.RunLogTail(ctx, run.ID, 200); err != nil {
		return d, err
	}
	d.Log = slices.DeleteFunc(d.Log, func(e store.RunEvent) bool { return e.ID > d.LiveAfter })
	// The probe's interim windows: charted live while the run runs, and
	// kept on its page after (where a stop-loss line was crossed, say).
	ln, err := s.loadLiveNumbers(ctx, run, d.LiveAfter)
	if err != nil {
		return d, err
	}
	if d.LiveNumbers, err = ln.view(); err != nil {
		return d, err
	}
	pv := progressView(run)
	d.Progress = web.RunProgress{Fraction: pv.Fraction, Label: pv.Label}
	var hosts []store.RunHost
	if run.MultiHost() {
		if hosts, err = s.store.RunHosts(ctx, run.ID); err != nil {
			return d, err
		}
		d.Hosts = hostViews(hosts)
	}
	if ev, err := s.store.RunLatestEvaluation(ctx, run.ID); err == nil {
		var e acceptance.Evaluation
		if err := json.Unmarshal(ev.Result, &e); err != nil {
			return d, fmt.Errorf("decode evaluation of run %d: %w", run.ID, err)
		}
		d.Evaluation = &e
	} else if !errors.Is(err, store.ErrNotFound) {
		return d, err
	}
	rows, err := s.store.RunMeasurementSummaries(ctx, run.ID)
	if err != nil {
		return d, err
	}
	d.Metrics, d.Telemetry = web.SplitTelemetry(web.MetricRowsFrom(rows))
	if d.Pooled, err = s.pooledRows(ctx, run, d.Metrics); err != nil {
		return d, err
	}
	d.Pooled, d.Metrics = web.FoldAlike(d.Pooled, d.Metrics)
	d.ClientFlags = web.ClientFlagsFrom(rows)
	if d.Artifacts, err = s.store.RunArtifacts(ctx, run.ID); err != nil {
		return d, err
	}
	if d.ImportReports, err = s.importReports(ctx, run, d.Artifacts); err != nil {
		return d, err
	}
	d.StopLoss = s.stopLossNote(ctx, run.ID)
	if run.Contaminated {
		neighbours, err := s.store.RunNeighbours(ctx, run.ID)
		if err != nil {
			return d, err
		}
		for _, n := range neighbours {
			d.Contamination = append(d.Contamination, n.Describe())
		}
	}
	if d.Charts, err = s.runCharts(r, run); err != nil {
		return d, err
	}
	if len(hosts) > 0 {
		if err := s.runHostResults(r, run, hosts, &d); err != nil {
			return d, err
		}
	}
	d.HasReport = s.hasReport(ctx, run)
	return d, nil
}

// stopLossUnreadable is what the run page says of a stop-loss record it
// cannot read: a run stopped by its stop-loss must not look like one that
// was never stopped.
const stopLossUnreadable = "This run has a stop-loss record that could not be read; the server's log has the details."

// stopLossNote is the run page's stop-loss explanation: empty when the
// run crossed no stop-loss line.
func (s *Server) stopLossNote(ctx context.Context, runID int64) string {
	breach, err := stoploss.Recorded(ctx, s.store, runID)
	switch {
	case err != nil:
		s.log.Warn("run page: reading the stop-loss record", "run_id", runID, "err", err)
		return stopLossUnreadable
	case breach == nil:
		return ""
	}
	return breach.Explanation
}

// pooledRows are the run's metrics over every repetition, from its chart
// data's summary (computed at ingest), each followed by its baseline's;
// none when the run has no chart data.
func (s *Server) pooledRows(ctx context.Context, run store.Run, metrics []web.MetricRow) ([]web.PooledRow, error) {
	if len(metrics) == 0 {
		return nil, nil
	}
	a, ok, err := s.loadAggregates(ctx, run.ID, "meta", "summary")
	if err != nil || !ok {
		return nil, err
	}
	var base *chartdata.Aggregates
	baseName := ""
	if run.BaselineRunID != nil {
		baseName = "baseline " + runName(*run.BaselineRunID)
		b, ok, err := s.loadAggregates(ctx, *run.BaselineRunID, "meta", "summary")
		if err != nil {
			return nil, err
		}
		if ok {
			base = &b
		}
	}
	return web.PooledRows(metrics, a, base, baseName), nil
}

// cancelRun asks for a run to stop. A run not started yet is cancelled at
// once; a running one is stopped by its worker (River delivers the cancel
// to the job's context) or, if no worker runs it now, by a stop_run job.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	if store.RunFinal(run.State) {
		s.setFlash(w, "info", "The run has ended already.")
		redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/runs/%d", run.ID)))
		return
	}
	if err := s.requestCancel(r, run); err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "info", "Cancelling: the probe is being stopped on the host.")
	redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/runs/%d", run.ID)))
}

// requestCancel records a user's cancel and makes it reach the host.
func (s *Server) requestCancel(r *http.Request, run store.Run) error {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	var jobState rivertype.JobState
	if run.RiverJobID != nil {
		if job, err := s.river.JobGet(ctx, *run.RiverJobID); err == nil {
			jobState = job.State
		}
	}
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		// The run as it is now, locked: a worker that took it since the
		// page was read may be about to launch its probe (its launch
		// intent waits for this transaction, then finds the run final).
		run, err := tx.LockRun(ctx, run.ID)
		if err != nil {
			return err
		}
		if store.RunFinal(run.State) {
			return nil
		}
		if err := tx.RequestCancel(ctx, run.ID, v.Email); err != nil {
			return err
		}
		if run.RiverJobID != nil {
			if _, err := s.river.JobCancelTx(ctx, tx.Tx(), *run.RiverJobID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
				return err
			}
		}
		if run.LaunchIntentAt == nil && (run.State == store.RunQueued || run.State == store.RunWaitingForHost) {
			if err := tx.SetRunState(ctx, run.ID, store.RunCancelled, "cancelled by "+v.Email+" before it started"); err != nil {
				return err
			}
		} else {
			// Said until the stop says what it does.
			reason := "cancel asked for by " + v.Email
			if run.ProbeMayRun {
				reason += ": stopping the probe on the host"
			}
			if err := tx.SetRunState(ctx, run.ID, run.State, reason); err != nil {
				return err
			}
			if jobState != rivertype.JobStateRunning {
				// No worker holds the run right now: a stop job reaches the host.
				if _, err := s.river.InsertTx(ctx, tx.Tx(), jobs.StopRunArgs{RunID: run.ID}, nil); err != nil {
					return err
				}
			}
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "run_cancel_requested", ProgramID: &pr.ID,
			Target: fmt.Sprintf("run %d", run.ID), ClientAddr: clientAddr(r)})
	})
	return err
}

// downloadArtifact serves one raw file of a run, as stored.
func (s *Server) downloadArtifact(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	name := chi.URLParam(r, "*")
	a, err := s.store.RunArtifactByPath(r.Context(), run.ID, name)
	if err != nil {
		s.notFoundOr(w, r, err)
		return
	}
	body, err := s.store.Artifacts().Open(r.Context(), a.SHA256)
	if err != nil {
		s.notFoundOr(w, r, err)
		return
	}
	defer body.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".txt") ||
		strings.HasSuffix(name, ".log") || strings.HasSuffix(name, ".job") || strings.HasSuffix(name, ".sha256") {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf(`inline; filename="%s"`, fileSafe(path.Base(name))))
	serveBlob(w, r, a.SHA256, body)
}

// serveBlob streams a stored blob, whole or the ranges asked for (Range,
// If-Range and If-None-Match against its digest as the ETag); the caller
// has set Content-Type and Content-Disposition.
func serveBlob(w http.ResponseWriter, r *http.Request, digest string, body store.BlobReader) {
	w.Header().Set("X-Content-SHA256", digest)
	w.Header().Set("ETag", `"sha256:`+digest+`"`)
	http.ServeContent(w, r, "", time.Time{}, body)
}

// downloadMetricsCSV writes every measurement's exact values.
func (s *Server) downloadMetricsCSV(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	ms, err := s.store.RunMeasurements(r.Context(), run.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="run-%d-metrics.csv"`, run.ID))
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"metric", "unit", "step", "level", "repetition", "value", "count", "source_tool", "source_field"})
	for _, m := range ms {
		unit := ""
		if meta, ok := acceptance.LookupMetric(m.Metric); ok {
			unit = string(meta.Unit)
		}
		for i, v := range m.Values {
			count := "1"
			if m.Counts != nil {
				count = strconv.FormatInt(m.Counts[i], 10)
			}
			_ = cw.Write([]string{m.Metric, unit, m.Step, m.Level, strconv.Itoa(m.Repetition), strconv.FormatFloat(v, 'g', -1, 64), count, m.Source.Tool, m.Source.Field})
		}
		// Samples kept in segments (more than a million) come a segment at
		// a time, grouped by log bucket rather than in request order.
		for _, seg := range m.Segments {
			got, err := seg.Reader.ReadRanges([]stats.SegmentRange{{Segment: seg.Index, Count: seg.N}})
			if err != nil {
				// The header is sent: the CSV ends short, and the log says why.
				s.log.Error("metrics CSV: read samples", "request_id", requestID(r.Context()), "run", run.ID, "metric", m.Metric, "err", err)
				cw.Flush()
				return
			}
			for _, v := range got[0] {
				_ = cw.Write([]string{m.Metric, unit, m.Step, m.Level, strconv.Itoa(m.Repetition), strconv.FormatFloat(v, 'g', -1, 64), "1", m.Source.Tool, m.Source.Field})
			}
		}
	}
	cw.Flush()
}

// maxImportReportBytes bounds an import report read back for the run page.
const maxImportReportBytes = 4 << 20

// importReports reads an imported run's import reports for the run page:
// the list a bundle import keeps (bundleImportReportArtifact), or a result
// file's one report (ImportReportArtifact); none for other runs.
func (s *Server) importReports(ctx context.Context, run store.Run, arts []store.RunArtifact) ([]parse.Report, error) {
	if run.Kind != "imported" {
		return nil, nil
	}
	read := func(a store.RunArtifact, v any) error {
		f, err := s.store.Artifacts().Open(ctx, a.SHA256)
		if err != nil {
			return fmt.Errorf("open the import report of run %d: %w", run.ID, err)
		}
		defer f.Close()
		if err := json.NewDecoder(io.LimitReader(f, maxImportReportBytes)).Decode(v); err != nil {
			return fmt.Errorf("decode the import report of run %d: %w", run.ID, err)
		}
		return nil
	}
	var single *store.RunArtifact
	for _, a := range arts {
		if a.Size > maxImportReportBytes {
			continue // a larger one is shown as an artifact only
		}
		switch a.Path {
		case bundleImportReportArtifact(strconv.FormatInt(run.ID, 10)):
			var reps []parse.Report
			return reps, read(a, &reps)
		case ImportReportArtifact:
			single = &a
		}
	}
	if single == nil {
		return nil, nil
	}
	var rep parse.Report
	if err := read(*single, &rep); err != nil {
		return nil, err
	}
	return []parse.Report{rep}, nil
}
