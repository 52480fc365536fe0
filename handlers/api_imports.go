package handlers

import (
	"fmt"
	"net/http"
)

// apiImportResult imports a tool's result file as a run (multipart form:
// file, profile_version, and optionally format, step, gate_set_version,
// baseline, label), as the import page does: 201 with the run and the
// import's report (what was read, what was ignored and why, the tool's
// figures beside Accord's); 422 when the file or the form cannot be used,
// and then nothing is kept.
func (s *Server) apiImportResult(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		writeJSON(w, status, apiError{Error: msg, RequestID: requestID(r.Context())})
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxResultUpload+1<<20)
	cleanup, err := parseUpload(r, 1<<20)
	defer cleanup()
	if err != nil {
		status := uploadRefusal(err)
		msg := fmt.Sprintf("the body is larger than %d MiB, the most a result import takes", maxResultUpload>>20)
		if status == http.StatusBadRequest {
			msg = "the body must be a well-formed multipart form (multipart/form-data) with the result file"
		}
		fail(status, msg)
		return
	}
	t, problem, err := s.importTargetFrom(r)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if problem != "" {
		fail(http.StatusUnprocessableEntity, problem)
		return
	}
	runID, rep, problem, err := s.importResult(r, t)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if problem != "" {
		fail(http.StatusUnprocessableEntity, problem)
		return
	}
	run, err := s.store.GetRun(r.Context(), programFrom(r.Context()).ID, runID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"run": s.toAPIRun(run), "report": rep})
}
