package handlers

import (
	"context"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/store"
)

// readinessRoutes declares the host readiness pages, the program's
// readiness matrix and its integration plan.
func (s *Server) readinessRoutes(r chi.Router) {}

// blockingReadinessFailures lists the blocking readiness checks a host
// fails, as sentences; a run on it needs the user's confirmation.
func (s *Server) blockingReadinessFailures(ctx context.Context, h store.Host) ([]string, error) {
	return nil, nil
}
