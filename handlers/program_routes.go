package handlers

import "github.com/go-chi/chi/v5"

// programRoutes declares the pages inside /programs/{programID} beyond the
// overview and members: specs, hosts, runs, results, rollouts.
func (s *Server) programRoutes(r chi.Router) {
	specRoutes(s, r, profileOps)
	specRoutes(s, r, gateSetOps)
	s.hostRoutes(r)
	s.runRoutes(r)
	s.reportRoutes(r)
	s.chartRoutes(r)
	s.readinessRoutes(r)
	s.rolloutRoutes(r)
}

// apiProgramRoutes declares the JSON API inside a program.
func (s *Server) apiProgramRoutes(r chi.Router) {
	apiSpecRoutes(s, r, profileOps)
	apiSpecRoutes(s, r, gateSetOps)
	s.apiRunRoutes(r)
	s.apiRolloutRoutes(r)
}

// streamRoutes declares long-lived responses (server-sent events), which
// run without the request timeout.
func (s *Server) streamRoutes(r chi.Router) {
	r.With(s.requireSignIn, s.inProgram, s.need(capView)).Get("/programs/{programID}/runs/{runID}/events", s.streamRunEvents)
}
