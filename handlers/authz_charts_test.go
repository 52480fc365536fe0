package handlers

import "testing"

// chartRouteCases are the charts routes of the authorization matrix.
var chartRouteCases = []routeCase{}

// addChartObjects creates the charts objects the matrix's routes need, in
// program A (f.ids) and program B (f.idsB).
func (f *matrixFixture) addChartObjects(t *testing.T) {
	t.Helper()
}
