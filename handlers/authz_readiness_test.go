package handlers

import "testing"

// readinessRouteCases are the readiness routes of the authorization matrix.
var readinessRouteCases = []routeCase{}

// addReadinessObjects creates the readiness objects the matrix's routes need, in
// program A (f.ids) and program B (f.idsB).
func (f *matrixFixture) addReadinessObjects(t *testing.T) {
	t.Helper()
}
