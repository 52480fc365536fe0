package handlers

import (
	"encoding/json"
	"net/http"

	"github.com/a-h/templ"

	"github.com/accordlab/accord/web"
)

// page starts the layout data for a page of this request.
func (s *Server) page(r *http.Request, title, nav string, crumbs ...web.Crumb) web.Page {
	p := web.Page{Title: title, Nav: nav, Crumbs: crumbs, Dev: s.dev}
	if v := viewerFrom(r.Context()); v != nil {
		p.Viewer = &v.Viewer
	}
	p.Flash = takeFlash(r)
	return p
}

// render writes a component with a status.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := c.Render(r.Context(), w); err != nil {
		s.log.Error("render page", "request_id", requestID(r.Context()), "err", err)
	}
}

var errorTexts = map[int][2]string{
	http.StatusBadRequest:            {"That request could not be understood.", "Check the address or the form and try again."},
	http.StatusForbidden:             {"You may not do that.", "Your role in this program does not allow it. A program owner can change your role."},
	http.StatusNotFound:              {"There is nothing here.", "The page does not exist, or it belongs to a program you are not a member of."},
	http.StatusMethodNotAllowed:      {"That action is not available here.", "Use the page's own buttons and forms."},
	http.StatusRequestEntityTooLarge: {"That upload is too large.", "Split it or check the size limits on the page."},
	http.StatusTooManyRequests:       {"Too many requests.", "Wait a moment and try again."},
	http.StatusInternalServerError:   {"Something went wrong on our side.", "The error was logged. Try again; if it persists, give the request id to your administrator."},
	http.StatusServiceUnavailable:    {"Accord is not ready.", "The database is unreachable or being migrated. Try again in a moment."},
}

// renderError shows the error page for status, HTML or JSON by the route.
// It never includes internal error text.
func (s *Server) renderError(w http.ResponseWriter, r *http.Request, status int) {
	texts, ok := errorTexts[status]
	if !ok {
		texts = [2]string{http.StatusText(status), ""}
	}
	if isAPI(r) {
		writeJSON(w, status, apiError{Error: texts[0], RequestID: requestID(r.Context())})
		return
	}
	p := s.page(r, http.StatusText(status), "")
	s.render(w, r, status, web.ErrorPage(p, status, texts[0], texts[1], requestID(r.Context())))
}

// serverError logs err with the request id and shows the 500 page (or
// the 400 page when the database refused a client's bytes as not text).
func (s *Server) serverError(w http.ResponseWriter, r *http.Request, err error) {
	if isNotTextError(err) {
		// The client's bytes, not our fault: a NUL or invalid UTF-8 in a
		// multipart or JSON body reached the database.
		s.log.Warn("request refused: bytes that are not text", "request_id", requestID(r.Context()), "route", routePattern(r), "err", err)
		s.refuseBadBytes(w, r, badBytes{"a field of the request"})
		return
	}
	s.log.Error("request failed", "request_id", requestID(r.Context()), "route", routePattern(r), "err", err)
	s.renderError(w, r, http.StatusInternalServerError)
}

type apiError struct {
	Error     string            `json:"error"`
	Fields    map[string]string `json:"fields,omitempty"`
	RequestID string            `json:"request_id,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func isAPI(r *http.Request) bool {
	return len(r.URL.Path) >= 8 && r.URL.Path[:8] == "/api/v1/"
}

// redirect after a successful POST (303, so the browser GETs).
func redirect(w http.ResponseWriter, r *http.Request, to string) {
	http.Redirect(w, r, to, http.StatusSeeOther)
}
