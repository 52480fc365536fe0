package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
	"github.com/accordlab/accord/web/specform"
)

// specOps is what differs between profiles and gate sets; the handlers
// below serve both. T is acceptance.ProfileSpec or acceptance.GateSetSpec.
type specOps[T any] struct {
	kind       store.SpecKind
	nouns      web.SpecNouns
	importYAML func([]byte) (T, error)
	importJSON func([]byte) (T, error)
	exportYAML func(T) ([]byte, error)
	validate   func(T) acceptance.ValidationErrors
	normalized func(T) T
	canonical  func(T) ([]byte, error)
	digest     func(T) (string, error)
	diff       func(old, new T) (acceptance.SpecDiff, error)
	name       func(T) string
	ownerOnly  func(T) bool
	templates  func() []specTemplate[T]
	summary    func(T) []web.SpecLine
	// edit applies a form action ("add:steps", "remove:criteria:2", ...)
	edit    func(spec *T, action string, form url.Values)
	addKind []string
}

type specTemplate[T any] struct {
	web.SpecTemplate
	Spec T
}

var profileOps = specOps[acceptance.ProfileSpec]{
	kind: store.KindProfile,
	nouns: web.SpecNouns{Singular: "profile", Plural: "profiles", Path: "profiles", Tab: "profiles",
		ListHelp: "A profile says what to run on a lab host: fio jobs, inference load, your own commands, cache drops, pauses and faults. Every save is a new immutable version; runs point at versions."},
	importYAML: acceptance.ImportProfileYAML,
	importJSON: acceptance.ImportProfileJSON,
	exportYAML: acceptance.ExportProfileYAML,
	validate:   acceptance.ValidateProfile,
	normalized: func(p acceptance.ProfileSpec) acceptance.ProfileSpec { return p.Normalized() },
	canonical:  acceptance.ProfileCanonicalJSON,
	digest:     acceptance.ProfileDigest,
	diff:       acceptance.DiffProfiles,
	name:       func(p acceptance.ProfileSpec) string { return p.Name },
	ownerOnly: func(p acceptance.ProfileSpec) bool {
		for _, s := range p.Steps {
			if s.Kind == acceptance.StepCommand {
				return true
			}
		}
		return false
	},
	templates: func() []specTemplate[acceptance.ProfileSpec] {
		var out []specTemplate[acceptance.ProfileSpec]
		for _, t := range acceptance.ProfileTemplates() {
			out = append(out, specTemplate[acceptance.ProfileSpec]{web.SpecTemplate{ID: t.ID, Title: t.Title, Description: t.Description}, t.Spec})
		}
		return out
	},
	summary: func(p acceptance.ProfileSpec) []web.SpecLine {
		lines := []web.SpecLine{
			{Label: "Purpose", Value: string(p.Purpose)},
			{Label: "Storage", Value: strings.TrimSpace(fmt.Sprintf("%s %s %s", p.Storage.Transport, p.Storage.ArrayModel, p.Storage.Namespace))},
			{Label: "Repetitions", Value: strconv.Itoa(p.Repetitions)},
		}
		for i, s := range p.Steps {
			lines = append(lines, web.SpecLine{Label: fmt.Sprintf("Step %d", i+1), Value: fmt.Sprintf("%s (%s)", s.Name, s.Kind)})
		}
		return lines
	},
	edit:    editProfile,
	addKind: []string{"fio", "inference", "command", "drop-caches", "pause", "fault", "gpu-path"},
}

var gateSetOps = specOps[acceptance.GateSetSpec]{
	kind: store.KindGateSet,
	nouns: web.SpecNouns{Singular: "gate set", Plural: "gate sets", Path: "gatesets", Tab: "gatesets",
		ListHelp: "A gate set says how a run is judged: criteria on canonical metrics, absolute or relative to a baseline, with confidence levels and stop-loss lines. Every save is a new immutable version; verdicts point at versions."},
	importYAML: acceptance.ImportGateSetYAML,
	importJSON: acceptance.ImportGateSetJSON,
	exportYAML: acceptance.ExportGateSetYAML,
	validate:   acceptance.ValidateGateSet,
	normalized: func(g acceptance.GateSetSpec) acceptance.GateSetSpec { return g.Normalized() },
	canonical:  acceptance.GateSetCanonicalJSON,
	digest:     acceptance.GateSetDigest,
	diff:       acceptance.DiffGateSets,
	name:       func(g acceptance.GateSetSpec) string { return g.Name },
	ownerOnly:  func(acceptance.GateSetSpec) bool { return false },
	templates: func() []specTemplate[acceptance.GateSetSpec] {
		var out []specTemplate[acceptance.GateSetSpec]
		for _, t := range acceptance.GateSetTemplates() {
			out = append(out, specTemplate[acceptance.GateSetSpec]{web.SpecTemplate{ID: t.ID, Title: t.Title, Description: t.Description}, t.Spec})
		}
		return out
	},
	summary: func(g acceptance.GateSetSpec) []web.SpecLine {
		lines := []web.SpecLine{{Label: "Correction", Value: g.Correction}, {Label: "Stop-loss after", Value: fmt.Sprintf("%d consecutive breaches", g.StopLossConsecutive)}}
		for _, c := range g.Criteria {
			lines = append(lines, web.SpecLine{Label: c.Name, Value: criterionText(c)})
		}
		return lines
	},
	edit: editGateSet,
}

// criterionText writes a criterion's rule (its numbers, from its fields)
// and, after it, its help (why it is there).
func criterionText(c acceptance.Criterion) string {
	if c.Help != "" {
		return c.Rule() + ". " + c.Help
	}
	return c.Rule()
}

// specRoutes declares the pages of one kind of spec inside a program.
func specRoutes[T any](s *Server, r chi.Router, ops specOps[T]) {
	base := "/" + ops.nouns.Path
	r.With(s.need(capView)).Get(base, listSpecs(s, ops))
	r.With(s.need(capEngineer)).Get(base+"/new", showNewSpec(s, ops))
	r.With(s.need(capEngineer)).Post(base, createSpec(s, ops))
	r.With(s.need(capEngineer)).Post(base+"/import", importSpec(s, ops))
	r.With(s.need(capView)).Get(base+"/{specID}", showSpec(s, ops))
	r.With(s.need(capView)).Get(base+"/{specID}/versions/{version}", showSpec(s, ops))
	r.With(s.need(capView)).Get(base+"/{specID}/versions/{version}/yaml", exportSpec(s, ops))
	r.With(s.need(capView)).Get(base+"/{specID}/diff", showSpecDiff(s, ops))
	r.With(s.need(capEngineer)).Get(base+"/{specID}/edit", showEditSpec(s, ops))
	r.With(s.need(capEngineer)).Post(base+"/{specID}/edit", updateSpec(s, ops))
}

func specCrumbs[T any](pr *programCtx, ops specOps[T], last string) []web.Crumb {
	return []web.Crumb{{Label: "Programs", Href: "/programs"}, {Label: pr.Name, Href: web.ProgramLink(pr.ID, "")},
		{Label: capitalized(ops.nouns.Plural), Href: web.ProgramLink(pr.ID, "/"+ops.nouns.Path)}, {Label: last}}
}

// capitalized writes "gate sets" as "Gate sets", for crumbs and titles.
func capitalized(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func listSpecs[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr := programFrom(r.Context())
		specs, err := s.store.ListSpecs(r.Context(), ops.kind, pr.ID)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		var templates []web.SpecTemplate
		for _, t := range ops.templates() {
			templates = append(templates, t.SpecTemplate)
		}
		p := s.page(r, ops.nouns.Plural+" · "+pr.Name, "programs", specCrumbs(pr, ops, "")[:3]...)
		s.render(w, r, http.StatusOK, web.SpecListPage(p, pr.ProgramAccess, ops.nouns, specs, templates, pr.can(capEngineer)))
	}
}

// loadSpecVersion loads {specID} (and {version} or ?from=) of the program.
func loadSpecVersion[T any](s *Server, r *http.Request, ops specOps[T], version int) (store.Spec, store.SpecVersion, T, error) {
	var zero T
	pr := programFrom(r.Context())
	id, ok := idParam(r, "specID")
	if !ok {
		return store.Spec{}, store.SpecVersion{}, zero, store.ErrNotFound
	}
	sp, err := s.store.GetSpec(r.Context(), ops.kind, pr.ID, id)
	if err != nil {
		return sp, store.SpecVersion{}, zero, err
	}
	sv, err := s.store.GetSpecVersion(r.Context(), ops.kind, pr.ID, id, version)
	if err != nil {
		return sp, sv, zero, err
	}
	var spec T
	if err := json.Unmarshal(sv.Spec, &spec); err != nil {
		return sp, sv, zero, fmt.Errorf("decode %s %d v%d: %w", ops.kind, id, sv.Version, err)
	}
	return sp, sv, spec, nil
}

// notFoundOr shows 404 for ErrNotFound and 500 for anything else.
func (s *Server) notFoundOr(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, http.StatusNotFound)
		return
	}
	s.serverError(w, r, err)
}

func versionParam(r *http.Request, name string) (int, bool) {
	raw := chi.URLParam(r, name)
	if raw == "" {
		raw = r.URL.Query().Get(name)
	}
	if raw == "" {
		return 0, true
	}
	v, err := strconv.Atoi(raw)
	return v, err == nil && v > 0
}

func showSpec[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr := programFrom(r.Context())
		version, ok := versionParam(r, "version")
		if !ok {
			s.renderError(w, r, http.StatusNotFound)
			return
		}
		sp, sv, spec, err := loadSpecVersion(s, r, ops, version)
		if err != nil {
			s.notFoundOr(w, r, err)
			return
		}
		versions, err := s.store.ListSpecVersions(r.Context(), ops.kind, pr.ID, sp.ID)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		yml, err := ops.exportYAML(spec)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		p := s.page(r, sp.Name+" · "+pr.Name, "programs", specCrumbs(pr, ops, sp.Name)...)
		s.render(w, r, http.StatusOK, web.SpecShowPage(p, pr.ProgramAccess, ops.nouns, web.SpecShowData{
			Spec: sp, Version: sv, Versions: versions, YAML: string(yml), Summary: ops.summary(spec), CanEdit: pr.can(capEngineer),
			CanRun: ops.kind == store.KindProfile && pr.can(capEngineer),
		}))
	}
}

func exportSpec[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		version, ok := versionParam(r, "version")
		if !ok {
			s.renderError(w, r, http.StatusNotFound)
			return
		}
		sp, sv, spec, err := loadSpecVersion(s, r, ops, version)
		if err != nil {
			s.notFoundOr(w, r, err)
			return
		}
		yml, err := ops.exportYAML(spec)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-v%d.yaml"`, fileSafe(sp.Name), sv.Version))
		_, _ = w.Write(yml)
	}
}

func showSpecDiff[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr := programFrom(r.Context())
		from, ok1 := versionParam(r, "from")
		to, ok2 := versionParam(r, "to")
		if !ok1 || !ok2 {
			s.renderError(w, r, http.StatusNotFound)
			return
		}
		// Without versions: the latest against the one before it.
		sp, newVersion, newSpec, err := loadSpecVersion(s, r, ops, to)
		if err != nil {
			s.notFoundOr(w, r, err)
			return
		}
		to = newVersion.Version
		if from == 0 {
			from = max(1, to-1)
		}
		_, _, oldSpec, err := loadSpecVersion(s, r, ops, from)
		if err != nil {
			s.notFoundOr(w, r, err)
			return
		}
		d, err := ops.diff(oldSpec, newSpec)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		p := s.page(r, sp.Name+" diff", "programs", specCrumbs(pr, ops, sp.Name)...)
		s.render(w, r, http.StatusOK, web.SpecDiffPage(p, pr.ProgramAccess, ops.nouns, sp, from, to, d))
	}
}

func showNewSpec[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr := programFrom(r.Context())
		var spec T
		if id := r.URL.Query().Get("template"); id != "" {
			found := false
			for _, t := range ops.templates() {
				if t.ID == id {
					spec, found = t.Spec, true
				}
			}
			if !found {
				s.renderError(w, r, http.StatusNotFound)
				return
			}
		}
		action := web.ProgramLink(pr.ID, "/"+ops.nouns.Path)
		st := specFormState{action: action, mode: r.URL.Query().Get("mode"), pageURL: r.URL}
		if p, ok := any(&spec).(*acceptance.ProfileSpec); ok && r.URL.Query().Get("template") != "" {
			known, err := s.knownEndpoints(r.Context(), pr.ID)
			if err != nil {
				s.serverError(w, r, err)
				return
			}
			st.notice = localizeTemplate(p, known)
		}
		s.renderSpecForm(w, r, http.StatusOK, ops, &spec, nil, st)
	}
}

func showEditSpec[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr := programFrom(r.Context())
		from, ok := versionParam(r, "from")
		if !ok {
			s.renderError(w, r, http.StatusNotFound)
			return
		}
		sp, sv, spec, err := loadSpecVersion(s, r, ops, from)
		if err != nil {
			s.notFoundOr(w, r, err)
			return
		}
		action := web.ProgramLink(pr.ID, fmt.Sprintf("/%s/%d/edit", ops.nouns.Path, sp.ID))
		s.renderSpecForm(w, r, http.StatusOK, ops, &spec, nil, specFormState{action: action, specID: sp.ID, base: sv.Version, mode: r.URL.Query().Get("mode"), pageURL: r.URL})
	}
}

type specFormState struct {
	action  string
	specID  int64
	base    int
	mode    string
	note    string
	yamlRaw string // the user's YAML text when it did not parse
	pageURL *url.URL
	notice  string // what Accord changed in a template
}

func (s *Server) renderSpecFormPage(w http.ResponseWriter, r *http.Request, status int, title string, crumbs []web.Crumb, nouns web.SpecNouns, f web.SpecEditForm) {
	pr := programFrom(r.Context())
	p := s.page(r, title, "programs", crumbs...)
	s.render(w, r, status, web.SpecEditPage(p, pr.ProgramAccess, nouns, f))
}

func (s *Server) renderSpecForm(w http.ResponseWriter, r *http.Request, status int, ops specOpsAny, spec any, errs acceptance.ValidationErrors, st specFormState) {
	sections, general := specform.Sections(spec, errs)
	yml := st.yamlRaw
	if yml == "" {
		b, err := ops.exportAny(spec)
		if err == nil {
			yml = string(b)
		}
	}
	page := *st.pageURL
	q := page.Query()
	q.Set("mode", "form")
	page.RawQuery = q.Encode()
	formURL := page.String()
	q.Set("mode", "yaml")
	page.RawQuery = q.Encode()
	yamlURL := page.String()
	f := web.SpecEditForm{
		Action: st.action, SpecID: st.specID, Base: st.base, Sections: sections, General: general,
		YAML: yml, Mode: st.mode, Note: st.note, AddKinds: ops.addKinds(), FormURL: formURL, YAMLURL: yamlURL, Notice: st.notice,
	}
	pr := programFrom(r.Context())
	if _, ok := spec.(*acceptance.ProfileSpec); ok {
		var err error
		if f.Endpoints, err = s.knownEndpoints(r.Context(), pr.ID); err != nil {
			s.serverError(w, r, err)
			return
		}
		if f.TestHosts, err = s.testHosts(r.Context(), pr.ID); err != nil {
			s.serverError(w, r, err)
			return
		}
		f.EndpointTestURL = web.ProgramLink(pr.ID, "/endpoint-test")
	}
	nouns := ops.nounsAny()
	title := "New " + nouns.Singular
	if st.specID != 0 {
		title = "Edit " + nouns.Singular
	}
	crumbs := []web.Crumb{{Label: "Programs", Href: "/programs"}, {Label: pr.Name, Href: web.ProgramLink(pr.ID, "")},
		{Label: capitalized(nouns.Plural), Href: web.ProgramLink(pr.ID, "/"+nouns.Path)}, {Label: title}}
	s.renderSpecFormPage(w, r, status, title, crumbs, nouns, f)
}

// specOpsAny lets the non-generic form renderer use the generic ops.
type specOpsAny interface {
	exportAny(spec any) ([]byte, error)
	addKinds() []string
	nounsAny() web.SpecNouns
}

func (o specOps[T]) exportAny(spec any) ([]byte, error) { return o.exportYAML(*spec.(*T)) }
func (o specOps[T]) addKinds() []string                 { return o.addKind }
func (o specOps[T]) nounsAny() web.SpecNouns            { return o.nouns }

// bindSubmittedSpec reads the posted form or YAML into a spec. For a form
// action other than save (add, remove, move, refresh) it returns done=false
// with the edited spec, to be shown again.
func bindSubmittedSpec[T any](r *http.Request, ops specOps[T]) (spec T, errs acceptance.ValidationErrors, save bool, st specFormState) {
	st.mode = r.PostFormValue("_mode")
	st.note = strings.TrimSpace(r.PostFormValue("_note"))
	if len(st.note) > 500 {
		errs = append(errs, acceptance.FieldError{Message: "the note may have at most 500 characters"})
	}
	if st.mode == "yaml" {
		text := r.PostFormValue("_yaml")
		parsed, err := ops.importYAML([]byte(text))
		if err != nil {
			st.yamlRaw = text
			return spec, append(errs, asValidationErrors(err)...), false, st
		}
		return parsed, errs, len(errs) == 0, st
	}
	errs = append(errs, specform.Bind(r.PostForm, &spec)...)
	action := r.PostFormValue("_action")
	if action != "" && action != "save" {
		ops.edit(&spec, action, r.PostForm)
		return spec, nil, false, st
	}
	return spec, errs, len(errs) == 0, st
}

func asValidationErrors(err error) acceptance.ValidationErrors {
	var ve acceptance.ValidationErrors
	if errors.As(err, &ve) {
		return ve
	}
	return acceptance.ValidationErrors{{Message: err.Error()}}
}

// prepareSpec validates and normalizes a spec and computes what is stored.
func prepareSpec[T any](ops specOps[T], spec T) (T, store.NewSpecVersion, acceptance.ValidationErrors, error) {
	spec = ops.normalized(spec)
	if errs := ops.validate(spec); len(errs) > 0 {
		return spec, store.NewSpecVersion{}, errs, nil
	}
	canon, err := ops.canonical(spec)
	if err != nil {
		return spec, store.NewSpecVersion{}, nil, err
	}
	digest, err := ops.digest(spec)
	if err != nil {
		return spec, store.NewSpecVersion{}, nil, err
	}
	return spec, store.NewSpecVersion{Name: ops.name(spec), Spec: canon, Digest: digest, OwnerOnly: ops.ownerOnly(spec)}, nil, nil
}

// ownerOnlyError refuses command steps to anyone but owners.
func ownerOnlyError[T any](pr *programCtx, ops specOps[T], v store.NewSpecVersion) acceptance.ValidationErrors {
	if v.OwnerOnly && !pr.can(capOwner) {
		return acceptance.ValidationErrors{{Message: "only program owners may add command steps (they run a program of your choice on the lab host); ask an owner, or remove the command step"}}
	}
	return nil
}

func createSpec[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr := programFrom(r.Context())
		v := viewerFrom(r.Context())
		st := specFormState{action: web.ProgramLink(pr.ID, "/"+ops.nouns.Path), pageURL: r.URL}
		r.Body = http.MaxBytesReader(w, r.Body, 2*acceptance.MaxSpecBytes)
		if err := r.ParseForm(); err != nil {
			renderTooLarge(s, w, r, ops, st)
			return
		}
		_, nv, ok := submittedSpec(s, w, r, ops, &st)
		if !ok {
			return
		}
		var created store.Spec
		err := s.store.InTx(r.Context(), func(tx *store.Store) error {
			var err error
			created, _, err = tx.CreateSpec(r.Context(), ops.kind, pr.ID, nv)
			if err != nil {
				return err
			}
			return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: string(ops.kind) + "_created", ProgramID: &pr.ID,
				Target: nv.Name, ClientAddr: clientAddr(r), Details: map[string]any{"digest": nv.Digest}})
		})
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		s.setFlash(w, "ok", fmt.Sprintf("Saved %s %q as version 1.", ops.nouns.Singular, nv.Name))
		redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/%s/%d", ops.nouns.Path, created.ID)))
	}
}

// submittedSpec reads a posted spec form and validates it for saving.
// When it is not to be saved (an edit action such as adding a step, or
// errors), it has shown the form again and ok is false.
func submittedSpec[T any](s *Server, w http.ResponseWriter, r *http.Request, ops specOps[T], st *specFormState) (spec T, nv store.NewSpecVersion, ok bool) {
	spec, errs, save, bound := bindSubmittedSpec(r, ops)
	st.mode, st.note, st.yamlRaw = bound.mode, bound.note, bound.yamlRaw
	if !save {
		s.renderSpecForm(w, r, statusFor(errs), ops, &spec, errs, *st)
		return spec, nv, false
	}
	spec, nv, verrs, err := prepareSpec(ops, spec)
	if err != nil {
		s.serverError(w, r, err)
		return spec, nv, false
	}
	verrs = append(verrs, ownerOnlyError(programFrom(r.Context()), ops, nv)...)
	if len(verrs) > 0 {
		s.renderSpecForm(w, r, http.StatusUnprocessableEntity, ops, &spec, verrs, *st)
		return spec, nv, false
	}
	nv.Note, nv.CreatedBy = st.note, viewerFrom(r.Context()).ID
	return spec, nv, true
}

// renderTooLarge answers a form whose body is over the limit with the
// editor again, naming the limit. The text sent cannot be kept (it was
// not read to its end), and nothing was saved.
func renderTooLarge[T any](s *Server, w http.ResponseWriter, r *http.Request, ops specOps[T], st specFormState) {
	var spec T
	st.mode, st.yamlRaw = "yaml", "# The document sent was not kept: it is over the size limit.\n"
	errs := acceptance.ValidationErrors{{Message: fmt.Sprintf("the document is larger than %d KiB, the most a %s may be; nothing was saved (paste a smaller one)",
		acceptance.MaxSpecBytes>>10, ops.nouns.Singular)}}
	s.renderSpecForm(w, r, http.StatusRequestEntityTooLarge, ops, &spec, errs, st)
}

func statusFor(errs acceptance.ValidationErrors) int {
	if len(errs) > 0 {
		return http.StatusUnprocessableEntity
	}
	return http.StatusOK
}

func updateSpec[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr := programFrom(r.Context())
		v := viewerFrom(r.Context())
		id, ok := idParam(r, "specID")
		if !ok {
			s.renderError(w, r, http.StatusNotFound)
			return
		}
		sp, err := s.store.GetSpec(r.Context(), ops.kind, pr.ID, id)
		if err != nil {
			s.notFoundOr(w, r, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 2*acceptance.MaxSpecBytes)
		if err := r.ParseForm(); err != nil {
			renderTooLarge(s, w, r, ops, specFormState{action: web.ProgramLink(pr.ID, fmt.Sprintf("/%s/%d/edit", ops.nouns.Path, sp.ID)), specID: sp.ID, pageURL: r.URL})
			return
		}
		base, _ := strconv.Atoi(r.PostFormValue("_base"))
		st := specFormState{action: web.ProgramLink(pr.ID, fmt.Sprintf("/%s/%d/edit", ops.nouns.Path, sp.ID)), specID: sp.ID, base: base, pageURL: r.URL}
		spec, nv, ok := submittedSpec(s, w, r, ops, &st)
		if !ok {
			return
		}
		var sv store.SpecVersion
		err = s.store.InTx(r.Context(), func(tx *store.Store) error {
			var err error
			sv, err = tx.AddSpecVersion(r.Context(), ops.kind, pr.ID, sp.ID, nv)
			if err != nil {
				return err
			}
			return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: string(ops.kind) + "_version_added", ProgramID: &pr.ID,
				Target: fmt.Sprintf("%s v%d", nv.Name, sv.Version), ClientAddr: clientAddr(r), Details: map[string]any{"digest": nv.Digest}})
		})
		if errors.Is(err, store.ErrUnchanged) {
			s.renderSpecForm(w, r, http.StatusUnprocessableEntity, ops, &spec, acceptance.ValidationErrors{{Message: "nothing changed: this is the same as the latest version, so no new version was saved"}}, st)
			return
		}
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		s.setFlash(w, "ok", fmt.Sprintf("Saved version %d.", sv.Version))
		redirect(w, r, web.ProgramLink(pr.ID, fmt.Sprintf("/%s/%d", ops.nouns.Path, sp.ID)))
	}
}

// importSpec creates a spec from an uploaded YAML file.
func importSpec[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr := programFrom(r.Context())
		r.Body = http.MaxBytesReader(w, r.Body, 4*acceptance.MaxSpecBytes)
		file, _, err := r.FormFile("file")
		if err != nil {
			s.setFlash(w, "error", "Choose a YAML file to import (at most 256 KiB).")
			redirect(w, r, web.ProgramLink(pr.ID, "/"+ops.nouns.Path))
			return
		}
		defer file.Close()
		data, err := io.ReadAll(io.LimitReader(file, acceptance.MaxSpecBytes+1))
		if err != nil {
			s.renderError(w, r, http.StatusBadRequest)
			return
		}
		st := specFormState{action: web.ProgramLink(pr.ID, "/"+ops.nouns.Path), mode: "yaml", pageURL: r.URL}
		spec, err := ops.importYAML(data)
		if err != nil {
			st.yamlRaw = string(data)
			if len(data) > acceptance.MaxSpecBytes {
				st.yamlRaw = ""
			}
			s.renderSpecForm(w, r, http.StatusUnprocessableEntity, ops, &spec, asValidationErrors(err), st)
			return
		}
		// Show the imported spec for review; saving creates it.
		s.renderSpecForm(w, r, http.StatusOK, ops, &spec, nil, st)
	}
}

func fileSafe(name string) string {
	out := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, name)
	if out == "" {
		return "spec"
	}
	return out
}
