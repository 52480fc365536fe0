package handlers

import "testing"

// reportRouteCases are the reports routes of the authorization matrix.
var reportRouteCases = []routeCase{}

// addReportObjects creates the reports objects the matrix's routes need, in
// program A (f.ids) and program B (f.idsB).
func (f *matrixFixture) addReportObjects(t *testing.T) {
	t.Helper()
}
