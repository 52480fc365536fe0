package jobs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/store"
)

// A run completes, its artifacts are the host's files byte for byte, its
// measurements are stored, and it is judged.
func TestRunCompletesWithArtifactsMeasurementsAndVerdict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	gates := b.saveGates(t, quickGates())
	runID := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(200*time.Millisecond)), &gates, nil)
	run := b.waitFor(t, runID, 90*time.Second, "settle", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)
	require.Equal(t, "PASS", run.Verdict)

	arts, err := b.store.RunArtifacts(ctx, runID)
	require.NoError(t, err)
	require.NotEmpty(t, arts)
	seen := map[string]bool{}
	for _, a := range arts {
		seen[a.Path] = true
		onHost, err := os.ReadFile(filepath.Join(b.runDir(runID), a.Path))
		require.NoError(t, err, a.Path)
		sum := sha256.Sum256(onHost)
		require.Equal(t, hex.EncodeToString(sum[:]), a.SHA256, "%s differs from the host's file", a.Path)
		rc, err := b.store.Artifacts().Open(ctx, a.SHA256)
		require.NoError(t, err)
		var stored bytes.Buffer
		_, _ = stored.ReadFrom(rc)
		require.True(t, bytes.Equal(onHost, stored.Bytes()), "%s: stored bytes equal the host's", a.Path)
	}
	for _, want := range []string{wire.EventsFile, wire.StatusFile, wire.FactsFile, wire.PlanFile, wire.ManifestFile, wire.NeighboursFile, "out/02-read/rep-1/fio.json"} {
		require.True(t, seen[want], "artifact %s kept", want)
	}
	// Every file of the host's run folder was kept.
	_ = filepath.Walk(b.runDir(runID), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			rel, _ := filepath.Rel(b.runDir(runID), p)
			require.True(t, seen[filepath.ToSlash(rel)], "host file %s was not collected", rel)
		}
		return nil
	})

	ms, err := b.store.RunMeasurementSummaries(ctx, runID)
	require.NoError(t, err)
	metrics := map[string]store.MeasurementRow{}
	for _, m := range ms {
		metrics[m.Metric] = m
	}
	require.Contains(t, metrics, "read_clat")
	require.Contains(t, metrics, "read_iops")
	require.Greater(t, metrics["read_clat"].Summary.N, int64(100))
	require.Equal(t, "fio", metrics["read_clat"].Source.Tool)

	ev, err := b.store.RunLatestEvaluation(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, "PASS", ev.Overall)
	facts, err := b.store.RunFacts(ctx, runID)
	require.NoError(t, err)
	require.True(t, json.Valid(facts.Facts))

	// The lease was given back.
	_, err = b.store.HostLease(ctx, b.hostID)
	require.ErrorIs(t, err, store.ErrNotFound)

	// Every state said what was happening in it, in its own words.
	transitions, err := b.store.RunTransitions(ctx, runID)
	require.NoError(t, err)
	said := map[string]string{}
	for _, tr := range transitions {
		require.NotEmpty(t, tr.Reason, "the move to %s says why", tr.ToState)
		said[tr.ToState] = tr.Reason
	}
	require.Equal(t, "connecting to the host", said[store.RunPreparing])
	require.Equal(t, "the probe is measuring on the host", said[store.RunRunning])
	require.Equal(t, "pulling the run folder", said[store.RunCollecting])
	require.Equal(t, "verdict: PASS", run.Reason)
	require.NotNil(t, run.ProbeEndedAt, "the probe's end was seen")
	require.False(t, run.ProbeMayRun)
	require.False(t, run.Contaminated, "it measured alone")
}

// probeEvents reads the host's event file.
func probeEvents(t *testing.T, path string) []wire.Event {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []wire.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		var e wire.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		out = append(out, e)
	}
	return out
}

// The connection is reset while the probe runs: the runner reconnects,
// resumes from its offset, and the run completes with one measurement and
// every event stored exactly once.
func TestConnectionResetMidRunResumes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{viaProxy: true})
	proxy := b.proxy

	runID := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(4*time.Second)), nil, nil)
	b.waitFor(t, runID, 60*time.Second, "start following", func(r store.Run) bool { return r.State == store.RunRunning && r.EventsOffset > 0 })
	proxy.Reset()
	run := b.waitFor(t, runID, 90*time.Second, "settle", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)
	require.Greater(t, proxy.Accepted(), int64(1), "the runner reconnected")

	events := probeEvents(t, filepath.Join(b.runDir(runID), wire.EventsFile))
	starts := 0
	for _, e := range events {
		if e.Type == wire.EventStepStart {
			starts++
		}
	}
	require.Equal(t, 2, starts, "each step ran once: the measurement was never started twice")
	var stored int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM run_events WHERE run_id = $1 AND seq IS NOT NULL`, runID).Scan(&stored))
	require.Equal(t, len(events), stored, "every probe event stored exactly once")
	info, err := os.Stat(filepath.Join(b.runDir(runID), wire.EventsFile))
	require.NoError(t, err)
	require.Equal(t, info.Size(), run.EventsOffset, "the offset reached the end of the stream")
}

// A changed host key fails the run with a clear message and no retry.
func TestHostKeyChangeFailsWithoutRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.sshd.Restart(sshtest.KeyECDSA)
	runID := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(100*time.Millisecond)), nil, nil)
	run := b.waitFor(t, runID, 60*time.Second, "fail", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunFailed, run.State)
	require.Contains(t, run.Reason, "host key")
	require.Contains(t, run.Reason, sshrun.Fingerprint(b.sshd.HostKey), "the message names the key presented")
	require.Eventually(t, func() bool {
		job, err := b.river.JobGet(context.Background(), *run.RiverJobID)
		return err == nil && job.State == rivertype.JobStateCancelled
	}, 10*time.Second, 50*time.Millisecond, "the job ends cancelled")
	job, err := b.river.JobGet(context.Background(), *run.RiverJobID)
	require.NoError(t, err)
	require.Equal(t, 1, job.Attempt, "a changed host key is never retried")
	require.False(t, run.Launched)
}

// Cancel: River cancels the job, the runner stops the probe's process
// group on the host, nothing of the run is left, the run ends cancelled.
func TestCancelLeavesNoProcessOnTheHost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	runID := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(60*time.Second)), nil, nil)
	run := b.waitFor(t, runID, 60*time.Second, "run", func(r store.Run) bool { return r.State == store.RunRunning && r.EventsOffset > 0 })
	dir := b.runDir(runID)
	require.NotEmpty(t, processesOf(t, dir), "the probe runs on the host")

	require.NoError(t, b.store.RequestCancel(ctx, runID, "eng@vendor.example"))
	_, err := b.river.JobCancel(ctx, *run.RiverJobID)
	require.NoError(t, err)
	run = b.waitFor(t, runID, 60*time.Second, "cancel", func(r store.Run) bool { return store.RunFinal(r.State) })
	require.Equal(t, store.RunCancelled, run.State, run.Reason)
	require.Contains(t, run.Reason, "cancelled by eng@vendor.example; ", "who asked")
	require.Contains(t, run.Reason, "no process of the run is left")
	var probe []string
	for _, p := range processesOf(t, dir) {
		if !strings.Contains(p, " probe tail ") {
			probe = append(probe, p)
		}
	}
	require.Empty(t, probe, "no process of the probe is left on the host")
	// The worker's event reader (probe tail, over the cancelled job's SSH
	// session) sees the status file within its 200 ms poll and exits.
	require.Eventually(t, func() bool { return len(processesOf(t, dir)) == 0 }, 10*time.Second, 50*time.Millisecond,
		"no process of the run is left on the host: %v", processesOf(t, dir))
	var st wire.Status
	raw, err := os.ReadFile(filepath.Join(dir, wire.StatusFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &st))
	require.Equal(t, wire.StateCancelled, st.State)
}

// processesOf lists the processes whose command line mentions dir.
func processesOf(t *testing.T, dir string) []string {
	t.Helper()
	return sshtest.Processes(t, dir)
}

// Two runs for one host: the second waits for the host, then runs.
func TestSecondRunWaitsForTheHost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	profile := b.saveProfile(t, b.quickProfile(3*time.Second))
	first := b.submit(t, b.river, profile, nil, nil)
	b.waitFor(t, first, 60*time.Second, "first runs", func(r store.Run) bool { return r.State == store.RunRunning })
	second := b.submit(t, b.river, profile, nil, nil)
	waiting := b.waitFor(t, second, 30*time.Second, "second waits", func(r store.Run) bool { return r.State == store.RunWaitingForHost })
	require.Contains(t, waiting.Reason, "busy with run #")
	r1 := b.waitFor(t, first, 90*time.Second, "first ends", settled)
	require.Equal(t, store.RunDone, r1.State, r1.Reason)
	r2 := b.waitFor(t, second, 90*time.Second, "second ends", settled)
	require.Equal(t, store.RunDone, r2.State, r2.Reason)
	require.True(t, r2.StartedAt.After(*r1.FinishedAt), "the second started after the first finished")
}

// A jump host chain of two sshd instances: the run goes through the first
// to reach the second, each pinned.
func TestRunThroughAJumpHost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jump := sshtest.StartSSHD(t, sshtest.Options{AuthorizedKeys: []ssh.PublicKey{b.sshd.ClientSigner.PublicKey()}})
	require.NoError(t, b.store.PinHostKeys(context.Background(), b.programID, b.hostID,
		sshrun.AuthorizedKey(b.sshd.HostKey), sshrun.Fingerprint(b.sshd.HostKey),
		[]store.JumpHop{{Address: jump.Addr, Port: jump.Port, Username: jump.User, HostKey: sshrun.AuthorizedKey(jump.HostKey), HostKeySHA256: sshrun.Fingerprint(jump.HostKey)}}))
	runID := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(100*time.Millisecond)), nil, nil)
	run := b.waitFor(t, runID, 90*time.Second, "settle", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)
	require.Contains(t, jump.Log(), "Accepted publickey", "the connection went through the jump host")
}

// A run longer than one attempt's budget is carried on by the next
// attempts, each resuming from the stored offset, the lease handed over.
func TestLongRunIsHandedOverBetweenAttempts(t *testing.T) {
	t.Parallel()
	// Each attempt must connect, resume and follow for a while (and the
	// last collect) within its budget: on a loaded machine connecting and
	// resuming alone took 3 s, and attempts of 2 or 3 s never got further.
	b := setup(t, setupOpts{budget: 8 * time.Second})
	runID := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(20*time.Second)), nil, nil)
	run := b.waitFor(t, runID, 90*time.Second, "settle", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)
	events := probeEvents(t, filepath.Join(b.runDir(runID), wire.EventsFile))
	starts := 0
	for _, e := range events {
		if e.Type == wire.EventStepStart {
			starts++
		}
	}
	require.Equal(t, 2, starts)
	var resumes int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM run_events WHERE run_id = $1 AND message LIKE 'resuming:%'`, runID).Scan(&resumes))
	require.GreaterOrEqual(t, resumes, 2, "later attempts resumed the run")
}

// The connection goes silent mid-run: keepalives close it within their
// bound, the runner reconnects once the network is back, and the run
// completes.
func TestSilentConnectionIsDetectedAndRunCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{viaProxy: true})
	bound := b.deps.Runner.Options.KeepaliveBound()
	runID := b.submit(t, b.river, b.saveProfile(t, b.quickProfile(8*time.Second)), nil, nil)
	b.waitFor(t, runID, 60*time.Second, "follow", func(r store.Run) bool { return r.State == store.RunRunning && r.EventsOffset > 0 })
	before := b.proxy.Accepted()
	silenced := time.Now()
	b.proxy.Silence()
	require.Eventually(t, func() bool { return b.proxy.Accepted() > before }, bound+5*time.Second, 50*time.Millisecond,
		"keepalive closed the silent connection and the runner dialled again")
	detected := time.Since(silenced)
	t.Logf("silence detected and redialled after %s (keepalive bound %s)", detected, bound)
	require.LessOrEqual(t, detected, bound+2*time.Second)
	b.proxy.Resume()
	run := b.waitFor(t, runID, 90*time.Second, "settle", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)
}
