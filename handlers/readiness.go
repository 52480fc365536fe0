package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/readiness"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// readinessRoutes declares the host readiness pages, the program's
// readiness matrix and its integration plan.
func (s *Server) readinessRoutes(r chi.Router) {
	r.With(s.need(capView)).Get("/readiness", s.showReadinessMatrix)
	r.With(s.need(capView)).Get("/readiness/hosts/{hostID}", s.showHostReadiness)
	r.With(s.need(capView)).Get("/readiness/plan", s.showPlan)
	r.With(s.need(capView)).Get("/readiness/plan/steps/{planStepID}", s.showPlanStep)
	r.With(s.need(capEngineer)).Post("/readiness/plan/steps/{planStepID}", s.updatePlanStep)
	r.With(s.need(capEngineer)).Post("/readiness/plan/steps/{planStepID}/signoff", s.signOffPlanStep)
}

// blockingReadinessFailures lists the blocking readiness checks a host
// fails under the profile's expectations, as sentences; a run on it needs
// the user's confirmation. A host never checked has no facts and holds
// nothing; the run page links to its readiness page.
func (s *Server) blockingReadinessFailures(ctx context.Context, h store.Host, profile json.RawMessage) ([]string, error) {
	hs, err := s.latestFacts(ctx, h)
	if err != nil {
		return nil, err
	}
	if hs.unreadable != nil {
		return nil, hs.unreadable
	}
	if hs.facts == nil {
		return []string{}, nil
	}
	var spec acceptance.ProfileSpec
	if err := json.Unmarshal(profile, &spec); err != nil {
		return nil, fmt.Errorf("readiness of host %d: decode profile: %w", h.ID, err)
	}
	failing := readiness.BlockingFailures(readiness.Evaluate(hs.facts, hostOptions(h, readiness.OptionsFor(spec))))
	out := make([]string, len(failing))
	for i, c := range failing {
		out[i] = c.String()
	}
	return out, nil
}

// hostFacts is a host with its latest facts: nil facts when the host was
// never checked, unreadable when the stored document does not decode.
type hostFacts struct {
	host       store.Host
	facts      *facts.Facts
	takenAt    time.Time
	runID      *int64
	unreadable error
}

func (s *Server) latestFacts(ctx context.Context, h store.Host) (hostFacts, error) {
	hs := hostFacts{host: h}
	history, err := s.store.HostFactsHistory(ctx, h.ID, 1)
	if err != nil {
		return hs, err
	}
	if len(history) == 0 {
		return hs, nil
	}
	hs.takenAt, hs.runID = history[0].TakenAt, history[0].RunID
	var f facts.Facts
	if err := json.Unmarshal(history[0].Facts, &f); err != nil {
		hs.unreadable = fmt.Errorf("decode facts %d of host %d: %w", history[0].ID, h.ID, err)
		return hs, nil
	}
	hs.facts = &f
	return hs, nil
}

// hostOptions adds what the host's labels say about it to a profile's
// expectations: gpu=<model> means GPUs are expected, storage_interfaces=
// names the interfaces that carry storage traffic (comma-separated).
func hostOptions(h store.Host, o readiness.Options) readiness.Options {
	if g := strings.ToLower(strings.TrimSpace(h.Labels["gpu"])); g != "" && g != "none" && g != "no" && g != "false" {
		o.GPUExpected = true
	}
	if v := h.Labels["storage_interfaces"]; v != "" {
		for _, name := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			o.StorageInterfaces = append(o.StorageInterfaces, name)
		}
	}
	return o
}

// expectation is one set of options the checks are evaluated under: a
// profile's latest version, or none (specID 0) when the program has no
// profile yet.
type expectation struct {
	specID  int64
	name    string
	version int
	spec    acceptance.ProfileSpec
	opts    readiness.Options
}

func (e expectation) label() string {
	if e.specID == 0 {
		return "no profile"
	}
	return fmt.Sprintf("%s v%d", e.name, e.version)
}

// profileExpectations are the program's profiles (latest versions).
func (s *Server) profileExpectations(ctx context.Context, programID int64) ([]expectation, error) {
	specs, err := s.store.ListSpecs(ctx, store.KindProfile, programID)
	if err != nil {
		return nil, err
	}
	out := make([]expectation, 0, len(specs))
	for _, sp := range specs {
		v, err := s.store.GetSpecVersion(ctx, store.KindProfile, programID, sp.ID, 0)
		if err != nil {
			return nil, err
		}
		var spec acceptance.ProfileSpec
		if err := json.Unmarshal(v.Spec, &spec); err != nil {
			return nil, fmt.Errorf("readiness: decode profile %d v%d: %w", sp.ID, v.Version, err)
		}
		out = append(out, expectation{specID: sp.ID, name: sp.Name, version: v.Version, spec: spec, opts: readiness.OptionsFor(spec)})
	}
	return out, nil
}

// statusRank orders statuses from best to worst, as readiness.Worst does.
var statusRank = map[readiness.Status]int{readiness.PASS: 1, readiness.UNKNOWN: 2, readiness.WARN: 3, readiness.FAIL: 4}

// kernelTransports maps a profile's transport to the controllers' transport
// in sysfs.
var kernelTransports = map[acceptance.Transport]string{
	acceptance.TransportLocalNVMe: "pcie", acceptance.TransportNVMeoFRDMA: "rdma", acceptance.TransportNVMeoFTCP: "tcp",
}

// labelTransport reads a host's transport label (nvmeof-rdma, rdma, tcp,
// local-nvme, ...); "" when the host has none.
func labelTransport(h store.Host) acceptance.Transport {
	switch strings.ToLower(strings.TrimSpace(h.Labels["transport"])) {
	case "":
		return ""
	case "rdma", "nvmeof-rdma", "nvme-rdma":
		return acceptance.TransportNVMeoFRDMA
	case "tcp", "nvmeof-tcp", "nvme-tcp":
		return acceptance.TransportNVMeoFTCP
	case "local", "pcie", "local-nvme":
		return acceptance.TransportLocalNVMe
	case "emulated":
		return acceptance.TransportEmulated
	}
	return acceptance.Transport(h.Labels["transport"])
}

// meantFor says whether a profile is meant for a host, so that the
// matrix judges the host by it: the profile names no storage path
// (emulated), or it already ran on the host, or its transport is the
// one the host's transport label names, or, without a label, the host
// has a controller over it.
func meantFor(ex expectation, h store.Host, f *facts.Facts, ran map[int64]bool) bool {
	want, ok := kernelTransports[ex.spec.Storage.Transport]
	if !ok || ran[ex.specID] {
		return true
	}
	if lt := labelTransport(h); lt != "" {
		return lt == ex.spec.Storage.Transport
	}
	for _, c := range f.NVMe.Controllers {
		if c.Transport.Value == want {
			return true
		}
	}
	return false
}

// programReadiness is the matrix of the program's hosts × checks. Each
// cell is the worst status of the check under the profiles meant for the
// host (see meantFor), or under no expectation when none is, with the
// profile that gave it, so that the cell's link opens the host's checks
// under that profile. Whether each host is ready for each profile is
// computed for every pair.
type programReadiness struct {
	matrix web.ReadinessMatrix
	// cells[hostID][checkID]
	cells map[int64]map[string]web.ReadinessCell
}

func (s *Server) loadProgramReadiness(ctx context.Context, programID int64) (programReadiness, error) {
	var out programReadiness
	hosts, err := s.store.ListHosts(ctx, programID)
	if err != nil {
		return out, err
	}
	exps, err := s.profileExpectations(ctx, programID)
	if err != nil {
		return out, err
	}
	defs := readiness.Definitions()
	index := make(map[string]int, len(defs))
	for i, d := range defs {
		index[d.ID] = i
	}
	ranOn, err := s.store.ProfilesRunOnHosts(ctx, programID)
	if err != nil {
		return out, err
	}
	m := web.ReadinessMatrix{ProgramID: programID, Definitions: defs}
	out.cells = map[int64]map[string]web.ReadinessCell{}
	fits := make([][]web.ReadinessFit, len(exps))
	for _, h := range hosts {
		hs, err := s.latestFacts(ctx, h)
		if err != nil {
			return out, err
		}
		// Profiles often share their expectations (same transport, both
		// with fio steps): evaluate each distinct set of options once.
		evaluated := map[string][]readiness.Check{}
		evaluate := func(o readiness.Options) []readiness.Check {
			key, _ := json.Marshal(o)
			cs, ok := evaluated[string(key)]
			if !ok {
				cs = readiness.Evaluate(hs.facts, o)
				evaluated[string(key)] = cs
			}
			return cs
		}
		row := web.ReadinessRow{Host: h}
		if !hs.takenAt.IsZero() {
			row.FactsAt = hs.takenAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		if hs.unreadable != nil {
			s.log.Warn("readiness: host facts unreadable", "host_id", h.ID, "err", hs.unreadable)
			row.Unreadable = true
		}
		if hs.facts != nil {
			var evals []expectation
			for _, ex := range exps {
				if meantFor(ex, h, hs.facts, ranOn[h.ID]) {
					evals = append(evals, ex)
					row.JudgedBy = append(row.JudgedBy, ex.label())
				}
			}
			if len(evals) == 0 {
				evals = []expectation{{}}
			}
			row.Cells = make([]web.ReadinessCell, len(defs))
			for i, d := range defs {
				row.Cells[i] = web.ReadinessCell{HostID: h.ID, CheckID: d.ID}
			}
			for _, ex := range evals {
				for _, c := range evaluate(hostOptions(h, ex.opts)) {
					i, ok := index[c.ID]
					if !ok {
						continue
					}
					if cur := row.Cells[i]; cur.Status == "" || statusRank[c.Status] > statusRank[cur.Status] {
						row.Cells[i] = web.ReadinessCell{HostID: h.ID, CheckID: c.ID, Status: c.Status, Summary: c.Summary, ProfileID: ex.specID, ProfileLabel: ex.label()}
					}
				}
			}
			out.cells[h.ID] = map[string]web.ReadinessCell{}
			for _, c := range row.Cells {
				switch c.Status {
				case readiness.PASS:
					row.Pass++
				case readiness.WARN:
					row.Warn++
				case readiness.FAIL:
					row.Fail++
				case readiness.UNKNOWN:
					row.Unknown++
				}
				out.cells[h.ID][c.CheckID] = c
			}
		}
		for i, ex := range exps {
			fit := web.ReadinessFit{HostID: h.ID, HostName: h.Name, ProfileID: ex.specID, ProfileLabel: ex.label(), NoFacts: hs.facts == nil}
			if hs.facts != nil {
				for _, c := range readiness.BlockingFailures(evaluate(hostOptions(h, ex.opts))) {
					fit.Failures = append(fit.Failures, c.Title)
				}
			}
			fits[i] = append(fits[i], fit)
		}
		m.Rows = append(m.Rows, row)
	}
	for i, ex := range exps {
		m.Profiles = append(m.Profiles, web.ReadinessProfile{SpecID: ex.specID, Name: ex.name, Version: ex.version,
			Transport: string(ex.spec.Storage.Transport), FioRequired: ex.opts.FioRequired, Hosts: fits[i]})
	}
	out.matrix = m
	return out, nil
}

func (s *Server) readinessCrumbs(pr *programCtx, last ...web.Crumb) []web.Crumb {
	c := []web.Crumb{{Label: "Programs", Href: "/programs"}, {Label: pr.Name, Href: web.ProgramLink(pr.ID, "")}, {Label: "Readiness", Href: web.ProgramLink(pr.ID, "/readiness")}}
	return append(c, last...)
}

func (s *Server) showReadinessMatrix(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	rd, err := s.loadProgramReadiness(r.Context(), pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, "Readiness · "+pr.Name, "programs", web.Crumb{Label: "Programs", Href: "/programs"},
		web.Crumb{Label: pr.Name, Href: web.ProgramLink(pr.ID, "")}, web.Crumb{Label: "Readiness"})
	s.render(w, r, http.StatusOK, web.ReadinessMatrixPage(p, pr.ProgramAccess, rd.matrix))
}

// showHostReadiness shows one host's checks with their evidence and fixes,
// under the expectations of the profile chosen (?profile=<id>), or of none.
func (s *Server) showHostReadiness(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	h, ok := s.loadHost(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	hs, err := s.latestFacts(ctx, h)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	exps, err := s.profileExpectations(ctx, pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	d := web.ReadinessHostData{Host: h, CanCheck: pr.can(capEngineer), FactsRun: hs.runID, Unreadable: hs.unreadable != nil}
	if hs.unreadable != nil {
		s.log.Warn("readiness: host facts unreadable", "request_id", requestID(ctx), "host_id", h.ID, "err", hs.unreadable)
	}
	if !hs.takenAt.IsZero() {
		d.FactsAt = hs.takenAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	chosen := expectation{}
	wanted, _ := strconv.ParseInt(r.URL.Query().Get("profile"), 10, 64)
	for _, ex := range exps {
		d.Profiles = append(d.Profiles, web.RunChoice{ID: ex.specID, Label: ex.label()})
		if ex.specID == wanted {
			chosen = ex
		}
	}
	d.Profile = chosen.specID
	opts := hostOptions(h, chosen.opts)
	d.Expectation = describeExpectation(chosen, opts)
	if hs.facts != nil {
		d.Checks = readiness.Evaluate(hs.facts, opts)
		d.Blocking = readiness.BlockingFailures(d.Checks)
		d.Pass, d.Warn, d.Fail, d.Unknown = readiness.Summary(d.Checks)
		for _, ex := range exps {
			fit := web.ReadinessFit{HostID: h.ID, HostName: h.Name, ProfileID: ex.specID, ProfileLabel: ex.label()}
			for _, c := range readiness.BlockingFailures(readiness.Evaluate(hs.facts, hostOptions(h, ex.opts))) {
				fit.Failures = append(fit.Failures, c.Title)
			}
			d.Fits = append(d.Fits, fit)
		}
	}
	p := s.page(r, "Readiness of "+h.Name+" · "+pr.Name, "programs", s.readinessCrumbs(pr, web.Crumb{Label: h.Name})...)
	s.render(w, r, http.StatusOK, web.ReadinessHostPage(p, pr.ProgramAccess, d))
}

// describeExpectation says in words what the checks expect of the host.
func describeExpectation(ex expectation, o readiness.Options) string {
	var parts []string
	if ex.specID == 0 {
		parts = append(parts, "No profile chosen: the checks describe whatever storage the host has, without expecting a transport")
	} else {
		t := string(o.Transport)
		if t == "" {
			t = "no transport"
		}
		parts = append(parts, fmt.Sprintf("Expectations of profile %s: storage over %s", ex.label(), t))
		if o.FioRequired {
			parts = append(parts, "a fio step will run, so fio is required")
		}
	}
	if o.GPUExpected {
		parts = append(parts, "GPUs expected (host label gpu)")
	}
	if len(o.StorageInterfaces) > 0 {
		parts = append(parts, "storage interfaces "+strings.Join(o.StorageInterfaces, ", ")+" (host label storage_interfaces)")
	}
	return strings.Join(parts, "; ") + "."
}

// The integration plan.

// planSequence is the sequence every program's plan starts with, in the
// order joint teams walk it, with the readiness checks that prove each
// step by default.
var planSequence = []store.PlanSeed{
	{Kind: "baseline", Title: "Baseline measurements",
		Description: "Measure the workload on the GPU servers' own local NVMe first: every later result is compared with it. Done only when a finished run of a local-nvme profile exists."},
	{Kind: "network", Title: "Network preparation",
		Description: "Storage interfaces up at full speed with jumbo frames, RDMA ports active, PFC and ECN set for RoCE.",
		CheckIDs:    []string{"network.mtu", "network.link", "network.rdma", "network.roce-lossless"}},
	{Kind: "storage", Title: "Storage provisioning",
		Description: "Namespaces provisioned on the array and connected over the profile's transport: native multipath with a spreading I/O policy, usable ANA paths, enough I/O queues, healthy drives.",
		CheckIDs:    []string{"storage.controllers", "storage.multipath", "storage.ana", "storage.queues", "storage.health", "storage.scheduler"}},
	{Kind: "host", Title: "Host setup",
		Description: "Kernel, NVMe initiator modules, CPU frequency governor, NUMA placement of NIC, NVMe and GPU, and the tools the runs need.",
		CheckIDs:    []string{"host.kernel", "host.initiator-modules", "host.cpufreq", "host.numa-locality", "tools.fio", "tools.nvme-cli"}},
	{Kind: "gpu-path", Title: "GPU-path validation",
		Description: "NVIDIA driver and GPUDirect Storage, so that reads reach GPU memory the way production will.",
		CheckIDs:    []string{"gpu.driver", "gpu.gds"}},
	{Kind: "orchestration", Title: "Orchestration",
		Description: "The inference stack deployed the way production runs it (scheduler, CSI driver, model cache), proven by runs through it."},
	{Kind: "qos", Title: "QoS and isolation",
		Description: "QoS limits on the array and isolation of storage traffic from other tenants, proven by runs under contention and by a path failover."},
}

func (s *Server) planCrumbs(pr *programCtx, last ...web.Crumb) []web.Crumb {
	return s.readinessCrumbs(pr, append([]web.Crumb{{Label: "Integration plan", Href: web.ProgramLink(pr.ID, "/readiness/plan")}}, last...)...)
}

// stepView gathers a step's evidence: its checks across the program's
// hosts (the matrix's cells) and its runs.
func (s *Server) stepView(ctx context.Context, programID int64, st store.PlanStep, rd programReadiness) (web.PlanStepView, error) {
	v := web.PlanStepView{Step: st}
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
		ev := web.PlanCheckEvidence{CheckID: id, Title: titles[id]}
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

func (s *Server) showPlan(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	ctx := r.Context()
	steps, err := s.ensurePlan(r)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	rd, err := s.loadProgramReadiness(ctx, pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	d := web.PlanPageData{CanEdit: pr.can(capEngineer)}
	for _, st := range steps {
		v, err := s.stepView(ctx, pr.ID, st, rd)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		d.Steps = append(d.Steps, v)
	}
	p := s.page(r, "Integration plan · "+pr.Name, "programs", s.readinessCrumbs(pr, web.Crumb{Label: "Integration plan"})...)
	s.render(w, r, http.StatusOK, web.PlanPage(p, pr.ProgramAccess, d))
}

// ensurePlan seeds the program's plan on its first view and returns it.
func (s *Server) ensurePlan(r *http.Request) ([]store.PlanStep, error) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		n, err := tx.EnsurePlan(ctx, pr.ID, planSequence)
		if err != nil || n == 0 {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "plan_seeded", ProgramID: &pr.ID,
			Target: "integration plan", ClientAddr: clientAddr(r), Details: map[string]any{"steps": n}})
	})
	if err != nil {
		return nil, err
	}
	return s.store.ListPlanSteps(ctx, pr.ID)
}

// loadPlanStep loads {planStepID} within the program.
func (s *Server) loadPlanStep(w http.ResponseWriter, r *http.Request) (store.PlanStep, bool) {
	pr := programFrom(r.Context())
	id, ok := idParam(r, "planStepID")
	if !ok {
		s.renderError(w, r, http.StatusNotFound)
		return store.PlanStep{}, false
	}
	st, err := s.store.GetPlanStep(r.Context(), pr.ID, id)
	if err != nil {
		s.notFoundOr(w, r, err)
		return st, false
	}
	return st, true
}

func (s *Server) showPlanStep(w http.ResponseWriter, r *http.Request) {
	st, ok := s.loadPlanStep(w, r)
	if !ok {
		return
	}
	s.renderPlanStep(w, r, http.StatusOK, st, planFormFrom(st), "")
}

func planFormFrom(st store.PlanStep) web.PlanStepForm {
	f := web.PlanStepForm{Status: st.Status, Note: st.Note, Checks: map[string]bool{}, Runs: map[int64]bool{}}
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

func (s *Server) renderPlanStep(w http.ResponseWriter, r *http.Request, status int, st store.PlanStep, f web.PlanStepForm, signError string) {
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
	d := web.PlanStepPageData{Step: view, Form: f, Definitions: rd.matrix.Definitions, CanEdit: pr.can(capEngineer),
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
	p := s.page(r, st.Title+" · "+pr.Name, "programs", s.planCrumbs(pr, web.Crumb{Label: st.Title})...)
	s.render(w, r, status, web.PlanStepPage(p, pr.ProgramAccess, d))
}

// updatePlanStep saves a step's owner, status, note and evidence. The
// baseline step is done only when a finished local-NVMe run exists; if
// none of its runs is one, the newest is attached. A change of status or
// evidence withdraws the sign-offs given to the step as it was.
func (s *Server) updatePlanStep(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	st, ok := s.loadPlanStep(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	f := web.PlanStepForm{Status: r.PostFormValue("status"), Note: strings.TrimSpace(r.PostFormValue("note")),
		Checks: map[string]bool{}, Runs: map[int64]bool{}, Errors: map[string]string{}}
	u := store.PlanStepUpdate{Status: f.Status, Note: f.Note, UpdatedBy: v.ID}
	if !store.ValidPlanStatus(f.Status) {
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
	if st.Kind == "baseline" && f.Status == store.PlanDone && len(f.Errors) == 0 {
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
		s.renderPlanStep(w, r, http.StatusUnprocessableEntity, st, f, "")
		return
	}
	changed := st.Status != u.Status || !sameStrings(st.CheckIDs, u.CheckIDs) || !sameIDs(st.RunIDs, u.RunIDs)
	withdrawn := 0
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		if err := tx.UpdatePlanStep(ctx, pr.ID, st.ID, u); err != nil {
			return err
		}
		if changed && len(st.SignOffs) > 0 {
			var err error
			if withdrawn, err = tx.ClearPlanSignOffs(ctx, pr.ID, st.ID); err != nil {
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
		s.renderPlanStep(w, r, http.StatusUnprocessableEntity, st, f, "")
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

// signOffPlanStep records the caller's side's sign-off of a done step.
func (s *Server) signOffPlanStep(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	st, ok := s.loadPlanStep(w, r)
	if !ok {
		return
	}
	side := viewerSide(pr, v)
	refuse := func(text string) { s.renderPlanStep(w, r, http.StatusUnprocessableEntity, st, planFormFrom(st), text) }
	if side == "" {
		refuse("Only a member of the program's vendor or customer organisation signs off a step.")
		return
	}
	if st.Status != store.PlanDone {
		refuse("Only a done step can be signed off: set its status to done first.")
		return
	}
	if so, ok := st.SignOff(side); ok {
		refuse(fmt.Sprintf("The %s side signed this step off already (%s, %s).", side, so.Name, so.SignedAt.UTC().Format("2006-01-02 15:04 UTC")))
		return
	}
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		if err := tx.SignOffPlanStep(ctx, pr.ID, st.ID, side, v.ID); err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "plan_step_signed_off", ProgramID: &pr.ID,
			Target: "plan step " + st.Kind, ClientAddr: clientAddr(r), Details: map[string]any{"side": side, "runs": st.RunIDs, "checks": st.CheckIDs}})
	})
	if errors.Is(err, store.ErrConflict) {
		refuse(fmt.Sprintf("The %s side signed this step off already.", side))
		return
	}
	if errors.Is(err, store.ErrPlanStepNotDone) {
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
