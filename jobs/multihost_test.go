package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/accordlab/accord/internal/closedport"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
)

// addHost registers another loopback sshd as a lab host of the bundle's
// program (port overrides where the host is reached: a closed port
// stands for a host that cannot be reached).
func (b *testBundle) addHost(t testing.TB, name string, port int) int64 {
	t.Helper()
	return b.registerHost(t, name, sshtest.StartSSHD(t, sshtest.Options{}), port)
}

// registerHost registers a running sshd as a lab host of the bundle's
// program (port 0: the sshd's own).
func (b *testBundle) registerHost(t testing.TB, name string, sshd *sshtest.SSHD, port int) int64 {
	t.Helper()
	ctx := context.Background()
	if port == 0 {
		port = sshd.Port
	}
	id, err := b.store.CreateHost(ctx, b.programID, store.NewHost{Name: name, Address: sshd.Addr, Port: port, Username: sshd.User, AuthMethod: "key", PublicKey: "test", WritePlaces: []string{b.work}})
	require.NoError(t, err)
	sealed, err := b.deps.Sealer.Seal(sshd.ClientKeyPEM, labhost.SealLabel(id))
	require.NoError(t, err)
	require.NoError(t, b.store.SetHostSealedKey(ctx, id, sealed))
	require.NoError(t, b.store.PinHostKeys(ctx, b.programID, id, sshrun.AuthorizedKey(sshd.HostKey), sshrun.Fingerprint(sshd.HostKey), nil))
	return id
}

// submitMulti submits a multi-host run (its hosts in order, by role), as
// the handler does.
func (b *testBundle) submitMulti(t testing.TB, client *river.Client[pgx.Tx], profileVersion int64, gates *int64, hosts []store.NewRunHost) int64 {
	t.Helper()
	ctx := context.Background()
	var runID int64
	require.NoError(t, b.store.InTx(ctx, func(tx *store.Store) error {
		var err error
		runID, err = tx.CreateRun(ctx, store.NewRun{ProgramID: b.programID, ProfileVersionID: profileVersion, GateSetVersionID: gates, HostID: hosts[0].HostID})
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

// hostDir is a multi-host run's folder on a host.
func (b *testBundle) hostDir(runID, hostID int64) string {
	return filepath.Join(b.remote, "runs", fmt.Sprintf("%d-1-h%d", runID, hostID))
}

// twoRoleProfile: every host settles; then the readers read and the
// writer writes at the same time (a parallel group).
func (b *testBundle) twoRoleProfile(settle time.Duration) acceptance.ProfileSpec {
	// The readers share one file here (their hosts share this machine's
	// disk): laid out before, so that neither fio lays it out under the
	// other.
	if err := os.WriteFile(filepath.Join(b.work, "read.dat"), make([]byte, 8<<20), 0o644); err != nil {
		panic(err)
	}
	fio := func(name, rw, file string) acceptance.StepSpec {
		return acceptance.StepSpec{Name: name, Kind: acceptance.StepFio, Group: "load", Fio: &acceptance.FioStep{RW: rw, BlockSize: 4 << 10, IODepth: 1, NumJobs: 1,
			Size: 8 << 20, Runtime: acceptance.Duration(time.Second), IOEngine: "psync", Target: filepath.Join(b.work, file)}}
	}
	return acceptance.ProfileSpec{
		Name: "shared storage", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe},
		Repetitions: 1,
		Steps: []acceptance.StepSpec{
			{Name: "settle", Kind: acceptance.StepPause, Pause: &acceptance.PauseStep{Duration: acceptance.Duration(settle)}},
			fio("read", "randread", "read.dat"),
			fio("write", "randwrite", "write.dat"),
		},
		Roles: []acceptance.RoleSpec{
			{Name: "readers", Steps: []string{"settle", "read"}, MinHosts: 2},
			{Name: "writer", Steps: []string{"settle", "write"}, MaxHosts: 1},
		},
	}.Normalized()
}

// noRunProcesses says that nothing of the run is left in any of the
// folders: no probe, no tail, nothing.
func noRunProcesses(t *testing.T, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		require.Eventually(t, func() bool { return len(sshtest.Processes(t, dir)) == 0 }, 15*time.Second, 50*time.Millisecond,
			"no process of the run is left in %s: %v", dir, sshtest.Processes(t, dir))
	}
}

// A run on three hosts in two roles passes: every host is leased and
// released together at every barrier, each runs its role's steps, and
// the results are kept per host and combined (throughputs summed, latency
// distributions merged), with every host's facts.
func TestMultiHostRunPasses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	reader2 := b.addHost(t, "lab-2", 0)
	writer := b.addHost(t, "lab-3", 0)
	gates := b.saveGates(t, quickGates())
	runID := b.submitMulti(t, b.river, b.saveProfile(t, b.twoRoleProfile(500*time.Millisecond)), &gates, []store.NewRunHost{
		{Role: "readers", HostID: b.hostID}, {Role: "readers", HostID: reader2}, {Role: "writer", HostID: writer}})
	run := b.waitFor(t, runID, 120*time.Second, "run", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)
	require.Equal(t, "PASS", run.Verdict)
	require.Equal(t, 3, run.HostCount)

	hosts, err := b.store.RunHosts(ctx, runID)
	require.NoError(t, err)
	require.Len(t, hosts, 3)
	for _, h := range hosts {
		require.Equal(t, store.RunHostEnded, h.State, h.Reason)
		require.NotNil(t, h.ProbeEndedAt)
		require.Equal(t, -1, h.WaitingAt)
	}
	// Every host passed the same barriers: the start, and one per phase.
	for _, h := range hosts {
		rows, _ := b.pool.Query(ctx, `SELECT data FROM run_events WHERE run_id = $1 AND host_ordinal = $2 AND type = 'barrier' ORDER BY seq`, runID, h.Ordinal)
		seen, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var bar wire.Barrier
			if err := r.Scan(&bar); err != nil {
				return "", err
			}
			return fmt.Sprintf("%d %s", bar.Index, bar.State), nil
		})
		require.NoError(t, err)
		require.Equal(t, []string{"0 waiting", "0 released", "1 waiting", "1 released"}, seen, "host %s", h.HostName)
	}
	notes, err := b.store.RunLogTail(ctx, runID, 200)
	require.NoError(t, err)
	var released []string
	for _, e := range notes {
		if strings.HasPrefix(e.Message, "barrier ") {
			released = append(released, e.Message)
		}
	}
	require.Len(t, released, 2, "two barriers released on all hosts: %v", released)
	require.Contains(t, released[0], "barrier 0 released on all 3 hosts")

	// Each host ran its role's steps, in its own folder.
	own, err := b.store.RunHostMeasurements(ctx, runID)
	require.NoError(t, err)
	perHost := map[string]map[string]float64{} // host → metric → value (rates)
	for _, m := range own {
		if perHost[m.Host] == nil {
			perHost[m.Host] = map[string]float64{}
		}
		if m.Metric == acceptance.MetricReadIOPS || m.Metric == acceptance.MetricWriteIOPS {
			perHost[m.Host][m.Step+"/"+m.Metric] = m.Values[0]
		}
	}
	require.Contains(t, perHost["lab"], "read/read_iops")
	require.Contains(t, perHost["lab-2"], "read/read_iops")
	require.NotContains(t, perHost["lab"], "write/write_iops")
	require.Contains(t, perHost["lab-3"], "write/write_iops")
	require.NotContains(t, perHost["lab-3"], "read/read_iops")

	// Combined: IOPS summed over the readers; latency merged from both
	// readers' histograms.
	combined, err := b.store.RunMeasurements(ctx, runID)
	require.NoError(t, err)
	var readIOPS *acceptance.Measurement
	var clatN, hostClatN int64
	for i, m := range combined {
		require.Empty(t, m.Host)
		if m.Metric == acceptance.MetricReadIOPS && m.Step == "read" {
			readIOPS = &combined[i]
		}
		if m.Metric == acceptance.MetricReadCLat && m.Step == "read" {
			clatN = sampleCount(m)
		}
	}
	for _, m := range own {
		if m.Metric == acceptance.MetricReadCLat && m.Step == "read" {
			hostClatN += sampleCount(m)
		}
	}
	require.NotNil(t, readIOPS)
	require.InDelta(t, perHost["lab"]["read/read_iops"]+perHost["lab-2"]["read/read_iops"], readIOPS.Values[0], 1e-9)
	require.Contains(t, readIOPS.Source.Field, "sum over 2 hosts")
	require.Positive(t, clatN)
	require.Equal(t, hostClatN, clatN, "the combined distribution holds every host's samples")

	// Every host's folder and facts are kept.
	arts, err := b.store.RunArtifacts(ctx, runID)
	require.NoError(t, err)
	facts := 0
	for _, a := range arts {
		if strings.HasSuffix(a.Path, "/"+wire.FactsFile) && strings.HasPrefix(a.Path, "hosts/") {
			facts++
		}
	}
	require.Equal(t, 3, facts)
	var factRows int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(DISTINCT host_id) FROM host_facts WHERE run_id = $1`, runID).Scan(&factRows))
	require.Equal(t, 3, factRows)

	// The hosts are free (once the worker, which the verdict does not
	// wait for, lets go), and nothing of the run is left on them.
	require.Eventually(t, func() bool { return !mustRunByID(t, b, runID).ProbeMayRun && leaseCount(t, b) == 0 }, time.Minute, 50*time.Millisecond,
		"every host's probe is known to have ended and every host is free")
	noRunProcesses(t, b.hostDir(runID, b.hostID), b.hostDir(runID, reader2), b.hostDir(runID, writer))

	// Its signed report covers every host.
	requireMultiHostBundle(t, b, runID)
}

func sampleCount(m acceptance.Measurement) int64 {
	if m.Counts == nil {
		return int64(len(m.Values))
	}
	var n int64
	for _, c := range m.Counts {
		n += c
	}
	return n
}

// A host that cannot be reached fails the whole run, named; the probes
// already launched on the other hosts, waiting at the start barrier, are
// stopped before they measure anything, and nothing is left anywhere.
func TestMultiHostRunFailsWhenAHostCannotStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reader2 := b.addHost(t, "lab-2", 0)
	gone := b.addHost(t, "lab-gone", closedport.Port(t))
	runID := b.submitMulti(t, b.river, b.saveProfile(t, b.twoRoleProfile(time.Second)), nil, []store.NewRunHost{
		{Role: "readers", HostID: b.hostID}, {Role: "readers", HostID: reader2}, {Role: "writer", HostID: gone}})
	run := b.waitFor(t, runID, 120*time.Second, "run", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunFailed, run.State)
	require.Contains(t, run.Reason, "host lab-gone could not start")
	require.NotNil(t, run.ProbeEndedAt, "every probe of the run is known to have ended")

	launched := 0
	for _, id := range []int64{b.hostID, reader2} {
		dir := b.hostDir(runID, id)
		raw, err := os.ReadFile(filepath.Join(dir, wire.StatusFile))
		if errors.Is(err, fs.ErrNotExist) {
			// The refused connection can fail the run before this host's
			// launch was made (a loaded machine): then it was never made.
			_, err := os.Stat(filepath.Join(dir, wire.EventsFile))
			require.ErrorIs(t, err, fs.ErrNotExist, "host %d: no status but events", id)
			continue
		}
		require.NoError(t, err)
		launched++
		var st wire.Status
		require.NoError(t, json.Unmarshal(raw, &st))
		require.Equal(t, wire.StateCancelled, st.State)
		evs, err := os.ReadFile(filepath.Join(dir, wire.EventsFile))
		require.NoError(t, err)
		require.NotContains(t, string(evs), `"type":"step_start"`, "nothing was measured before every host could start")
	}
	t.Logf("%d of the 2 reachable hosts' probes were launched before the run failed", launched)
	noRunProcesses(t, b.hostDir(runID, b.hostID), b.hostDir(runID, reader2), b.hostDir(runID, gone))
	require.Eventually(t, func() bool { return leaseCount(t, b) == 0 }, 10*time.Second, 50*time.Millisecond, "the hosts are free")
}

// A cancel mid-run stops the probe on every host.
func TestMultiHostCancelStopsEveryHost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	reader2 := b.addHost(t, "lab-2", 0)
	writer := b.addHost(t, "lab-3", 0)
	runID := b.submitMulti(t, b.river, b.saveProfile(t, b.twoRoleProfile(time.Minute)), nil, []store.NewRunHost{
		{Role: "readers", HostID: b.hostID}, {Role: "readers", HostID: reader2}, {Role: "writer", HostID: writer}})
	run := b.waitFor(t, runID, 60*time.Second, "running", func(r store.Run) bool { return r.State == store.RunRunning })
	dirs := []string{b.hostDir(runID, b.hostID), b.hostDir(runID, reader2), b.hostDir(runID, writer)}
	for _, d := range dirs {
		require.NotEmpty(t, sshtest.Processes(t, d, " probe run "), "the probe runs in %s", d)
	}
	require.NoError(t, b.store.RequestCancel(ctx, runID, "eng@vendor.example"))
	_, err := b.river.JobCancel(ctx, *run.RiverJobID)
	require.NoError(t, err)
	run = b.waitFor(t, runID, 60*time.Second, "cancel", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunCancelled, run.State, run.Reason)
	require.Equal(t, 3, strings.Count(run.Reason, "no process of the run is left"), run.Reason)
	noRunProcesses(t, dirs...)
}

func leaseCount(t *testing.T, b *testBundle) int {
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM host_leases`).Scan(&n))
	return n
}

func mustRunByID(t *testing.T, b *testBundle, id int64) store.Run {
	t.Helper()
	r, err := b.store.RunByID(context.Background(), id)
	require.NoError(t, err)
	return r
}
