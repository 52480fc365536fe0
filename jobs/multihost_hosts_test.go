package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/internal/fakebin"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/store"
)

// Hosts that differ from the others in one way, each a loopback sshd of
// its own.

// sshdWithPath starts an sshd whose sessions find the files of dir first
// on their PATH (and a HOME of their own, as sshtest's do).
func sshdWithPath(t *testing.T, dir string) *sshtest.SSHD {
	t.Helper()
	home := t.TempDir()
	return sshtest.StartSSHD(t, sshtest.Options{ExtraConfig: []string{
		"SetEnv HOME=" + home + " PATH=" + dir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
}

// gpuHostTools is a folder with an nvidia-smi that prints the recordings
// of an A100 server's nvidia-smi (runners/probe/gpu/testdata, see its
// README): a host with an NVIDIA GPU, as far as the probe can tell.
func gpuHostTools(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	testdata, err := filepath.Abs(filepath.Join("..", "runners", "probe", "gpu", "testdata"))
	require.NoError(t, err)
	script := "#!/bin/sh\n# nvidia-smi of an A100 server, from recordings.\ncase \"$1\" in\n" +
		"topo) exec cat '" + filepath.Join(testdata, "nvidia-smi-topo-m-della-a100.txt") + "' ;;\n" +
		"*) exec cat '" + filepath.Join(testdata, "nvidia-smi-q-x-a100-sxm4-v12.xml") + "' ;;\nesac\n"
	fakebin.Write(t, filepath.Join(dir, "nvidia-smi"), script)
	return dir
}

// sshdRefusingTheProbe starts an sshd whose account cannot execute
// Accord's probe (as a home mounted noexec would): every command runs as
// usual except `probe launch`, which fails as exec would.
func sshdRefusingTheProbe(t *testing.T) *sshtest.SSHD {
	t.Helper()
	wrapper := filepath.Join(t.TempDir(), "only-some-commands")
	require.NoError(t, os.WriteFile(wrapper, []byte(`#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
*" probe launch "*) echo "sh: 1: accord: Permission denied" >&2; exit 126 ;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
`), 0o755))
	return sshtest.StartSSHD(t, sshtest.Options{ExtraConfig: []string{"ForceCommand " + wrapper}})
}

// submitMultiAgainst submits a multi-host run judged against a baseline.
func (b *testBundle) submitMultiAgainst(t *testing.T, client *river.Client[pgx.Tx], profileVersion int64, gates *int64, baseline int64, hosts []store.NewRunHost) int64 {
	t.Helper()
	ctx := context.Background()
	var runID int64
	require.NoError(t, b.store.InTx(ctx, func(tx *store.Store) error {
		var err error
		runID, err = tx.CreateRun(ctx, store.NewRun{ProgramID: b.programID, ProfileVersionID: profileVersion, GateSetVersionID: gates, HostID: hosts[0].HostID, BaselineRunID: &baseline})
		if err != nil {
			return err
		}
		if err := tx.AddRunHosts(ctx, runID, hosts); err != nil {
			return err
		}
		res, err := client.InsertTx(ctx, tx.Tx(), ExecuteRunArgs{RunID: runID}, nil)
		if err != nil {
			return err
		}
		return tx.SetRunJob(ctx, runID, res.Job.ID)
	}))
	return runID
}

// Comparability covers every host, end to end: a candidate run on the
// same three hosts as its baseline but one, a reader with an NVIDIA GPU
// (its nvidia-smi on the probe's PATH) where the baseline's reader had
// none, is INCOMPARABLE, and the verdict names that host and the
// baseline's host in its place.
func TestMultiHostComparabilityNamesTheHost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	reader2 := b.addHost(t, "lab-2", 0)
	writer := b.addHost(t, "lab-3", 0)
	gpu := b.registerHost(t, "lab-gpu", sshdWithPath(t, gpuHostTools(t)), 0)
	gates := b.saveGates(t, acceptance.GateSetSpec{Name: "against the baseline", Criteria: []acceptance.Criterion{{
		Name: "read-latency", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP50, Mode: acceptance.Relative,
		Comparator: acceptance.LessOrEqual, Threshold: 1000, Unit: "%", Severity: acceptance.Blocking,
	}}}.Normalized())
	profile := b.saveProfile(t, b.twoRoleProfile(200*time.Millisecond))
	base := b.submitMulti(t, b.river, profile, nil, []store.NewRunHost{
		{Role: "readers", HostID: b.hostID}, {Role: "readers", HostID: reader2}, {Role: "writer", HostID: writer}})
	run := b.waitFor(t, base, 2*time.Minute, "baseline", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)

	cand := b.submitMultiAgainst(t, b.river, profile, &gates, base, []store.NewRunHost{
		{Role: "readers", HostID: b.hostID}, {Role: "readers", HostID: gpu}, {Role: "writer", HostID: writer}})
	run = b.waitFor(t, cand, 2*time.Minute, "judged", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)
	require.Equal(t, string(acceptance.Incomparable), run.Verdict)

	stored, err := b.store.RunLatestEvaluation(ctx, cand)
	require.NoError(t, err)
	var ev acceptance.Evaluation
	require.NoError(t, json.Unmarshal(stored.Result, &ev))
	require.False(t, ev.Comparability.Comparable)
	require.NotEmpty(t, ev.Comparability.Differences)
	var facts []string
	for _, d := range ev.Comparability.Differences {
		facts = append(facts, d.Fact)
		require.Equal(t, "lab-gpu", d.CandidateHost, "%s is the GPU host's fact", d.Fact)
		require.Contains(t, []string{"lab", "lab-2"}, d.BaselineHost, "%s: the baseline's reader in its place", d.Fact)
		require.True(t, strings.HasPrefix(d.Fact, "readers["), d.Fact)
		require.False(t, d.CandidateAbsent)
		require.True(t, d.BaselineAbsent, "the baseline's readers had no GPU")
	}
	require.Contains(t, strings.Join(facts, " "), "].gpu.model")
	explanation := ev.Criteria[0].Series[0].Explanation
	require.Contains(t, explanation, "on host lab-gpu vs unknown on the baseline's host")
	require.Contains(t, explanation, "so the comparison is void")
}

// A probe that cannot be launched on a host that is reachable (its
// account cannot execute it) fails the whole run, naming the host; the
// probes already launched on the other hosts, waiting at the start
// barrier, are stopped before they measure anything, nothing is left
// anywhere, and every host is free again.
func TestMultiHostRunFailsWhenAProbeCannotLaunch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reader2 := b.addHost(t, "lab-2", 0)
	refusing := b.registerHost(t, "lab-noexec", sshdRefusingTheProbe(t), 0)
	runID := b.submitMulti(t, b.river, b.saveProfile(t, b.twoRoleProfile(time.Second)), nil, []store.NewRunHost{
		{Role: "readers", HostID: b.hostID}, {Role: "readers", HostID: reader2}, {Role: "writer", HostID: refusing}})
	run := b.waitFor(t, runID, 2*time.Minute, "failed", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunFailed, run.State)
	require.Contains(t, run.Reason, "host lab-noexec could not start")
	require.Contains(t, run.Reason, "Permission denied", "the host's own words")
	require.NotNil(t, run.ProbeEndedAt, "every probe of the run is known to have ended")

	// The host was reached: the probe and the plan are on it, never run.
	dir := b.hostDir(runID, refusing)
	require.FileExists(t, filepath.Join(dir, wire.PlanFile))
	raw, err := os.ReadFile(filepath.Join(dir, wire.StatusFile))
	require.NoError(t, err)
	var st wire.Status
	require.NoError(t, json.Unmarshal(raw, &st))
	require.Equal(t, wire.StateCancelled, st.State)
	require.Contains(t, st.Reason, "before the probe was launched; nothing ran here", "the stop claimed its folder: no later launch can run there")
	// The other hosts' probes, launched or not yet when lab-noexec failed
	// (the hosts start at once), measured nothing.
	for _, id := range []int64{b.hostID, reader2} {
		raw, err := os.ReadFile(filepath.Join(b.hostDir(runID, id), wire.StatusFile))
		if errors.Is(err, fs.ErrNotExist) {
			continue // stopped before its probe was prepared
		}
		require.NoError(t, err)
		var st wire.Status
		require.NoError(t, json.Unmarshal(raw, &st))
		require.Equal(t, wire.StateCancelled, st.State, "host %d", id)
		evs, err := os.ReadFile(filepath.Join(b.hostDir(runID, id), wire.EventsFile))
		require.NoError(t, err)
		require.NotContains(t, string(evs), `"type":"step_start"`, "nothing was measured before every host could start")
	}
	noRunProcesses(t, b.hostDir(runID, b.hostID), b.hostDir(runID, reader2), dir)
	require.Eventually(t, func() bool { return leaseCount(t, b) == 0 }, 10*time.Second, 50*time.Millisecond, "the hosts are free")
}
