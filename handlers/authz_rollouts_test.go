package handlers

import "testing"

// rolloutRouteCases are the rollouts routes of the authorization matrix.
var rolloutRouteCases = []routeCase{}

// addRolloutObjects creates the rollouts objects the matrix's routes need, in
// program A (f.ids) and program B (f.idsB).
func (f *matrixFixture) addRolloutObjects(t *testing.T) {
	t.Helper()
}
