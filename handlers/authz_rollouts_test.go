package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

// rolloutRouteCases are the rollouts routes of the authorization matrix.
// Empty bodies never change a rollout: every decision without its reason
// (or with failing gates) is refused by the rules (422), stage removal needs
// its confirmation box.
var rolloutRouteCases = []routeCase{
	rc("GET", "/programs/{programID}/rollout", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/rollout/plan", inProgramNeeds(capOwner)),
	rc("POST", "/programs/{programID}/rollout/stages", inProgramNeeds(capOwner), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/rollout/stages/{stageID}/edit", inProgramNeeds(capOwner), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/rollout/stages/{stageID}/delete", inProgramNeeds(capOwner), http.StatusUnprocessableEntity),
	rc("GET", "/programs/{programID}/rollout/stages/{stageID}/watch", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/rollout/stages/{stageID}/watch/checks.csv", inProgramNeeds(capView)),
	rc("POST", "/programs/{programID}/rollout/stages/{stageID}/watch", inProgramNeeds(capOwner), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/rollout/stages/{stageID}/watch/delete", inProgramNeeds(capOwner), http.StatusSeeOther),
	rc("GET", "/programs/{programID}/rollout/stages/{stageID}/approve", inProgramNeeds(capApprove)),
	rc("POST", "/programs/{programID}/rollout/stages/{stageID}/approve", inProgramNeeds(capApprove), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/rollout/stages/{stageID}/waive", inProgramNeeds(capApprove), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/rollout/stages/{stageID}/reject", inProgramNeeds(capApprove), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/rollout/stages/{stageID}/resume", inProgramNeeds(capApprove), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/rollout/stages/{stageID}/halt", inProgramNeeds(capHalt), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/rollout/rollback", inProgramNeeds(capApprove), http.StatusUnprocessableEntity),
	rc("GET", "/programs/{programID}/decisions", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/decisions/export", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/decisions/head.json", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/webhooks", inProgramNeeds(capOwner)),
	rc("POST", "/programs/{programID}/webhooks", inProgramNeeds(capOwner), http.StatusUnprocessableEntity),
	rc("GET", "/programs/{programID}/webhooks/{webhookID}", inProgramNeeds(capOwner)),
	rc("POST", "/programs/{programID}/webhooks/{webhookID}/disable", inProgramNeeds(capOwner), http.StatusSeeOther),
	rc("POST", "/programs/{programID}/webhooks/{webhookID}/enable", inProgramNeeds(capOwner), http.StatusSeeOther),
	rc("POST", "/programs/{programID}/webhooks/{webhookID}/deliveries/{deliveryID}/redeliver", inProgramNeeds(capOwner), http.StatusSeeOther),
	rc("GET", "/api/v1/programs/{programID}/rollout", apiInProgramNeeds(capView)),
	rc("POST", "/api/v1/programs/{programID}/rollout/decisions", apiInProgramNeeds(capHalt), http.StatusUnprocessableEntity),
	rc("GET", "/api/v1/programs/{programID}/decisions", apiInProgramNeeds(capView)),
	rc("GET", "/api/v1/programs/{programID}/decisions/export", apiInProgramNeeds(capView)),
	rc("GET", "/api/v1/programs/{programID}/decisions/head", apiInProgramNeeds(capView)),
}

// addRolloutObjects creates the rollouts objects the matrix's routes need, in
// program A (f.ids) and program B (f.idsB): a stage whose gates have no run
// yet, and a webhook.
func (f *matrixFixture) addRolloutObjects(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, side := range []struct {
		program int64
		ids     map[string]string
	}{{f.programA, f.ids}, {f.programB, f.idsB}} {
		profile := f.createProfile(t, side.program)
		gates := f.createGateSet(t, side.program)
		gv, err := f.b.store.GetSpecVersion(ctx, store.KindGateSet, side.program, gates, 0)
		require.NoError(t, err)
		stage, err := f.b.store.AddRolloutStage(ctx, side.program, "pilot", store.StageGates{GateSetVersionID: gv.ID,
			Profiles: []store.StageProfile{{ProfileID: profile}}}, 0)
		require.NoError(t, err)
		side.ids["rollout/stages/{stageID}"] = fmt.Sprintf("rollout/stages/%d", stage)
		_, err = f.b.store.SetWatch(ctx, side.program, stage, store.NewWatch{Name: "p99 TTFT", Endpoint: "http://127.0.0.1:9/prom", Query: "up",
			Comparator: "<=", Line: 2, Unit: "s", Consecutive: 3, IntervalSeconds: 30})
		require.NoError(t, err)
		hook, err := f.b.store.CreateWebhook(ctx, side.program, "http://127.0.0.1:9/hook", []string{store.EventStageHalted}, 0)
		require.NoError(t, err)
		side.ids["webhooks/{webhookID}"] = "webhooks/" + strconv.FormatInt(hook, 10)
		delivery, err := f.b.store.CreateDelivery(ctx, hook, side.program, store.EventStageHalted, nil, []byte(`{}`))
		require.NoError(t, err)
		side.ids["deliveries/{deliveryID}"] = "deliveries/" + strconv.FormatInt(delivery, 10)
	}
}
