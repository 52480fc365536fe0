package handlers

import (
	"net/http"
	"testing"
)

// chartRouteCases are the charts routes of the authorization matrix. Both
// pages answer without parameters (a form to choose runs or a profile);
// the runs and profiles they are given are loaded within the caller's
// program (charts_test.go checks that another program's answer 404).
var chartRouteCases = []routeCase{
	rc("GET", "/programs/{programID}/compare", inProgramNeeds(capView), http.StatusOK),
	rc("GET", "/programs/{programID}/trend", inProgramNeeds(capView), http.StatusOK),
}

// addChartObjects creates the charts objects the matrix's routes need, in
// program A (f.ids) and program B (f.idsB): none, their routes take no
// path parameter.
func (f *matrixFixture) addChartObjects(t *testing.T) {
	t.Helper()
}
