package handlers

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/apiclient"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// apiSpecRoutes serves profiles or gate sets as code through the API: JSON
// or YAML in, JSON out, the same validation and versioning as the pages.
func apiSpecRoutes[T any](s *Server, r chi.Router, ops specOps[T]) {
	base := "/" + ops.nouns.Path
	r.With(s.need(capView)).Get(base, apiListSpecs(s, ops))
	r.With(s.need(capEngineer)).Post(base, apiSaveSpec(s, ops, false))
	r.With(s.need(capView)).Get(base+"/{specID}", apiShowSpec(s, ops))
	r.With(s.need(capView)).Get(base+"/{specID}/versions/{version}", apiShowSpec(s, ops))
	r.With(s.need(capView)).Get(base+"/{specID}/versions/{version}/yaml", exportSpec(s, ops)) // as the pages export it
	r.With(s.need(capEngineer)).Post(base+"/{specID}/versions", apiSaveSpec(s, ops, true))
	// A run names the version it used by its id alone; pipelines can read
	// that version back without knowing its spec.
	r.With(s.need(capView)).Get(versionsByIDPath(ops.nouns), apiShowSpecVersionByID(s, ops))
}

// versionsByIDPath is /profile-versions/{versionID} or
// /gateset-versions/{versionID}.
func versionsByIDPath(n web.SpecNouns) string {
	return "/" + strings.TrimSuffix(n.Path, "s") + "-versions/{versionID}"
}

func toAPISpecVersion(sv store.SpecVersion) apiclient.SpecVersion {
	return apiclient.SpecVersion{SpecID: sv.SpecID, VersionID: sv.ID, Version: sv.Version, Digest: sv.Digest, Note: sv.Note, CreatedAt: sv.CreatedAt, Spec: sv.Spec}
}

func apiListSpecs[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr := programFrom(r.Context())
		specs, err := s.store.ListSpecs(r.Context(), ops.kind, pr.ID)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		out := make([]apiclient.Spec, 0, len(specs))
		for _, sp := range specs {
			out = append(out, apiclient.Spec{ID: sp.ID, Name: sp.Name, LatestVersion: sp.LatestVersion, LatestDigest: sp.LatestDigest, UpdatedAt: sp.UpdatedAt})
		}
		writeJSON(w, http.StatusOK, map[string]any{ops.nouns.Path: out})
	}
}

func apiShowSpec[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		version, ok := versionParam(r, "version")
		if !ok {
			s.renderError(w, r, http.StatusNotFound)
			return
		}
		_, sv, _, err := loadSpecVersion(s, r, ops, version)
		if err != nil {
			s.notFoundOr(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, toAPISpecVersion(sv))
	}
}

func apiShowSpecVersionByID[T any](s *Server, ops specOps[T]) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := idParam(r, "versionID")
		if !ok {
			s.renderError(w, r, http.StatusNotFound)
			return
		}
		sv, err := s.store.GetSpecVersionByID(r.Context(), ops.kind, programFrom(r.Context()).ID, id)
		if err != nil {
			s.notFoundOr(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, toAPISpecVersion(sv))
	}
}

// apiSaveSpec creates a spec (newVersion=false) or adds a version.
func apiSaveSpec[T any](s *Server, ops specOps[T], newVersion bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr := programFrom(r.Context())
		v := viewerFrom(r.Context())
		var specID int64
		if newVersion {
			id, ok := idParam(r, "specID")
			if !ok {
				s.renderError(w, r, http.StatusNotFound)
				return
			}
			if _, err := s.store.GetSpec(r.Context(), ops.kind, pr.ID, id); err != nil {
				s.notFoundOr(w, r, err)
				return
			}
			specID = id
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, acceptance.MaxSpecBytes+1))
		if err != nil {
			writeJSON(w, http.StatusRequestEntityTooLarge, apiError{Error: fmt.Sprintf("the document is larger than %d KiB", acceptance.MaxSpecBytes>>10), RequestID: requestID(r.Context())})
			return
		}
		mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		var spec T
		switch mediaType {
		case "application/yaml", "application/x-yaml", "text/yaml":
			spec, err = ops.importYAML(body)
		case "application/json", "":
			spec, err = ops.importJSON(body)
		default:
			writeJSON(w, http.StatusUnsupportedMediaType, apiError{Error: "send application/json or application/yaml", RequestID: requestID(r.Context())})
			return
		}
		if err != nil {
			writeValidationErrors(w, r, asValidationErrors(err))
			return
		}
		spec, nv, verrs, err := prepareSpec(ops, spec)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		verrs = append(verrs, ownerOnlyError(programFrom(r.Context()), ops, nv)...)
		if len(verrs) > 0 {
			writeValidationErrors(w, r, verrs)
			return
		}
		nv.Note, nv.CreatedBy = r.URL.Query().Get("note"), v.ID
		var sv store.SpecVersion
		err = s.store.InTx(r.Context(), func(tx *store.Store) error {
			var err error
			action := string(ops.kind) + "_created"
			if newVersion {
				action = string(ops.kind) + "_version_added"
				sv, err = tx.AddSpecVersion(r.Context(), ops.kind, pr.ID, specID, nv)
			} else {
				var sp store.Spec
				sp, sv, err = tx.CreateSpec(r.Context(), ops.kind, pr.ID, nv)
				sv.SpecID = sp.ID
			}
			if err != nil {
				return err
			}
			return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: action, ProgramID: &pr.ID,
				Target: fmt.Sprintf("%s v%d", nv.Name, sv.Version), ClientAddr: clientAddr(r), Details: map[string]any{"digest": nv.Digest, "via": "api"}})
		})
		switch {
		case errors.Is(err, store.ErrUnchanged):
			writeJSON(w, http.StatusConflict, apiError{Error: "nothing changed: this is the same as the latest version", RequestID: requestID(r.Context())})
		case errors.Is(err, store.ErrNotFound):
			s.renderError(w, r, http.StatusNotFound)
		case err != nil:
			s.serverError(w, r, err)
		default:
			writeJSON(w, http.StatusCreated, toAPISpecVersion(sv))
		}
	}
}

func writeValidationErrors(w http.ResponseWriter, r *http.Request, errs acceptance.ValidationErrors) {
	fields := map[string]string{}
	for _, e := range errs {
		key := e.Path
		if key == "" {
			key = "document"
		}
		msg := e.Message
		if e.Line > 0 {
			msg = fmt.Sprintf("line %d: %s", e.Line, msg)
		}
		if prev, ok := fields[key]; ok {
			msg = prev + "; " + msg
		}
		fields[key] = msg
	}
	writeJSON(w, http.StatusUnprocessableEntity, apiError{Error: "the spec is not valid", Fields: fields, RequestID: requestID(r.Context())})
}
