package handlers

import "github.com/go-chi/chi/v5"

// programRoutes declares the pages inside /programs/{programID} beyond the
// overview and members: specs, hosts, runs, results, rollouts.
func (s *Server) programRoutes(r chi.Router) {
	specRoutes(s, r, profileOps)
	specRoutes(s, r, gateSetOps)
}

// apiProgramRoutes declares the JSON API inside a program.
func (s *Server) apiProgramRoutes(r chi.Router) {
	apiSpecRoutes(s, r, profileOps)
	apiSpecRoutes(s, r, gateSetOps)
}

// streamRoutes declares long-lived responses (server-sent events), which
// run without the request timeout.
func (s *Server) streamRoutes(r chi.Router) {
}
