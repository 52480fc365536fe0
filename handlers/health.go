package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/accordlab/accord/store"
)

// showHealth answers while the process is alive.
func (s *Server) showHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

type readyState struct {
	Ready      bool   `json:"ready"`
	Database   string `json:"database"`
	Migrations string `json:"migrations"`
}

// showReadiness answers 200 only when the database is reachable and every
// migration is applied; the body says which part is not ready, without
// internal error text.
func (s *Server) showReadiness(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	res := readyState{Database: "ok", Migrations: "current"}
	if err := s.pool.Ping(ctx); err != nil {
		s.log.Warn("readiness: database unreachable", "err", err)
		res.Database, res.Migrations = "unreachable", "unknown"
		writeJSON(w, http.StatusServiceUnavailable, res)
		return
	}
	st, err := store.Status(ctx, s.pool)
	switch {
	case err != nil:
		s.log.Warn("readiness: migration status", "err", err)
		res.Migrations = "error"
	case !st.Current():
		res.Migrations = "pending"
	default:
		res.Ready = true
	}
	status := http.StatusOK
	if !res.Ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, res)
}
