package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

type planBundle struct {
	st                 *store.Store
	program, other     int64
	vendorEng, custEng int64
	outsider           int64
	host               int64
	localPV, tcpPV     int64
}

var planSeeds = []store.IntegrationSeed{
	{Kind: "baseline", Title: "Baseline measurements"},
	{Kind: "network", Title: "Network preparation", CheckIDs: []string{"network.mtu", "network.link"}},
	{Kind: "qos", Title: "QoS and isolation"},
}

func setupPlan(t *testing.T) *planBundle {
	t.Helper()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	b := &planBundle{st: st}
	v, err := st.CreateOrganization(ctx, "V", "vendor")
	require.NoError(t, err)
	c, err := st.CreateOrganization(ctx, "C", "customer")
	require.NoError(t, err)
	b.program, err = st.CreateProgram(ctx, "P", "", v, c, nil)
	require.NoError(t, err)
	b.other, err = st.CreateProgram(ctx, "Q", "", v, c, nil)
	require.NoError(t, err)
	user := func(email string, org int64, program int64) int64 {
		id, err := st.CreateUser(ctx, store.NewUser{Email: email, DisplayName: email, PasswordHash: "x", OrganizationID: &org})
		require.NoError(t, err)
		_, err = st.SetMember(ctx, program, id, store.RoleEngineer)
		require.NoError(t, err)
		return id
	}
	b.vendorEng = user("v@example.com", v, b.program)
	b.custEng = user("c@example.com", c, b.program)
	b.outsider = user("o@example.com", v, b.other)
	b.host, err = st.CreateHost(ctx, b.program, store.NewHost{Name: "h", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	_, local, err := st.CreateSpec(ctx, store.KindProfile, b.program, store.NewSpecVersion{Name: "local", Spec: []byte(`{"storage":{"transport":"local-nvme"}}`), Digest: "sha256:a"})
	require.NoError(t, err)
	_, tcp, err := st.CreateSpec(ctx, store.KindProfile, b.program, store.NewSpecVersion{Name: "tcp", Spec: []byte(`{"storage":{"transport":"nvmeof-tcp"}}`), Digest: "sha256:b"})
	require.NoError(t, err)
	b.localPV, b.tcpPV = local.ID, tcp.ID
	return b
}

func (b *planBundle) run(t *testing.T, pv int64, state string) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := b.st.CreateRun(ctx, store.NewRun{ProgramID: b.program, ProfileVersionID: pv, HostID: b.host})
	require.NoError(t, err)
	if state != store.RunQueued {
		require.NoError(t, b.st.SetRunState(ctx, id, state, "test"))
	}
	return id
}

// Seeding is idempotent and per program; steps come back in order with
// their seeded checks, and another program's step is not found.
func TestPlanSeedListAndScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPlan(t)

	n, err := b.st.EnsureIntegrationSteps(ctx, b.program, planSeeds)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = b.st.EnsureIntegrationSteps(ctx, b.program, planSeeds)
	require.NoError(t, err)
	require.Zero(t, n, "a second view seeds nothing")

	steps, err := b.st.ListIntegrationSteps(ctx, b.program)
	require.NoError(t, err)
	require.Len(t, steps, 3)
	require.Equal(t, []string{"baseline", "network", "qos"}, []string{steps[0].Kind, steps[1].Kind, steps[2].Kind})
	require.Equal(t, store.StepNotStarted, steps[0].Status)
	require.Equal(t, []string{"network.link", "network.mtu"}, steps[1].CheckIDs)
	require.Empty(t, steps[0].RunIDs)
	require.Nil(t, steps[0].OwnerUserID)

	other, err := b.st.ListIntegrationSteps(ctx, b.other)
	require.NoError(t, err)
	require.Empty(t, other, "another program's plan is its own")
	_, err = b.st.GetIntegrationStep(ctx, b.other, steps[0].ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// An update replaces the evidence; owners must be members and runs the
// program's.
func TestPlanUpdateEvidenceAndOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPlan(t)
	_, err := b.st.EnsureIntegrationSteps(ctx, b.program, planSeeds)
	require.NoError(t, err)
	steps, err := b.st.ListIntegrationSteps(ctx, b.program)
	require.NoError(t, err)
	net := steps[1]
	r1 := b.run(t, b.tcpPV, store.RunDone)
	r2 := b.run(t, b.tcpPV, store.RunFailed)

	require.NoError(t, b.st.UpdateIntegrationStep(ctx, b.program, net.ID, store.IntegrationStepUpdate{
		OwnerUserID: &b.custEng, Status: store.StepInProgress, Note: "MTU 9000 on both ports",
		CheckIDs: []string{"network.rdma", "network.mtu", "network.mtu"}, RunIDs: []int64{r2, r1, r1}, UpdatedBy: b.vendorEng,
	}))
	got, err := b.st.GetIntegrationStep(ctx, b.program, net.ID)
	require.NoError(t, err)
	require.Equal(t, store.StepInProgress, got.Status)
	require.Equal(t, "MTU 9000 on both ports", got.Note)
	require.Equal(t, []string{"network.mtu", "network.rdma"}, got.CheckIDs)
	require.Equal(t, []int64{r1, r2}, got.RunIDs)
	require.Equal(t, b.custEng, *got.OwnerUserID)
	require.Equal(t, "c@example.com", got.OwnerName)
	require.Equal(t, "customer", got.OwnerOrgKind)
	require.Equal(t, "v@example.com", got.UpdatedByName)

	// Clearing evidence empties both sets.
	require.NoError(t, b.st.UpdateIntegrationStep(ctx, b.program, net.ID, store.IntegrationStepUpdate{Status: store.StepInProgress, UpdatedBy: b.vendorEng}))
	got, err = b.st.GetIntegrationStep(ctx, b.program, net.ID)
	require.NoError(t, err)
	require.Empty(t, got.CheckIDs)
	require.Empty(t, got.RunIDs)
	require.Nil(t, got.OwnerUserID)

	// A member of another program cannot own the step.
	err = b.st.UpdateIntegrationStep(ctx, b.program, net.ID, store.IntegrationStepUpdate{OwnerUserID: &b.outsider, Status: store.StepDone})
	require.ErrorIs(t, err, store.ErrNotFound)
	// Another program's run is not evidence here.
	otherHost, err := b.st.CreateHost(ctx, b.other, store.NewHost{Name: "h", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	_, otherPV, err := b.st.CreateSpec(ctx, store.KindProfile, b.other, store.NewSpecVersion{Name: "p", Spec: []byte(`{}`), Digest: "sha256:c"})
	require.NoError(t, err)
	foreign, err := b.st.CreateRun(ctx, store.NewRun{ProgramID: b.other, ProfileVersionID: otherPV.ID, HostID: otherHost})
	require.NoError(t, err)
	err = b.st.UpdateIntegrationStep(ctx, b.program, net.ID, store.IntegrationStepUpdate{Status: store.StepDone, RunIDs: []int64{r1, foreign}})
	require.ErrorIs(t, err, store.ErrNotFound)
	// Another program's step is not found through this program.
	err = b.st.UpdateIntegrationStep(ctx, b.other, net.ID, store.IntegrationStepUpdate{Status: store.StepDone})
	require.ErrorIs(t, err, store.ErrNotFound)
	// The database refuses an unknown status.
	require.Error(t, b.st.UpdateIntegrationStep(ctx, b.program, net.ID, store.IntegrationStepUpdate{Status: "finished"}))
}

// Only a done step is signed off, once per side; withdrawing clears both.
func TestPlanSignOffs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPlan(t)
	_, err := b.st.EnsureIntegrationSteps(ctx, b.program, planSeeds)
	require.NoError(t, err)
	steps, err := b.st.ListIntegrationSteps(ctx, b.program)
	require.NoError(t, err)
	step := steps[2]

	require.ErrorIs(t, b.st.SignOffIntegrationStep(ctx, b.program, step.ID, store.SideVendor, b.vendorEng), store.ErrStepNotDone)
	require.NoError(t, b.st.UpdateIntegrationStep(ctx, b.program, step.ID, store.IntegrationStepUpdate{Status: store.StepDone, UpdatedBy: b.vendorEng}))
	require.NoError(t, b.st.SignOffIntegrationStep(ctx, b.program, step.ID, store.SideVendor, b.vendorEng))
	require.ErrorIs(t, b.st.SignOffIntegrationStep(ctx, b.program, step.ID, store.SideVendor, b.vendorEng), store.ErrConflict)
	require.NoError(t, b.st.SignOffIntegrationStep(ctx, b.program, step.ID, store.SideCustomer, b.custEng))
	require.ErrorIs(t, b.st.SignOffIntegrationStep(ctx, b.other, step.ID, store.SideCustomer, b.custEng), store.ErrNotFound)

	got, err := b.st.GetIntegrationStep(ctx, b.program, step.ID)
	require.NoError(t, err)
	require.Len(t, got.SignOffs, 2)
	v, ok := got.SignOff(store.SideVendor)
	require.True(t, ok)
	require.Equal(t, "v@example.com", v.Email)
	c, ok := got.SignOff(store.SideCustomer)
	require.True(t, ok)
	require.Equal(t, b.custEng, c.UserID)
	list, err := b.st.ListIntegrationSteps(ctx, b.program)
	require.NoError(t, err)
	require.Len(t, list[2].SignOffs, 2)
	require.Empty(t, list[0].SignOffs)

	n, err := b.st.ClearStepSignOffs(ctx, b.other, step.ID)
	require.NoError(t, err)
	require.Zero(t, n, "another program cannot withdraw them")
	n, err = b.st.ClearStepSignOffs(ctx, b.program, step.ID)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	got, err = b.st.GetIntegrationStep(ctx, b.program, step.ID)
	require.NoError(t, err)
	require.Empty(t, got.SignOffs)
}

// Only finished runs of a local-nvme profile count as a local baseline.
func TestFinishedRunsOnTransport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupPlan(t)
	runs, err := b.st.FinishedRunsOnTransport(ctx, b.program, "local-nvme")
	require.NoError(t, err)
	require.Empty(t, runs)

	b.run(t, b.localPV, store.RunFailed)
	b.run(t, b.localPV, store.RunQueued)
	b.run(t, b.tcpPV, store.RunDone)
	runs, err = b.st.FinishedRunsOnTransport(ctx, b.program, "local-nvme")
	require.NoError(t, err)
	require.Empty(t, runs, "failed, unfinished and TCP runs are not a local baseline")

	done := b.run(t, b.localPV, store.RunDone)
	runs, err = b.st.FinishedRunsOnTransport(ctx, b.program, "local-nvme")
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, done, runs[0].ID)
	other, err := b.st.FinishedRunsOnTransport(ctx, b.other, "local-nvme")
	require.NoError(t, err)
	require.Empty(t, other)

	// Which profiles ran on which host, whatever the outcome.
	ran, err := b.st.ProfilesRunOnHosts(ctx, b.program)
	require.NoError(t, err)
	localSpec, err := b.st.GetSpecVersionByID(ctx, store.KindProfile, b.program, b.localPV)
	require.NoError(t, err)
	tcpSpec, err := b.st.GetSpecVersionByID(ctx, store.KindProfile, b.program, b.tcpPV)
	require.NoError(t, err)
	require.Equal(t, map[int64]map[int64]bool{b.host: {localSpec.SpecID: true, tcpSpec.SpecID: true}}, ran)
	none, err := b.st.ProfilesRunOnHosts(ctx, b.other)
	require.NoError(t, err)
	require.Empty(t, none)
}
