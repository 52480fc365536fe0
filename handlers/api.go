package handlers

import (
	"net/http"

	"github.com/accordlab/accord/apiclient"
	"github.com/accordlab/accord/store"
)

func toAPIProgram(p store.ProgramAccess) apiclient.Program {
	return apiclient.Program{ID: p.ID, Name: p.Name, Vendor: p.VendorName, Customer: p.CustomerName, Role: string(p.Role), CreatedAt: p.CreatedAt}
}

func (s *Server) apiListPrograms(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	programs, err := s.store.ProgramsFor(r.Context(), v.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	out := make([]apiclient.Program, 0, len(programs))
	for _, p := range programs {
		out = append(out, toAPIProgram(p))
	}
	writeJSON(w, http.StatusOK, map[string]any{"programs": out})
}

func (s *Server) apiShowProgram(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, toAPIProgram(programFrom(r.Context()).ProgramAccess))
}
