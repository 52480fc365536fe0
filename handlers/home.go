package handlers

import (
	"net/http"

	"github.com/accordlab/accord/web"
)

func (s *Server) showHome(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	if v == nil {
		s.render(w, r, http.StatusOK, web.HomeSignedOut(s.page(r, "Welcome", "home")))
		return
	}
	programs, err := s.store.ProgramsFor(r.Context(), v.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	d := web.HomeData{Programs: programs}
	if d.Waiting, d.Viewing, err = s.waitingFor(r, v, programs); err != nil {
		s.serverError(w, r, err)
		return
	}
	if d.Recent, err = s.recentRuns(r, v); err != nil {
		s.serverError(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, web.HomeSignedIn(s.page(r, "Home", "home"), d))
}

func (s *Server) showNotFound(w http.ResponseWriter, r *http.Request) {
	s.renderError(w, r, http.StatusNotFound)
}

func (s *Server) showMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	s.renderError(w, r, http.StatusMethodNotAllowed)
}
