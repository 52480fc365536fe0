package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/internal/fakebin"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
)

// launchAnswerHeldBack is a ForceCommand for the lab host's sshd: it runs
// each command as sshd would, but holds back the answer of the first
// `probe launch` for hold (the probe is started all the same), as a slow
// network or one that loses the answer would.
func launchAnswerHeldBack(t *testing.T, hold time.Duration) []string {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "force-command.sh")
	body := fmt.Sprintf(`#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
*" probe launch "*)
	if mkdir %s 2>/dev/null; then
		/bin/sh -c "$SSH_ORIGINAL_COMMAND"
		rc=$?
		sleep %d
		exit $rc
	fi
	;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
`, filepath.Join(dir, "held"), int(hold.Seconds()))
	fakebin.Write(t, script, body)
	return []string{"ForceCommand " + script}
}

// probeSpan is when a run's probe started and ended on the host, by its
// own records (launch.json, status.json).
func probeSpan(t *testing.T, dir string) (start, end time.Time) {
	t.Helper()
	var launch struct {
		LaunchedAt string `json:"launched_at"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, wire.LaunchFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &launch))
	var st wire.Status
	raw, err = os.ReadFile(filepath.Join(dir, wire.StatusFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &st))
	start, err = time.Parse(time.RFC3339Nano, launch.LaunchedAt)
	require.NoError(t, err)
	end, err = time.Parse(time.RFC3339Nano, st.FinishedAt)
	require.NoError(t, err)
	return start, end
}

func stepStarts(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, e := range probeEvents(t, filepath.Join(dir, wire.EventsFile)) {
		if e.Type == wire.EventStepStart {
			n++
		}
	}
	return n
}

func insertOnly(t *testing.T, b *testBundle) *river.Client[pgx.Tx] {
	t.Helper()
	c, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{})
	require.NoError(t, err)
	return c
}

// Two servers on one database. Run A's probe is started on the host, but
// the answer of `probe launch` is slow to come back, and the server
// holding A's lease is killed right then: A is not recorded as launched.
// Its intent to launch was recorded before, so the other server gives the
// host to run B only once A's probe has ended (A itself is taken over and
// completes); the two probes never measure the host at once.
func TestCrashInTheLaunchWindowKeepsTheHost(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	b := setup(t, setupOpts{noRiver: true, leaseTTL: ttl, sshdConfig: launchAnswerHeldBack(t, 20*time.Second)})
	ctx := context.Background()
	inserter := insertOnly(t, b)
	first := b.startWorker(t, "server-1", "ACCORD_LEASE_TTL=3s")

	runA := b.submit(t, inserter, b.saveProfile(t, b.quickProfile(30*time.Second)), nil, nil)
	dirA := b.runDir(runA)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dirA, wire.PIDFile))
		return err == nil
	}, 60*time.Second, 20*time.Millisecond, "A's probe starts on the host\n%s", first.logText())
	first.crash(t)

	a, err := b.store.RunByID(ctx, runA)
	require.NoError(t, err)
	require.False(t, a.Launched, "the launch's answer never came back: it is not recorded")
	require.NotNil(t, a.LaunchIntentAt, "the intent to launch was recorded before")
	require.True(t, a.ProbeMayRun)
	require.Equal(t, dirA, a.RemoteDir, "with the run folder")

	second := b.startWorker(t, "server-2", "ACCORD_LEASE_TTL=3s")
	runB := b.submit(t, inserter, b.saveProfile(t, b.quickProfile(100*time.Millisecond)), nil, nil)
	waiting := b.waitFor(t, runB, 60*time.Second, "B waits for the host", func(r store.Run) bool { return r.State == store.RunWaitingForHost })
	require.Contains(t, waiting.Reason, fmt.Sprintf("busy with run #%d", runA))
	time.Sleep(3 * ttl) // A's lease has long lapsed: its probe measures on
	still, err := b.store.RunByID(ctx, runB)
	require.NoError(t, err)
	require.Equal(t, store.RunWaitingForHost, still.State, "B still waits while A's probe measures")

	a = b.waitFor(t, runA, 150*time.Second, "A is taken over and completes", settled)
	require.Equal(t, store.RunDone, a.State, "%s\n%s", a.Reason, second.logText())
	require.Equal(t, 2, stepStarts(t, dirA), "A's measurement was started once")
	bRun := b.waitFor(t, runB, 90*time.Second, "B completes", settled)
	require.Equal(t, store.RunDone, bRun.State, bRun.Reason)

	aStart, aEnd := probeSpan(t, dirA)
	bStart, _ := probeSpan(t, b.runDir(runB))
	t.Logf("A's probe %s to %s; B's probe started %s after A's ended", aStart.Format(time.RFC3339Nano), aEnd.Format(time.RFC3339Nano), bStart.Sub(aEnd))
	require.True(t, bStart.After(aEnd), "B's probe started after A's had ended")
}

// A worker is killed (SIGKILL) while its run measures; another server on
// the same database takes the run over by its lapsed lease, long before
// River would rescue the job (the job's time limit, an attempt budget and a
// minute, is 11 minutes here), and the run completes without measuring
// twice. Repeated (ACCORD_TEST_TAKEOVER_TRIES, default 2) with the killed
// worker alternating between River's leader and the other one; the
// takeover times are printed.
func TestTakeoverAfterACrashTakesAboutAMinute(t *testing.T) {
	t.Parallel()
	ttl := 3 * time.Second
	if v, err := time.ParseDuration(os.Getenv("ACCORD_TEST_TAKEOVER_TTL")); err == nil {
		ttl = v // to measure with the default lease lifetime (30s)
	}
	tries := 2
	if v, err := strconv.Atoi(os.Getenv("ACCORD_TEST_TAKEOVER_TRIES")); err == nil && v > 0 {
		tries = v
	}
	b := setup(t, setupOpts{noRiver: true, leaseTTL: ttl})
	ctx := context.Background()
	inserter := insertOnly(t, b)
	profile := b.saveProfile(t, b.quickProfile(12*time.Second+ttl))
	ttlEnv := "ACCORD_LEASE_TTL=" + ttl.String()
	workers := []*workerProcess{b.startWorker(t, "worker-0", ttlEnv)}
	var takeovers, resumes []time.Duration
	for i := range tries {
		workers = append(workers, b.startWorker(t, "worker-"+strconv.Itoa(i+1), ttlEnv))
		runID := b.submit(t, inserter, profile, nil, nil)
		b.waitFor(t, runID, 60*time.Second, "it runs", func(r store.Run) bool { return r.State == store.RunRunning && r.EventsOffset > 0 })
		lease, err := b.store.HostLease(ctx, b.hostID)
		require.NoError(t, err)
		var holder *workerProcess
		for _, w := range workers {
			if w.cmd.ProcessState == nil && strings.HasSuffix(lease.Holder, "/"+strconv.Itoa(w.cmd.Process.Pid)) {
				holder = w
			}
		}
		require.NotNil(t, holder, "the lease holder %s is one of the workers", lease.Holder)
		holder.crash(t)
		killed := time.Now()

		var tookOver time.Time
		require.Eventually(t, func() bool {
			return b.pool.QueryRow(ctx, `SELECT at FROM run_events WHERE run_id = $1 AND message LIKE 'no worker is following this run%'`, runID).Scan(&tookOver) == nil
		}, 120*time.Second, 100*time.Millisecond, "the run is taken over")
		var resumed time.Time
		require.Eventually(t, func() bool {
			l, err := b.store.HostLease(ctx, b.hostID)
			if err != nil || l.Token == lease.Token || l.RunID != runID {
				return false
			}
			resumed = time.Now()
			return true
		}, 120*time.Second, 50*time.Millisecond, "another worker holds the run's lease")
		takeovers = append(takeovers, tookOver.Sub(killed))
		resumes = append(resumes, resumed.Sub(killed))
		t.Logf("try %d: killed %s; taken over after %s, followed again after %s", i+1, lease.Holder, tookOver.Sub(killed).Round(time.Millisecond), resumed.Sub(killed).Round(time.Millisecond))

		// Bounded by construction: the lease lapses within ttl of the kill,
		// River elects a new leader within its leader lifetime (15 s) when
		// the leader was killed, the takeover runs every ttl/3; River's own
		// rescue could not come before 11 minutes.
		require.Less(t, tookOver.Sub(killed), ttl+time.Minute, "taken over within about a minute of the lease's lapse")
		run := b.waitFor(t, runID, 120*time.Second, "it completes", settled)
		require.Equal(t, store.RunDone, run.State, run.Reason)
		require.Equal(t, 2, stepStarts(t, b.runDir(runID)), "the measurement was not started again")
	}
	sort.Slice(takeovers, func(i, j int) bool { return takeovers[i] < takeovers[j] })
	sort.Slice(resumes, func(i, j int) bool { return resumes[i] < resumes[j] })
	t.Logf("takeover after SIGKILL (lease TTL %s, %d tries): median %s (min %s, max %s); followed again: median %s",
		ttl, tries, takeovers[len(takeovers)/2].Round(time.Millisecond), takeovers[0].Round(time.Millisecond),
		takeovers[len(takeovers)-1].Round(time.Millisecond), resumes[len(resumes)/2].Round(time.Millisecond))
}

// The answer of `probe launch` is lost (the connection drops while the
// host holds it back), with no crash at all: the attempt fails and is
// retried, the retry finds the probe running and follows it, and a second
// run on the host waits until that probe has ended.
func TestLostLaunchAnswerKeepsTheHost(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{viaProxy: true, leaseTTL: 3 * time.Second, sshdConfig: launchAnswerHeldBack(t, 15*time.Second)})
	ctx := context.Background()
	runA := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(20*time.Second)), nil, nil)
	dirA := b.runDir(runA)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dirA, wire.PIDFile))
		return err == nil
	}, 60*time.Second, 20*time.Millisecond, "A's probe starts on the host")
	b.proxy.Reset() // the answer is lost with the connection

	runB := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(100*time.Millisecond)), nil, nil)
	waiting := b.waitFor(t, runB, 60*time.Second, "B waits for the host", func(r store.Run) bool { return r.State == store.RunWaitingForHost })
	require.Contains(t, waiting.Reason, fmt.Sprintf("busy with run #%d", runA))

	a := b.waitFor(t, runA, 120*time.Second, "A completes", settled)
	require.Equal(t, store.RunDone, a.State, a.Reason)
	require.Equal(t, 2, stepStarts(t, dirA), "A's measurement was started once")
	var retried int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1 AND message LIKE 'attempt failed, will retry:%'`, runA).Scan(&retried))
	require.Positive(t, retried, "the attempt whose answer was lost failed and was retried")
	bRun := b.waitFor(t, runB, 90*time.Second, "B completes", settled)
	require.Equal(t, store.RunDone, bRun.State, bRun.Reason)
	_, aEnd := probeSpan(t, dirA)
	bStart, _ := probeSpan(t, b.runDir(runB))
	require.True(t, bStart.After(aEnd), "B's probe started after A's had ended (%s)", bStart.Sub(aEnd))
}

// A job whose run was taken over by another job (River rescues the stale
// one at last, or its worker comes back) leaves the run alone: no lease is
// taken, no state written.
func TestSupersededJobLeavesTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noRiver: true})
	ctx := context.Background()
	runID := b.submit(t, insertOnly(t, b), b.saveProfile(t, b.quickProfile(time.Second)), nil, nil)
	before, err := b.store.RunByID(ctx, runID)
	require.NoError(t, err)
	stale := &river.Job[ExecuteRunArgs]{JobRow: &rivertype.JobRow{ID: *before.RiverJobID + 1000, Attempt: 2}, Args: ExecuteRunArgs{RunID: runID}}
	require.NoError(t, (&ExecuteRunWorker{deps: b.deps}).Work(ctx, stale))
	after, err := b.store.RunByID(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, before.State, after.State)
	require.Equal(t, before.Reason, after.Reason)
	_, err = b.store.HostLease(ctx, b.hostID)
	require.ErrorIs(t, err, store.ErrNotFound, "no lease was taken")
}

// A run ended while its probe could not be stopped (its host unreachable):
// the host stays that probe's, and a run waiting for it says why; once the
// reconciler reaches the host and finds nothing of the probe (it stops
// whatever runs in the folder and claims it), the host is free.
func TestHostKeptForAProbeLeftBehindUntilItIsStopped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Run A: its launch may have happened, then it failed without stopping
	// its probe.
	var runA int64
	require.NoError(t, b.store.InTx(ctx, func(tx *store.Store) error {
		var err error
		runA, err = tx.CreateRun(ctx, store.NewRun{ProgramID: b.programID, ProfileVersionID: b.saveProfile(t, b.quickProfile(time.Second)), HostID: b.hostID})
		return err
	}))
	lease, _, err := b.store.AcquireLease(ctx, b.hostID, runA, "gone", time.Minute)
	require.NoError(t, err)
	require.NoError(t, b.store.InTx(ctx, func(tx *store.Store) error {
		if err := tx.CheckFence(ctx, lease); err != nil {
			return err
		}
		return tx.RecordLaunchIntent(ctx, runA, b.runDir(runA), time.Hour)
	}))
	require.NoError(t, b.store.SetRunState(ctx, runA, store.RunFailed, "gave up; the probe could not be stopped"))
	require.NoError(t, b.store.ReleaseLease(ctx, lease))

	runB := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(100*time.Millisecond)), nil, nil)
	waiting := b.waitFor(t, runB, 30*time.Second, "B waits", func(r store.Run) bool {
		return r.State == store.RunWaitingForHost && strings.Contains(r.Reason, "ended without its probe being stopped")
	})
	require.Contains(t, waiting.Reason, fmt.Sprintf("run #%d", runA))

	_, err = b.river.Insert(ctx, ReconcileRunsArgs{}, nil)
	require.NoError(t, err)
	done := b.waitFor(t, runB, 90*time.Second, "B runs once A's folder is stopped", settled)
	require.Equal(t, store.RunDone, done.State, done.Reason)
	a, err := b.store.RunByID(ctx, runA)
	require.NoError(t, err)
	require.NotNil(t, a.ProbeEndedAt)
	require.FileExists(t, filepath.Join(b.runDir(runA), wire.LaunchFile), "the folder was claimed: no late launch can start there")
}
