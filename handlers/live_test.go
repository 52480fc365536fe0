package handlers

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

// The run page's live stream pushes log lines, progress and state as they
// are stored (LISTEN/NOTIFY), and ends when the run is settled.
func TestRunEventsStreamLive(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	pv := pb.profileVersionID(t)
	host, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	runID, err := pb.store.CreateRun(ctx, store.NewRun{ProgramID: pb.programID, ProfileVersionID: pv, HostID: host})
	require.NoError(t, err)

	req, _ := http.NewRequest(http.MethodGet, pb.ts.URL+pb.url("/runs/")+strconv.FormatInt(runID, 10)+"/events", nil)
	res, err := pb.viewer.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(substr string) {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "the stream ended before %q", substr)
				if strings.Contains(l, substr) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q on the stream", substr)
			}
		}
	}
	expect(`"state":"queued"`)

	started := time.Now()
	require.NoError(t, pb.store.SetRunState(ctx, runID, store.RunPreparing, "uploading the plan"))
	require.NoError(t, pb.store.AddRunNote(ctx, runID, "info", "hello from the runner"))
	expect("hello from the runner")
	require.Less(t, time.Since(started), 4*time.Second, "pushed by the notification, not by the 5 s poll")
	require.NoError(t, pb.store.SetRunState(ctx, runID, store.RunCancelled, "stopped"))
	expect(`"final":true`)
	for range lines {
	}
}

// A running run whose worker stopped renewing its host lease: the page and
// the API say that no worker follows it and that it is being taken over,
// and once a worker holds the lease again they say what it does.
func TestRunWithoutAWorkerSaysItIsTakenOver(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	host, runID, runPath, apiPath := pb.runOnALabHost(t)
	require.NoError(t, pb.store.SetRunState(ctx, runID, store.RunPreparing, "connecting to the host"))
	require.NoError(t, pb.store.SetRunState(ctx, runID, store.RunRunning, "the probe is measuring on the host"))
	_, _, err := pb.store.AcquireLease(ctx, host, runID, "worker-a", time.Minute)
	require.NoError(t, err)

	_, page := pb.get(t, pb.viewer, runPath)
	require.NotContains(t, page, "no worker is following this run", "the lease is alive")
	// Worker A's last renewal was a short one, and then it was gone: the
	// lease lapses (a lease's life is fixed by construction, not by how
	// soon this loaded machine answers the first request).
	_, _, err = pb.store.AcquireLease(ctx, host, runID, "worker-a", time.Millisecond)
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)

	_, page = pb.get(t, pb.viewer, runPath)
	require.Contains(t, page, "no worker is following this run")
	require.Contains(t, page, "taking over")
	code, body := pb.apiGet(t, pb.engToken, apiPath)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body["progress_text"], "no worker is following this run")
	require.Contains(t, body["reason"], "no worker is following this run", "the reason says so too")

	// Another worker takes the lease over: the words are its own again.
	_, _, err = pb.store.AcquireLease(ctx, host, runID, "worker-b", time.Minute)
	require.NoError(t, err)
	require.NoError(t, pb.store.SetRunState(ctx, runID, store.RunRunning, "reconnecting to the host to follow the probe"))
	_, page = pb.get(t, pb.viewer, runPath)
	require.NotContains(t, page, "no worker is following this run")
	code, body = pb.apiGet(t, pb.engToken, apiPath)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "reconnecting to the host to follow the probe", body["reason"])
}

// A run another run measured beside says so on its page and in the API.
func TestContaminatedRunSaysSo(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	host, runID, runPath, apiPath := pb.runOnALabHost(t)
	_, page := pb.get(t, pb.viewer, runPath)
	require.NotContains(t, page, `id="contamination"`)
	_, body := pb.apiGet(t, pb.engToken, apiPath)
	require.Equal(t, false, body["contaminated"])

	lease, _, err := pb.store.AcquireLease(ctx, host, runID, "worker-a", time.Minute)
	require.NoError(t, err)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	_, err = pb.store.RecordNeighbours(ctx, runID, lease, ".accord/x/runs/1-1",
		[]store.SightedNeighbour{{Dir: "/home/lab/.accord/other/runs/5-1", FirstSeen: at, LastSeen: at.Add(4 * time.Second)}})
	require.NoError(t, err)

	_, page = pb.get(t, pb.viewer, runPath)
	require.Contains(t, page, `id="contamination"`)
	require.Contains(t, page, "cannot pass")
	require.Contains(t, page, "another Accord installation&#39;s run in /home/lab/.accord/other/runs/5-1 was active on the host from 10:00:00 to 10:00:04 UTC")
	code, body := pb.apiGet(t, pb.engToken, apiPath)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, true, body["contaminated"])
	require.Len(t, body["contamination"], 1)
}

// runOnALabHost makes a lab host and a queued run on it, and returns them
// with the run's page and API paths.
func (pb *programBundle) runOnALabHost(t *testing.T) (host, runID int64, runPath, apiPath string) {
	t.Helper()
	ctx := context.Background()
	host, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	runID, err = pb.store.CreateRun(ctx, store.NewRun{ProgramID: pb.programID, ProfileVersionID: pb.profileVersionID(t), HostID: host})
	require.NoError(t, err)
	runPath = pb.url("/runs/" + strconv.FormatInt(runID, 10))
	apiPath = "/api/v1/programs/" + strconv.FormatInt(pb.programID, 10) + "/runs/" + strconv.FormatInt(runID, 10)
	return host, runID, runPath, apiPath
}

// A cancel says what it does, on the run page and in the API: a run no
// worker took yet ends at once, and no worker launches its probe later;
// a run whose probe may be running says it is being stopped until the
// stop says more, and a stop job goes to the host (no worker holds it).
func TestCancelSaysWhatItDoes(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	host, queued, _, queuedAPI := pb.runOnALabHost(t)
	code, body := pb.api(t, "POST", queuedAPI+"/cancel", "", nil)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, store.RunCancelled, body["state"])
	require.Equal(t, "cancelled by eng@vendor.example before it started", body["reason"])
	// A worker that took the run meanwhile launches nothing.
	lease, _, err := pb.store.AcquireLease(ctx, host, queued, "worker-a", time.Minute)
	require.NoError(t, err)
	err = pb.store.InTx(ctx, func(tx *store.Store) error {
		if err := tx.CheckFence(ctx, lease); err != nil {
			return err
		}
		return tx.RecordLaunchIntent(ctx, queued, "/home/lab/.accord/runs/1-1", time.Hour)
	})
	require.ErrorIs(t, err, store.ErrRunFinal)
	run, err := pb.store.RunByID(ctx, queued)
	require.NoError(t, err)
	require.False(t, run.ProbeMayRun, "the host is not kept for a probe never launched")
	require.NoError(t, pb.store.ReleaseLease(ctx, lease))

	// A run whose worker may have launched its probe, and is gone.
	runID, err := pb.store.CreateRun(ctx, store.NewRun{ProgramID: pb.programID, ProfileVersionID: pb.profileVersionID(t), HostID: host})
	require.NoError(t, err)
	lease, _, err = pb.store.AcquireLease(ctx, host, runID, "worker-b", time.Minute)
	require.NoError(t, err)
	require.NoError(t, pb.store.SetRunState(ctx, runID, store.RunPreparing, "uploading the plan"))
	require.NoError(t, pb.store.InTx(ctx, func(tx *store.Store) error {
		if err := tx.CheckFence(ctx, lease); err != nil {
			return err
		}
		return tx.RecordLaunchIntent(ctx, runID, "/home/lab/.accord/runs/2-1", time.Hour)
	}))
	runPath := pb.url("/runs/" + strconv.FormatInt(runID, 10))
	apiPath := "/api/v1/programs/" + strconv.FormatInt(pb.programID, 10) + "/runs/" + strconv.FormatInt(runID, 10)
	code, body = pb.api(t, "POST", apiPath+"/cancel", "", nil)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, store.RunPreparing, body["state"], "it ends once its probe is stopped")
	require.Equal(t, "cancel asked for by eng@vendor.example: stopping the probe on the host", body["reason"])
	_, page := pb.get(t, pb.viewer, runPath)
	require.Contains(t, page, "cancel asked for by eng@vendor.example: stopping the probe on the host")
	var stops int
	require.NoError(t, pb.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'stop_run' AND args->>'run_id' = $1`, strconv.FormatInt(runID, 10)).Scan(&stops))
	require.Equal(t, 1, stops, "a stop job reaches the host")
}
