package handlers

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// addObjects creates one object of each kind in program A (f.ids) and in
// program B (f.idsB), keyed by the path piece that names them.
func (f *matrixFixture) addObjects(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, side := range []struct {
		program int64
		ids     map[string]string
	}{{f.programA, f.ids}, {f.programB, f.idsB}} {
		profile := f.createProfile(t, side.program)
		side.ids["profiles/{specID}"] = fmt.Sprintf("profiles/%d", profile)
		gates := f.createGateSet(t, side.program)
		side.ids["gatesets/{specID}"] = fmt.Sprintf("gatesets/%d", gates)
		host, err := f.b.store.CreateHost(ctx, side.program, store.NewHost{Name: "lab", Address: "127.0.0.1", Port: 1, Username: "root", AuthMethod: "key"})
		require.NoError(t, err)
		side.ids["hostID"] = fmt.Sprint(host)
		pv, err := f.b.store.GetSpecVersion(ctx, store.KindProfile, side.program, profile, 0)
		require.NoError(t, err)
		side.ids["profile-versions/{versionID}"] = fmt.Sprintf("profile-versions/%d", pv.ID)
		gv, err := f.b.store.GetSpecVersion(ctx, store.KindGateSet, side.program, gates, 0)
		require.NoError(t, err)
		side.ids["gateset-versions/{versionID}"] = fmt.Sprintf("gateset-versions/%d", gv.ID)
		run, err := f.b.store.CreateRun(ctx, store.NewRun{ProgramID: side.program, ProfileVersionID: pv.ID, HostID: host})
		require.NoError(t, err)
		// A settled run, so that its live stream answers at once.
		require.NoError(t, f.b.store.SetRunState(ctx, run, store.RunCancelled, "fixture"))
		addRunFile(t, f.b.store, run, "events.jsonl", "{\"seq\":1}\n")
		side.ids["runID"] = fmt.Sprint(run)
	}
	f.addReportObjects(t)
	f.addChartObjects(t)
	f.addReadinessObjects(t)
	f.addRolloutObjects(t)
}

func (f *matrixFixture) createProfile(t *testing.T, program int64) int64 {
	t.Helper()
	tmpl, _ := acceptance.LookupProfileTemplate("kv-cache-lookup")
	_, nv, errs, err := prepareSpec(profileOps, tmpl.Spec)
	require.NoError(t, err)
	require.Empty(t, errs)
	sp, _, err := f.b.store.CreateSpec(context.Background(), store.KindProfile, program, nv)
	require.NoError(t, err)
	return sp.ID
}

func (f *matrixFixture) createGateSet(t *testing.T, program int64) int64 {
	t.Helper()
	tmpl, _ := acceptance.LookupGateSetTemplate("mlperf-llama2-70b-server")
	_, nv, errs, err := prepareSpec(gateSetOps, tmpl.Spec)
	require.NoError(t, err)
	require.Empty(t, errs)
	sp, _, err := f.b.store.CreateSpec(context.Background(), store.KindGateSet, program, nv)
	require.NoError(t, err)
	return sp.ID
}
