package handlers

import (
	"context"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/store"
)

// reportRoutes declares the signed report downloads, co-signing and the
// verification page inside a program.
func (s *Server) reportRoutes(r chi.Router) {}

// hasReport reports whether the run's results are signed (a bundle can be
// downloaded).
func (s *Server) hasReport(ctx context.Context, run store.Run) bool { return false }
