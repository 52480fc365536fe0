package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/browsertest"
)

// A multi-host run's page follows every host without a reload: the hosts
// panel's rows (state, reason, progress) change as the workers store
// where each host stands, from the live stream's hosts events.
func TestBrowserRunPageFollowsEveryHost(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	pv := pb.multiHostProfile(t)
	a, b, c := pb.pinnedHost(t, "lab-a"), pb.pinnedHost(t, "lab-b"), pb.pinnedHost(t, "lab-c")
	var runID int64
	require.NoError(t, pb.store.InTx(ctx, func(tx *store.Store) error {
		var err error
		if runID, err = tx.CreateRun(ctx, store.NewRun{ProgramID: pb.programID, ProfileVersionID: pv, HostID: a}); err != nil {
			return err
		}
		return tx.AddRunHosts(ctx, runID, []store.NewRunHost{{Role: "readers", HostID: a}, {Role: "readers", HostID: b}, {Role: "writer", HostID: c}})
	}))
	br := browsertest.New(t)
	signInBrowser(br, pb.ts.URL, "view@customer.example")
	br.Do(chromedp.Navigate(pb.ts.URL+pb.url(fmt.Sprintf("/runs/%d", runID))), chromedp.WaitVisible(chromedp.ID("run-hosts")))
	for i, name := range []string{"lab-a", "lab-b", "lab-c"} {
		require.Contains(t, br.Text(fmt.Sprintf("#run-host-%d", i)), name)
		require.Equal(t, store.RunHostQueued, br.Text(fmt.Sprintf("#run-host-%d [data-host-state]", i)))
	}
	browsertest.Eval[int](br, `window.accordMark = 1`)

	// A host is being prepared, another waits at the start barrier, the
	// third measures with its progress stored: each row follows.
	require.NoError(t, pb.store.SetRunHostState(ctx, runID, 0, store.RunHostPreparing, "uploading the probe"))
	require.NoError(t, pb.store.SetRunHostState(ctx, runID, 1, store.RunHostWaiting, "waiting for lab-a at barrier 0"))
	progress, err := json.Marshal(wire.Progress{Step: 2, Steps: 2, StepName: "write", Repetition: 1, Repetitions: 1, Fraction: 0.5, ElapsedSec: 3})
	require.NoError(t, err)
	_, err = pb.pool.Exec(ctx, `UPDATE run_hosts SET progress = $2 WHERE run_id = $1 AND ordinal = 2`, runID, progress)
	require.NoError(t, err)
	require.NoError(t, pb.store.SetRunHostState(ctx, runID, 2, store.RunHostRunning, "measuring"))
	state := func(i int, want string) string {
		return fmt.Sprintf(`(function () { var s = document.querySelector('#run-host-%d [data-host-state]').textContent.trim(); return s === %q ? "" : s; })()`, i, want)
	}
	br.WaitUntil(state(0, store.RunHostPreparing), 20*time.Second, "lab-a preparing")
	br.WaitUntil(state(1, store.RunHostWaiting), 20*time.Second, "lab-b waiting")
	br.WaitUntil(state(2, store.RunHostRunning), 20*time.Second, "lab-c running")
	require.Equal(t, "waiting for lab-a at barrier 0", br.Text("#run-host-1 [data-host-reason]"))
	require.Equal(t, "badge running", browsertest.Eval[string](br, `document.querySelector('#run-host-2 [data-host-state]').className`))
	require.Equal(t, "Step 2 of 2 (write), repetition 1 of 1 · 3s elapsed", br.Text("#run-host-2 [data-host-label]"))
	require.Equal(t, "50%", browsertest.Eval[string](br, `document.querySelector('#run-host-2 [data-host-bar]').style.width`))

	// Each ends: the rows say so, with a full bar, and the page never
	// reloaded to show it.
	for i := range 3 {
		require.NoError(t, pb.store.SetRunHostState(ctx, runID, i, store.RunHostEnded, "probe done; folder collected"))
	}
	for i := range 3 {
		br.WaitUntil(state(i, store.RunHostEnded), 20*time.Second, "host ended")
		require.Equal(t, "100%", browsertest.Eval[string](br, fmt.Sprintf(`document.querySelector('#run-host-%d [data-host-bar]').style.width`, i)))
	}
	br.WaitUntil(`window.accordMark === 1 ? "" : "the page reloaded"`, time.Second, "no reload")
	br.Screenshot("run-page-hosts-live")
}
