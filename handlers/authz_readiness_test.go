package handlers

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// readinessRouteCases are the readiness routes of the authorization matrix.
var readinessRouteCases = []routeCase{
	rc("GET", "/programs/{programID}/readiness", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/readiness/hosts/{hostID}", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/readiness/plan", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/readiness/plan/steps/{planStepID}", inProgramNeeds(capView)),
	// An empty form has no status; an empty sign-off is for a step not done.
	rc("POST", "/programs/{programID}/readiness/plan/steps/{planStepID}", inProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/readiness/plan/steps/{planStepID}/signoff", inProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
}

// addReadinessObjects creates the readiness objects the matrix's routes need, in
// program A (f.ids) and program B (f.idsB): each program's plan, seeded.
func (f *matrixFixture) addReadinessObjects(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, side := range []struct {
		program int64
		ids     map[string]string
	}{{f.programA, f.ids}, {f.programB, f.idsB}} {
		_, err := f.b.store.EnsureIntegrationSteps(ctx, side.program, integrationSequence)
		require.NoError(t, err)
		steps, err := f.b.store.ListIntegrationSteps(ctx, side.program)
		require.NoError(t, err)
		side.ids["planStepID"] = fmt.Sprint(steps[0].ID)
	}
}
