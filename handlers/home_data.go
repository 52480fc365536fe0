package handlers

import (
	"net/http"

	"github.com/accordlab/accord/web"
)

// recentRuns lists the newest runs of the viewer's programs.
func (s *Server) recentRuns(r *http.Request, v *viewer) ([]web.RecentRun, error) {
	runs, err := s.store.RecentRunsFor(r.Context(), v.ID, 10)
	if err != nil {
		return nil, err
	}
	out := make([]web.RecentRun, 0, len(runs))
	for _, run := range runs {
		out = append(out, web.RecentRun{ProgramID: run.ProgramID, RunID: run.ID, Label: run.DisplayLabel(), State: run.State, Verdict: run.Verdict})
	}
	return out, nil
}
