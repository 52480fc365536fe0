package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/readiness"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

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

// hostOptions adds what the host says about itself to a profile's
// expectations: an emulated host (or one labelled transport=emulated) has
// an emulated storage path, whatever the profile's transport; gpu=<model>
// means GPUs are expected (gpu=none, or "none (emulated)", that none
// are); storage_interfaces= names the interfaces that carry storage
// traffic (comma-separated).
func hostOptions(h store.Host, o readiness.Options) readiness.Options {
	if h.Emulated || labelTransport(h) == acceptance.TransportEmulated {
		o.Emulated = true
	}
	if g := strings.Fields(strings.ToLower(h.Labels["gpu"])); len(g) > 0 && g[0] != "none" && g[0] != "no" && g[0] != "false" {
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
var statusRank = map[readiness.Status]int{readiness.NA: 0, readiness.PASS: 1, readiness.UNKNOWN: 2, readiness.WARN: 3, readiness.FAIL: 4}

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
				case readiness.NA:
					row.NA++
				}
				out.cells[h.ID][c.CheckID] = c
			}
		}
		for i, ex := range exps {
			fits[i] = append(fits[i], fitOf(h, ex, hs.facts, evaluate))
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

// fitOf decides go or no-go for a host under a profile: no-go on a
// blocking FAIL; go otherwise, saying which blocking checks could not be
// told (UNKNOWN) and whether the path is emulated (its storage checks
// n/a). A host without facts is neither.
func fitOf(h store.Host, ex expectation, f *facts.Facts, evaluate func(readiness.Options) []readiness.Check) web.ReadinessFit {
	opts := hostOptions(h, ex.opts)
	fit := web.ReadinessFit{HostID: h.ID, HostName: h.Name, ProfileID: ex.specID, ProfileLabel: ex.label(), NoFacts: f == nil, Emulated: opts.Emulated}
	if f == nil {
		return fit
	}
	checks := evaluate(opts)
	for _, c := range readiness.BlockingFailures(checks) {
		fit.Failures = append(fit.Failures, c.Title)
	}
	for _, c := range readiness.BlockingUnknown(checks) {
		fit.Unknown = append(fit.Unknown, c.Title)
	}
	return fit
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
		d.NA = readiness.NotApplicable(d.Checks)
		evaluate := func(o readiness.Options) []readiness.Check { return readiness.Evaluate(hs.facts, o) }
		for _, ex := range exps {
			d.Fits = append(d.Fits, fitOf(h, ex, hs.facts, evaluate))
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
	if o.Emulated {
		parts = append(parts, "the storage path is emulated (the host or the profile says so), so the checks of an NVMe path and its fabric are n/a")
	}
	if o.GPUExpected {
		parts = append(parts, "GPUs expected (host label gpu)")
	}
	if len(o.StorageInterfaces) > 0 {
		parts = append(parts, "storage interfaces "+strings.Join(o.StorageInterfaces, ", ")+" (host label storage_interfaces)")
	}
	return strings.Join(parts, "; ") + "."
}
