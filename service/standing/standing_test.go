package standing_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/service/servicetest"
	"github.com/accordlab/accord/service/standing"
	"github.com/accordlab/accord/store"
)

// bundle is a program with a two-stage plan judged by one gate set on one
// profile, and a member of each role on each side.
type bundle struct {
	st                         *store.Store
	env                        rollout.Env
	p                          servicetest.Program
	profile, gates             store.SpecVersion
	host                       int64
	vendorEng, vendorApprover  store.User
	custEng, custApprover      store.User
	custViewer                 store.User
	vendorActor, customerActor acceptance.Actor
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	st := servicetest.Store(t)
	b := &bundle{st: st, env: servicetest.Env(t), p: servicetest.NewProgram(t, st)}
	b.profile = b.p.Profile(t, st, acceptance.ProfileSpec{
		Name: "kv reads", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe}, Repetitions: 1,
		Steps: []acceptance.StepSpec{{Name: "read", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: "randread", BlockSize: 4 << 10, IODepth: 32, NumJobs: 1,
			Size: 1 << 30, Runtime: acceptance.Duration(time.Minute), IOEngine: "libaio", Target: "/srv/scratch/kv.dat"}}},
	})
	b.gates = b.p.GateSet(t, st, acceptance.GateSetSpec{Name: "reads", Criteria: []acceptance.Criterion{{
		Name: "read-p99", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 2000, Unit: "us", Severity: acceptance.Blocking}}})
	for _, name := range []string{"lab", "pilot"} {
		_, err := st.AddRolloutStage(ctx, b.p.ID, name, store.StageGates{GateSetVersionID: b.gates.ID,
			Profiles: []store.StageProfile{{ProfileID: b.profile.SpecID}}}, 0)
		require.NoError(t, err)
	}
	b.host = b.p.Host(t, st, "lab")
	b.vendorEng = b.p.Member(t, st, "vera", b.p.Vendor, store.RoleEngineer)
	b.vendorApprover = b.p.Member(t, st, "victor", b.p.Vendor, store.RoleApprover)
	b.custEng = b.p.Member(t, st, "clara", b.p.Customer, store.RoleEngineer)
	b.custApprover = b.p.Member(t, st, "carl", b.p.Customer, store.RoleApprover)
	b.custViewer = b.p.Member(t, st, "vic", b.p.Customer, store.RoleViewer)
	b.vendorActor = acceptance.Actor{UserID: b.vendorApprover.Email, OrgKind: acceptance.OrgVendor, Approver: true}
	b.customerActor = acceptance.Actor{UserID: b.custApprover.Email, OrgKind: acceptance.OrgCustomer, Approver: true}
	return b
}

// judged stores a finished run of the profile by the vendor's engineer,
// judged by the gate set with verdict.
func (b *bundle) judged(t *testing.T, verdict string) store.Run {
	t.Helper()
	ctx := context.Background()
	run := b.p.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, GateSetVersionID: &b.gates.ID, CreatedBy: b.vendorEng.ID})
	canon := []byte(fmt.Sprintf(`{"run":%d}`, run.ID))
	sum := sha256.Sum256(canon)
	_, err := b.st.SaveEvaluation(ctx, store.StoredEvaluation{RunID: run.ID, GateSetVersionID: b.gates.ID, Overall: verdict, Result: canon, Canonical: canon,
		Digest: "sha256:" + hex.EncodeToString(sum[:]), EngineVersion: "test"})
	require.NoError(t, err)
	require.NoError(t, b.st.SetRunState(ctx, run.ID, store.RunDone, "verdict: "+verdict))
	run, err = b.st.RunByID(ctx, run.ID)
	require.NoError(t, err)
	return run
}

func (b *bundle) read(t *testing.T) standing.Standing {
	t.Helper()
	s, err := standing.Read(context.Background(), b.st, b.p.ID)
	require.NoError(t, err)
	return s
}

// texts are the waits' words, for a member or (who nil) everyone.
func (b *bundle) texts(s standing.Standing, who *store.User, role store.Role) []string {
	out := []string{}
	for _, w := range s.Waits {
		if who != nil && !w.For(acceptance.OrgKind(who.OrgKind), who.ID, roleHas(role)) {
			continue
		}
		out = append(out, w.Text)
	}
	return out
}

// roleHas is the roles' needs as the handlers grant them.
func roleHas(role store.Role) func(standing.Need) bool {
	return func(n standing.Need) bool {
		switch n {
		case standing.NeedEngineer:
			return role == store.RoleEngineer || role == store.RoleOwner
		case standing.NeedApprover:
			return role == store.RoleApprover || role == store.RoleOwner
		case standing.NeedOwner:
			return role == store.RoleOwner
		}
		return false
	}
}

func (b *bundle) decide(t *testing.T, kind acceptance.DecisionKind, stage string, who acceptance.Actor, reason string) {
	t.Helper()
	_, err := rollout.RecordDecision(context.Background(), b.st, b.env, rollout.DecisionInput{ProgramID: b.p.ID, Kind: kind, Stage: stage, Actor: who, Reason: reason})
	require.NoError(t, err)
}

// Without a run the current stage awaits a qualifying run from an
// engineer, and each side's approver only once its gates pass.
func TestStageAwaitsAQualifyingRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.read(t)
	require.Empty(t, s.Judged)
	require.True(t, s.Rollout.Planned)
	require.Equal(t, acceptance.RolloutInProgress, s.Rollout.Status)
	cur := s.Rollout.Current
	require.NotNil(t, cur)
	require.Equal(t, 1, cur.Position)
	require.Equal(t, "lab", cur.Stage.Name)
	require.Equal(t, "awaiting a qualifying run", cur.Label)
	require.Len(t, cur.Qualifying, 1)
	require.Equal(t, b.profile.ID, cur.Qualifying[0].ProfileVersionID)
	require.Empty(t, cur.Qualifying[0].Runs)

	require.Equal(t, []string{
		"stage 1, lab, awaits a qualifying run: kv reads judged by reads v1 (an engineer of either side)",
		"stage 1, lab, awaits the vendor approver: an approval once its gates pass, or a waiver with a reason",
		"stage 1, lab, awaits the customer approver: an approval once its gates pass, or a waiver with a reason",
	}, b.texts(s, nil, ""))
	q := s.Waits[0]
	require.Equal(t, standing.KindQualifyingRun, q.Kind)
	require.Equal(t, b.profile.ID, q.ProfileVersionID)
	require.Equal(t, b.gates.ID, q.GateSetVersionID)

	// Each member sees what is theirs: engineers of both sides the run,
	// each approver their side's approval, the viewer nothing.
	require.Equal(t, []string{s.Waits[0].Text}, b.texts(s, &b.custEng, store.RoleEngineer))
	require.Equal(t, []string{s.Waits[0].Text}, b.texts(s, &b.vendorEng, store.RoleEngineer))
	require.Equal(t, []string{s.Waits[1].Text}, b.texts(s, &b.vendorApprover, store.RoleApprover))
	require.Equal(t, []string{s.Waits[2].Text}, b.texts(s, &b.custApprover, store.RoleApprover))
	require.Empty(t, b.texts(s, &b.custViewer, store.RoleViewer))

	// A run on its way counts once judged; a failed one never does.
	queued := b.p.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, GateSetVersionID: &b.gates.ID})
	other := b.p.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host}) // judged by no gate set
	failed := b.p.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, GateSetVersionID: &b.gates.ID})
	require.NoError(t, b.st.SetRunState(context.Background(), failed.ID, store.RunFailed, "host unreachable"))
	s = b.read(t)
	runs := s.Rollout.Current.Qualifying[0].Runs
	require.Len(t, runs, 1)
	require.Equal(t, queued.ID, runs[0].ID)
	require.NotEqual(t, other.ID, runs[0].ID)
	// With one on its way, the engineers are told so rather than invited
	// to start a second.
	require.Equal(t, fmt.Sprintf("stage 1, lab, awaits run #%d (queued), a qualifying run of kv reads that counts once judged by reads v1", queued.ID), s.Waits[0].Text)
	require.Equal(t, queued.ID, s.Waits[0].RunID)
}

// A qualifying run that fails leaves the gates not met; one that passes
// makes the approvals plain, and its report awaits the other side's
// co-signature until a member of that side gives it.
func TestGatesAndCoSignature(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	failed := b.judged(t, "FAIL")
	s := b.read(t)
	require.Equal(t, "gates not met", s.Rollout.Current.Label)
	require.Equal(t, fmt.Sprintf("stage 1, lab, awaits a qualifying run: kv reads judged by reads v1 (run #%d is FAIL) (an engineer of either side)", failed.ID), s.Waits[0].Text)
	require.Equal(t, []int64{failed.ID}, runIDs(s.Judged))

	passed := b.judged(t, "PASS")
	s = b.read(t)
	require.Equal(t, "awaiting approval", s.Rollout.Current.Label)
	require.Equal(t, []string{"stage 1, lab, awaits the vendor approver", "stage 1, lab, awaits the customer approver"}, b.texts(s, nil, ""),
		"no report yet: nothing to co-sign")
	require.Equal(t, []int64{passed.ID, failed.ID}, runIDs(s.Judged))
	require.Equal(t, []int64{passed.ID, failed.ID}, runIDs(s.Rollout.Current.Qualifying[0].Runs))

	// A stand-in bundle: what counts here is that a signed report exists.
	blob, err := b.st.Artifacts().Put(ctx, strings.NewReader("stand-in bundle of run "+fmt.Sprint(passed.ID)))
	require.NoError(t, err)
	report, err := b.st.AddRunReport(ctx, store.RunReport{RunID: passed.ID, BundleSHA256: blob.SHA256, Size: blob.Size, ManifestSHA256: "0", KeyID: "k"})
	require.NoError(t, err)
	s = b.read(t)
	want := fmt.Sprintf("run #%d's report awaits the customer's co-signature", passed.ID)
	require.Contains(t, b.texts(s, nil, ""), want)
	require.Contains(t, b.texts(s, &b.custEng, store.RoleEngineer), want)
	require.NotContains(t, b.texts(s, &b.vendorEng, store.RoleEngineer), want, "the requester's side does not co-sign")
	require.NotContains(t, b.texts(s, &b.custApprover, store.RoleApprover), want, "co-signing is an engineer's")

	key, err := b.st.AddUserSSHKey(ctx, store.UserSSHKey{UserID: b.custEng.ID, Name: "laptop", PublicKey: "ssh-ed25519 AAAA", Fingerprint: "SHA256:" + t.Name()})
	require.NoError(t, err)
	_, err = b.st.AddReportCosignature(ctx, store.ReportCosignature{RunID: passed.ID, ReportVersion: report.Version + 1, UserID: b.custEng.ID,
		OrganizationID: b.p.Customer, SSHKeyID: key.ID, Fingerprint: key.Fingerprint, FileName: "MANIFEST.sha256.clara.sig"})
	require.NoError(t, err)
	s = b.read(t)
	require.NotContains(t, b.texts(s, nil, ""), want)

	// The vendor approves: only the customer's approval is awaited.
	b.decide(t, acceptance.DecisionApprove, "lab", b.vendorActor, "")
	s = b.read(t)
	require.Equal(t, []string{"stage 1, lab, awaits the customer approver"}, b.texts(s, nil, ""))
	require.Empty(t, b.texts(s, &b.vendorApprover, store.RoleApprover))

	// Both approve: the pilot is current and its gates pass on the same run.
	b.decide(t, acceptance.DecisionApprove, "lab", b.customerActor, "")
	s = b.read(t)
	require.Equal(t, 2, s.Rollout.Current.Position)
	require.Equal(t, []string{"stage 2, pilot, awaits the vendor approver", "stage 2, pilot, awaits the customer approver"}, b.texts(s, nil, ""))

	// A halt waits for both sides' consent to resume.
	b.decide(t, acceptance.DecisionHalt, "pilot", acceptance.Actor{UserID: b.custViewer.Email, OrgKind: acceptance.OrgCustomer}, "TTFT spikes")
	s = b.read(t)
	require.Equal(t, acceptance.RolloutHalted, s.Rollout.Status)
	require.Equal(t, "halted", s.Rollout.Current.Label)
	require.Equal(t, []string{
		"stage 2, pilot, is halted: it awaits the vendor approver's consent to resume",
		"stage 2, pilot, is halted: it awaits the customer approver's consent to resume",
	}, b.texts(s, nil, ""))

	// A rollback ends the rollout: nothing waits.
	b.decide(t, acceptance.DecisionRollbackRequested, "", b.customerActor, "incident 7781")
	s = b.read(t)
	require.Equal(t, acceptance.RolloutRollbackRequested, s.Rollout.Status)
	require.NotNil(t, s.Rollout.Rollback)
	require.Empty(t, b.texts(s, nil, ""))
}

// A run that failed before its probe started waits for the engineer who
// requested it, until they request the profile again.
func TestFailedStartWaitsForItsRequester(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.p.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, CreatedBy: b.custEng.ID})
	require.NoError(t, b.st.SetRunState(ctx, run.ID, store.RunFailed, "the host key changed."))
	s := b.read(t)
	want := fmt.Sprintf("run #%d, requested by clara, failed to start (the host key changed): it awaits them to fix it and run it again", run.ID)
	require.Contains(t, b.texts(s, &b.custEng, store.RoleEngineer), want)
	require.NotContains(t, b.texts(s, &b.vendorEng, store.RoleEngineer), want, "another engineer's run")

	b.p.Run(t, b.st, store.NewRun{ProfileVersionID: b.profile.ID, HostID: b.host, CreatedBy: b.custEng.ID})
	s = b.read(t)
	require.NotContains(t, b.texts(s, nil, ""), want, "run again since")
}

// Without a plan, or without an approver on a side, the owners are
// awaited.
func TestOwnersSetTheProgramUp(t *testing.T) {
	t.Parallel()
	st := servicetest.Store(t)
	p := servicetest.NewProgram(t, st)
	owner := p.Member(t, st, "olivia", p.Customer, store.RoleOwner)
	eng := p.Member(t, st, "vera", p.Vendor, store.RoleEngineer)
	s, err := standing.Read(context.Background(), st, p.ID)
	require.NoError(t, err)
	require.False(t, s.Rollout.Planned)
	require.Nil(t, s.Rollout.Current)
	b := &bundle{}
	mine := b.texts(s, &owner, store.RoleOwner)
	require.Equal(t, []string{
		"the program has no rollout plan: an owner sets one up",
		"the vendor side has no approver, so no stage can be approved: an owner adds one",
	}, mine, "the customer's owner may approve for the customer side")
	require.Empty(t, b.texts(s, &eng, store.RoleEngineer))
}

func runIDs(runs []store.Run) []int64 {
	out := make([]int64, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}
