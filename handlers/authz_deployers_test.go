package handlers

import "net/http"

// The deployers' routes take a token with the deploy scope; in the matrix
// each caller sends one of their own (see matrixFixture.do). A POST with
// no payload is refused once the caller is known (400).
var deployRouteCases = []routeCase{
	rc("GET", "/api/v1/deploy/programs/{programID}/stages/{stage}/", deployInProgram),
	rc("POST", "/api/v1/deploy/programs/{programID}/stages/{stage}/flagger/confirm-rollout", deployInProgram, http.StatusBadRequest),
	rc("POST", "/api/v1/deploy/programs/{programID}/stages/{stage}/flagger/confirm-promotion", deployInProgram, http.StatusBadRequest),
	rc("POST", "/api/v1/deploy/programs/{programID}/stages/{stage}/flagger/rollback", deployInProgram, http.StatusBadRequest),
}

// deployInProgram: a deploy token of a member (or of a site admin), who may
// view the program.
var deployInProgram = protection{kind: "deploy", cap: capView}
