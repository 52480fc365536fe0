package handlers

import (
	"context"
	"net/http"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// TODO(issue 11): readiness checks from host facts.
func (s *Server) blockingReadinessFailures(ctx context.Context, h store.Host) ([]string, error) {
	return nil, nil
}

// TODO(issue 8): charts.
func (s *Server) runCharts(r *http.Request, run store.Run) ([]web.ChartBlock, error) { return nil, nil }

// TODO(issue 9): signed reports.
func (s *Server) hasReport(ctx context.Context, run store.Run) bool { return false }
