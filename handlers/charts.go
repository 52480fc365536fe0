package handlers

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// chartRoutes declares the compare and trend pages.
func (s *Server) chartRoutes(r chi.Router) {}

// runCharts returns the run page's charts, from the aggregates
// precomputed at ingest.
func (s *Server) runCharts(r *http.Request, run store.Run) ([]web.ChartBlock, error) { return nil, nil }
