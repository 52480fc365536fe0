package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/readiness"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// The integration plan's pages (routes.go): the steps a
// program's joint teams walk, their evidence from the readiness checks and
// runs, and both sides' sign-offs (store/integration.go).

// integrationSequence is the sequence every program's integration plan
// starts with, in the order joint teams walk it, with the readiness checks
// that prove each step by default.
var integrationSequence = []store.IntegrationSeed{
	{Kind: "baseline", Title: "Baseline measurements",
		Description: "Measure the workload on the GPU servers' own local NVMe first: every later result is compared with it. Done only when a finished run of a local-nvme profile exists."},
	{Kind: "network", Title: "Network preparation",
		Description: "Storage interfaces up at full speed with jumbo frames, RDMA ports active, PFC and ECN set for RoCE.",
		CheckIDs:    []string{"network.mtu", "network.link", "network.rdma", "network.roce-lossless"}},
	{Kind: "storage", Title: "Storage provisioning",
		Description: "Namespaces provisioned on the array and connected over the profile's transport: native multipath with a spreading I/O policy, usable ANA paths, enough I/O queues, healthy drives.",
		CheckIDs:    []string{"storage.controllers", "storage.multipath", "storage.ana", "storage.queues", "storage.health", "storage.scheduler"}},
	{Kind: "host", Title: "Host setup",
		Description: hostStepDescription,
		CheckIDs:    []string{"host.kernel", "host.initiator-modules", "host.cpufreq", "host.numa-locality", "host.pcie-links", "tools.fio", "tools.nvme-cli"}},
	{Kind: "gpu-path", Title: "GPU-path validation",
		Description: gpuPathStepDescription,
		CheckIDs:    []string{"gpu.driver", "gpu.gds"}},
	{Kind: "orchestration", Title: "Orchestration",
		Description: "The inference stack deployed the way production runs it (scheduler, CSI driver, model cache), proven by runs through it."},
	{Kind: "qos", Title: "QoS and isolation",
		Description: "QoS limits on the array and isolation of storage traffic from other tenants, proven by runs under contention and by a path failover."},
}

// The host and GPU-path steps' descriptions (migration 0065 brings plans
// seeded with the earlier, NVIDIA-only wording up to these).
const (
	hostStepDescription    = "Kernel, NVMe initiator modules, CPU frequency governor, NUMA placement of NIC, NVMe and GPU, PCIe links at their full speed and width, and the tools the runs need."
	gpuPathStepDescription = "The accelerators' driver, whatever their vendor (its tool lists every device), and, on NVIDIA GPUs, GPUDirect Storage, so that reads reach accelerator memory the way production will; a gpu-path step measures the path."
)

func (s *Server) integrationCrumbs(pr *programCtx, last ...web.Crumb) []web.Crumb {
	return s.readinessCrumbs(pr, append([]web.Crumb{{Label: "Integration plan", Href: web.ProgramLink(pr.ID, "/readiness/plan")}}, last...)...)
}

// stepView gathers a step's evidence: its checks across the program's
// hosts (the matrix's cells) and its runs.
func (s *Server) stepView(ctx context.Context, programID int64, st store.IntegrationStep, rd programReadiness) (web.IntegrationStepView, error) {
	v := web.IntegrationStepView{Step: st}
	titles := map[string]string{}
	for _, d := range rd.matrix.Definitions {
		titles[d.ID] = d.Title
	}
	// Checks in the order of the readiness pages.
	order := map[string]int{}
	for i, d := range rd.matrix.Definitions {
		order[d.ID] = i
	}
	ids := slices.Clone(st.CheckIDs)
	slices.SortStableFunc(ids, func(a, b string) int { return order[a] - order[b] })
	for _, id := range ids {
		ev := web.StepCheckEvidence{CheckID: id, Title: titles[id]}
		for _, row := range rd.matrix.Rows {
			cell, ok := rd.cells[row.Host.ID][id]
			if !ok {
				ev.Hosts = append(ev.Hosts, web.ReadinessCell{HostID: row.Host.ID, HostName: row.Host.Name, CheckID: id, NoFacts: true})
				continue
			}
			cell.HostName = row.Host.Name
			ev.Hosts = append(ev.Hosts, cell)
			if cell.Status != "" && (ev.Worst == "" || statusRank[cell.Status] > statusRank[ev.Worst]) {
				ev.Worst = cell.Status
			}
		}
		v.Checks = append(v.Checks, ev)
	}
	for _, id := range st.RunIDs {
		run, err := s.store.GetRun(ctx, programID, id)
		if err != nil {
			return v, err
		}
		v.Runs = append(v.Runs, run)
	}
	return v, nil
}

func (s *Server) showIntegration(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	ctx := r.Context()
	steps, err := s.ensureIntegrationSteps(r)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	rd, err := s.loadProgramReadiness(ctx, pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	d := web.IntegrationPageData{CanEdit: pr.can(capEngineer)}
	for _, st := range steps {
		v, err := s.stepView(ctx, pr.ID, st, rd)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		d.Steps = append(d.Steps, v)
	}
	p := s.page(r, "Integration plan · "+pr.Name, "programs", s.readinessCrumbs(pr, web.Crumb{Label: "Integration plan"})...)
	s.render(w, r, http.StatusOK, web.IntegrationPage(p, pr.ProgramAccess, d))
}

// ensureIntegrationSteps seeds the program's integration plan on its first view and returns it.
func (s *Server) ensureIntegrationSteps(r *http.Request) ([]store.IntegrationStep, error) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		n, err := tx.EnsureIntegrationSteps(ctx, pr.ID, integrationSequence)
		if err != nil || n == 0 {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "plan_seeded", ProgramID: &pr.ID,
			Target: "integration plan", ClientAddr: clientAddr(r), Details: map[string]any{"steps": n}})
	})
	if err != nil {
		return nil, err
	}
	return s.store.ListIntegrationSteps(ctx, pr.ID)
}

// loadIntegrationStep loads {planStepID} within the program.
func (s *Server) loadIntegrationStep(w http.ResponseWriter, r *http.Request) (store.IntegrationStep, bool) {
	pr := programFrom(r.Context())
	id, ok := idParam(r, "planStepID")
	if !ok {
		s.renderError(w, r, http.StatusNotFound)
		return store.IntegrationStep{}, false
	}
	st, err := s.store.GetIntegrationStep(r.Context(), pr.ID, id)
	if err != nil {
		s.notFoundOr(w, r, err)
		return st, false
	}
	return st, true
}

func (s *Server) showIntegrationStep(w http.ResponseWriter, r *http.Request) {
	st, ok := s.loadIntegrationStep(w, r)
	if !ok {
		return
	}
	s.renderIntegrationStep(w, r, http.StatusOK, st, planFormFrom(st), "")
}

func planFormFrom(st store.IntegrationStep) web.IntegrationStepForm {
	f := web.IntegrationStepForm{Status: st.Status, Note: st.Note, Checks: map[string]bool{}, Runs: map[int64]bool{}}
	if st.OwnerUserID != nil {
		f.Owner = *st.OwnerUserID
	}
	for _, c := range st.CheckIDs {
		f.Checks[c] = true
	}
	for _, id := range st.RunIDs {
		f.Runs[id] = true
	}
	return f
}

// viewerSide is the side of the program the caller signs for: their
// organisation is the program's vendor or its customer ("" otherwise).
func viewerSide(pr *programCtx, v *viewer) string {
	if v == nil || v.User.OrganizationID == nil {
		return ""
	}
	switch *v.User.OrganizationID {
	case pr.VendorOrgID:
		return store.SideVendor
	case pr.CustomerOrgID:
		return store.SideCustomer
	}
	return ""
}

func (s *Server) renderIntegrationStep(w http.ResponseWriter, r *http.Request, status int, st store.IntegrationStep, f web.IntegrationStepForm, signError string) {
	pr := programFrom(r.Context())
	ctx := r.Context()
	rd, err := s.loadProgramReadiness(ctx, pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	view, err := s.stepView(ctx, pr.ID, st, rd)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	d := web.IntegrationStepPageData{Step: view, Form: f, Definitions: rd.matrix.Definitions, CanEdit: pr.can(capEngineer),
		Side: viewerSide(pr, viewerFrom(ctx)), SignError: signError}
	if d.Members, err = s.store.ListMembers(ctx, pr.ID); err != nil {
		s.serverError(w, r, err)
		return
	}
	if d.Runs, err = s.store.ListRuns(ctx, pr.ID, store.RunFilter{Limit: 100}); err != nil {
		s.serverError(w, r, err)
		return
	}
	// Runs already attached stay listed even when older than the newest 100.
	listed := map[int64]bool{}
	for _, run := range d.Runs {
		listed[run.ID] = true
	}
	for _, run := range view.Runs {
		if !listed[run.ID] {
			d.Runs = append(d.Runs, run)
		}
	}
	p := s.page(r, st.Title+" · "+pr.Name, "programs", s.integrationCrumbs(pr, web.Crumb{Label: st.Title})...)
	s.render(w, r, status, web.IntegrationStepPage(p, pr.ProgramAccess, d))
}

// updateIntegrationStep saves a step's owner, status, note and evidence. The
// baseline step is done only when a finished local-NVMe run exists; if
// none of its runs is one, the newest is attached. A change of status or
// evidence withdraws the sign-offs given to the step as it was.
func (s *Server) updateIntegrationStep(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	st, ok := s.loadIntegrationStep(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	f := web.IntegrationStepForm{Status: r.PostFormValue("status"), Note: strings.TrimSpace(r.PostFormValue("note")),
		Checks: map[string]bool{}, Runs: map[int64]bool{}, Errors: map[string]string{}}
	u := store.IntegrationStepUpdate{Status: f.Status, Note: f.Note, UpdatedBy: v.ID}
	if !store.ValidStepStatus(f.Status) {
		f.Errors["status"] = "Choose a status."
	}
	if len(f.Note) > 4000 {
		f.Errors["note"] = "At most 4000 characters."
	}
	if raw := r.PostFormValue("owner"); raw != "" {
		id, err := strconv.ParseInt(raw, 10, 64)
		members, merr := s.store.ListMembers(ctx, pr.ID)
		if merr != nil {
			s.serverError(w, r, merr)
			return
		}
		if err != nil || !slices.ContainsFunc(members, func(m store.Member) bool { return m.UserID == id }) {
			f.Errors["owner"] = "Choose a member of the program."
		} else {
			f.Owner, u.OwnerUserID = id, &id
		}
	}
	known := map[string]bool{}
	for _, d := range readiness.Definitions() {
		known[d.ID] = true
	}
	for _, c := range r.PostForm["check"] {
		if !known[c] {
			f.Errors["checks"] = "Choose checks from the list."
			continue
		}
		if !f.Checks[c] {
			u.CheckIDs = append(u.CheckIDs, c)
		}
		f.Checks[c] = true
	}
	for _, raw := range r.PostForm["run"] {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id <= 0 {
			f.Errors["runs"] = "Choose runs of this program."
			continue
		}
		if !f.Runs[id] {
			u.RunIDs = append(u.RunIDs, id)
		}
		f.Runs[id] = true
	}
	var attached *store.Run
	if st.Kind == "baseline" && f.Status == store.StepDone && len(f.Errors) == 0 {
		local, err := s.store.FinishedRunsOnTransport(ctx, pr.ID, string(acceptance.TransportLocalNVMe))
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		switch {
		case len(local) == 0:
			f.Errors["status"] = "The baseline step can be done only when a finished baseline run on local NVMe exists: no run of a profile whose storage transport is local-nvme has finished in this program yet. Run one on a GPU server's local drive first."
		case !slices.ContainsFunc(local, func(run store.Run) bool { return f.Runs[run.ID] }):
			attached = &local[0]
			u.RunIDs = append(u.RunIDs, local[0].ID)
			f.Runs[local[0].ID] = true
		}
	}
	if len(f.Errors) > 0 {
		s.renderIntegrationStep(w, r, http.StatusUnprocessableEntity, st, f, "")
		return
	}
	changed := st.Status != u.Status || !sameStrings(st.CheckIDs, u.CheckIDs) || !sameIDs(st.RunIDs, u.RunIDs)
	withdrawn := 0
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		if err := tx.UpdateIntegrationStep(ctx, pr.ID, st.ID, u); err != nil {
			return err
		}
		if changed && len(st.SignOffs) > 0 {
			var err error
			if withdrawn, err = tx.ClearStepSignOffs(ctx, pr.ID, st.ID); err != nil {
				return err
			}
		}
		details := map[string]any{"status": u.Status, "checks": u.CheckIDs, "runs": u.RunIDs, "owner_user_id": u.OwnerUserID}
		if attached != nil {
			details["baseline_run_attached"] = attached.ID
		}
		if withdrawn > 0 {
			details["signoffs_withdrawn"] = withdrawn
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "plan_step_updated", ProgramID: &pr.ID,
			Target: "plan step " + st.Kind, ClientAddr: clientAddr(r), Details: details})
	})
	if errors.Is(err, store.ErrNotFound) {
		// A run vanished or the owner left the program since the form was shown.
		f.Errors["runs"] = "A chosen run or the owner is no longer part of this program; check the choices."
		s.renderIntegrationStep(w, r, http.StatusUnprocessableEntity, st, f, "")
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	msg := "Step saved."
	if attached != nil {
		msg += fmt.Sprintf(" Run %s (local NVMe) was attached as the baseline's evidence.", attached.DisplayLabel())
	}
	if withdrawn > 0 {
		msg += " The step changed, so its sign-offs were withdrawn: both sides sign again."
	}
	s.setFlash(w, "ok", msg)
	redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/readiness/plan/steps/%d", st.ID)))
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func sameIDs(a, b []int64) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// signOffIntegrationStep records the caller's side's sign-off of a done step.
func (s *Server) signOffIntegrationStep(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	st, ok := s.loadIntegrationStep(w, r)
	if !ok {
		return
	}
	side := viewerSide(pr, v)
	refuse := func(text string) {
		s.renderIntegrationStep(w, r, http.StatusUnprocessableEntity, st, planFormFrom(st), text)
	}
	if side == "" {
		refuse("Only a member of the program's vendor or customer organisation signs off a step.")
		return
	}
	if st.Status != store.StepDone {
		refuse("Only a done step can be signed off: set its status to done first.")
		return
	}
	if so, ok := st.SignOff(side); ok {
		refuse(fmt.Sprintf("The %s side signed this step off already (%s, %s).", side, so.Name, so.SignedAt.UTC().Format("2006-01-02 15:04 UTC")))
		return
	}
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		if err := tx.SignOffIntegrationStep(ctx, pr.ID, st.ID, side, v.ID); err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "plan_step_signed_off", ProgramID: &pr.ID,
			Target: "plan step " + st.Kind, ClientAddr: clientAddr(r), Details: map[string]any{"side": side, "runs": st.RunIDs, "checks": st.CheckIDs}})
	})
	if errors.Is(err, store.ErrConflict) {
		refuse(fmt.Sprintf("The %s side signed this step off already.", side))
		return
	}
	if errors.Is(err, store.ErrStepNotDone) {
		refuse("The step was reopened meanwhile: only a done step can be signed off.")
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", fmt.Sprintf("Signed off for the %s side.", side))
	redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/readiness/plan/steps/%d", st.ID)))
}
