package runsubmit_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/service/runsubmit"
	"github.com/accordlab/accord/service/servicetest"
	"github.com/accordlab/accord/store"
)

// submitBundle is a program with a fio profile reading and writing under
// /srv/scratch, a gate set that fits it, a pinned host that lets tests
// write there, and an engineer, on a transaction rolled back at the
// test's end.
type submitBundle struct {
	st       *store.Store
	env      runsubmit.Env
	program  servicetest.Program
	profile  store.SpecVersion
	gates    store.SpecVersion
	host     int64
	engineer store.User
}

const pinnedKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly"

func setup(t *testing.T) *submitBundle {
	t.Helper()
	st := servicetest.Store(t)
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{}) // inserts in transactions only
	require.NoError(t, err)
	b := &submitBundle{st: st, env: runsubmit.Env{Queue: jobs.NewQueue(client)}, program: servicetest.NewProgram(t, st)}
	b.profile = b.program.Profile(t, st, acceptance.ProfileSpec{
		Name: "kv reads", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe}, Repetitions: 1,
		Steps: []acceptance.StepSpec{{Name: "read", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: "randrw", BlockSize: 4 << 10, IODepth: 32, NumJobs: 1,
			Size: 1 << 30, Runtime: acceptance.Duration(time.Minute), IOEngine: "libaio", Target: "/srv/scratch/kv.dat"}}},
	})
	b.gates = b.program.GateSet(t, st, acceptance.GateSetSpec{Name: "reads", Criteria: []acceptance.Criterion{{
		Name: "read-p99", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 2000, Unit: "us", Severity: acceptance.Blocking}}})
	b.host = b.pinnedHost(t, "lab-01", "/srv/scratch")
	b.engineer = b.program.Member(t, st, "eng", b.program.Vendor, store.RoleEngineer)
	return b
}

// pinnedHost registers a host with its key confirmed that lets tests
// write in places.
func (b *submitBundle) pinnedHost(t *testing.T, name string, places ...string) int64 {
	t.Helper()
	ctx := context.Background()
	id := b.program.Host(t, b.st, name)
	require.NoError(t, b.st.PinHostKeys(ctx, b.program.ID, id, pinnedKey, "SHA256:fake", nil))
	require.NoError(t, b.st.SetHostWritePlaces(ctx, b.program.ID, id, places, false))
	return id
}

func (b *submitBundle) request() runsubmit.Request {
	return runsubmit.Request{ProgramID: b.program.ID, ProfileVersionID: b.profile.ID, GateSetVersionID: b.gates.ID, HostID: b.host,
		Label: "  nightly  ", By: runsubmit.Actor{UserID: b.engineer.ID, Email: b.engineer.Email, ClientAddr: "192.0.2.7"}}
}

func (b *submitBundle) enqueued(t *testing.T) []int64 {
	t.Helper()
	return servicetest.Enqueued(t, b.st, "execute_run")
}

// A request that passes the checks becomes a queued run with its River
// job, the job's id on the run, the pre-run warnings kept, and an audit
// entry, all in one transaction.
func TestSubmitInsertsTheRunWithItsJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	req := b.request()
	req.Warnings = []acceptance.RunWarning{{Kind: "no-baseline", Message: "no baseline: the gates judge absolute thresholds only"}}
	res, err := runsubmit.Submit(ctx, b.st, b.env, req)
	require.NoError(t, err)
	require.True(t, res.Started())
	require.Empty(t, res.Errors)
	require.Equal(t, []int64{res.RunID}, b.enqueued(t))

	run, err := b.st.GetRun(ctx, b.program.ID, res.RunID)
	require.NoError(t, err)
	require.Equal(t, store.RunQueued, run.State)
	require.Equal(t, "nightly", run.Label)
	require.NotNil(t, run.RiverJobID, "the run keeps its job")
	require.Equal(t, b.gates.ID, *run.GateSetVersionID)
	require.False(t, run.Emulated)
	var kept []acceptance.RunWarning
	require.NoError(t, json.Unmarshal(run.Warnings, &kept))
	require.Equal(t, req.Warnings, kept)

	audit, err := b.st.ListAudit(ctx, store.AuditFilter{ProgramID: &b.program.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, audit, 1)
	require.Equal(t, "run_submitted", audit[0].Action)
	require.Equal(t, b.engineer.Email, audit[0].ActorLabel)
	require.Equal(t, "192.0.2.7", audit[0].ClientAddr)
}

// What the checks find comes back by form field, and nothing is inserted.
func TestSubmitRefusesWhatTheChecksFind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	unpinned := b.program.Host(t, b.st, "unpinned")
	elsewhere := b.pinnedHost(t, "elsewhere", "/data")
	running := b.program.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host})
	for name, tc := range map[string]struct {
		change      func(*runsubmit.Request)
		field, says string
	}{
		"another program's profile": {func(r *runsubmit.Request) { r.ProfileVersionID = 1 << 40 }, "profile_version", "Choose a profile version of this program."},
		"unknown host":              {func(r *runsubmit.Request) { r.HostID = 1 << 40 }, "host", "Choose a lab host of this program."},
		"unpinned host":             {func(r *runsubmit.Request) { r.HostID = unpinned }, "host", "Confirm this host's key first"},
		"writes outside its places": {func(r *runsubmit.Request) { r.HostID = elsewhere }, "host", "Refused: "},
		"roles for one host":        {func(r *runsubmit.Request) { r.Roles = map[string][]int64{"client": {b.host}} }, "roles", "This profile runs on one host"},
		"unknown gate set":          {func(r *runsubmit.Request) { r.GateSetVersionID = 1 << 40 }, "gate_set_version", "Choose a gate set version of this program."},
		"unfinished baseline":       {func(r *runsubmit.Request) { r.BaselineRunID = running.ID }, "baseline", "The baseline must be a finished run."},
		"long label":                {func(r *runsubmit.Request) { r.Label = strings.Repeat("x", 201) }, "label", "At most 200 characters."},
	} {
		req := b.request()
		tc.change(&req)
		res, err := runsubmit.Submit(ctx, b.st, b.env, req)
		require.NoError(t, err, name)
		require.False(t, res.Started(), name)
		require.Contains(t, res.Errors[tc.field], tc.says, name)
	}
	require.Empty(t, b.enqueued(t), "no job for a refused request")
}

// A host that fails blocking readiness checks holds the run until the
// request confirms them; the confirmed run keeps the override.
func TestSubmitWaitsForReadinessToBeConfirmed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.env.Readiness = func(_ context.Context, h store.Host, _ json.RawMessage) ([]string, error) {
		return []string{"fio: not installed on " + h.Name}, nil
	}
	res, err := runsubmit.Submit(ctx, b.st, b.env, b.request())
	require.NoError(t, err)
	require.False(t, res.Started())
	require.Equal(t, []string{"fio: not installed on lab-01"}, res.Readiness)
	require.Empty(t, b.enqueued(t))

	req := b.request()
	req.ConfirmReadiness = true
	res, err = runsubmit.Submit(ctx, b.st, b.env, req)
	require.NoError(t, err)
	require.True(t, res.Started())
	run, err := b.st.GetRun(ctx, b.program.ID, res.RunID)
	require.NoError(t, err)
	var override struct {
		ConfirmedBy   string   `json:"confirmed_by"`
		FailingChecks []string `json:"failing_checks"`
	}
	require.NoError(t, json.Unmarshal(run.ReadinessOverride, &override))
	require.Equal(t, b.engineer.Email, override.ConfirmedBy)
	require.Equal(t, []string{"fio: not installed on lab-01"}, override.FailingChecks)
}
