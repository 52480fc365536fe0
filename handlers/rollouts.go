package handlers

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/web"
)

// rolloutRoutes declares the rollout board, approvals, the decision log
// and webhooks inside a program.
func (s *Server) rolloutRoutes(r chi.Router) {}

// apiRolloutRoutes declares the rollout and decision API inside a program.
func (s *Server) apiRolloutRoutes(r chi.Router) {}

// awaitedApprovals lists rollout stages waiting for the viewer's approval,
// for the home page.
func (s *Server) awaitedApprovals(r *http.Request, v *viewer) ([]web.AwaitedApproval, error) {
	return nil, nil
}
