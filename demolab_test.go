package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/accordlab/accord/internal/demo"
	"github.com/accordlab/accord/internal/freeport"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/store/storetest"
)

// The dev server is killed (SIGKILL) while the demo's first run measures:
// its demo lab (sshd and emulators) lives on, the next server finds it and
// uses it again, and the run, taken over, completes against live
// emulators with no failed request. A clean stop then ends the lab.
func TestEndToEndDemoLabOutlivesAServerCrash(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	dataDir := t.TempDir()
	env := append(os.Environ(), "DATABASE_URL="+dbURL, "ACCORD_DATA_DIR="+dataDir, "ACCORD_DEV=true", "ACCORD_LISTEN=127.0.0.1:0",
		"ACCORD_DEMO_SSH_PORT="+strconv.Itoa(freeport.Port(t)), fmt.Sprintf("ACCORD_DEMO_EMULATOR_PORTS=%d,%d", freeport.Port(t), freeport.Port(t)),
		"ACCORD_REMOTE_DIR="+t.TempDir(), "ACCORD_LEASE_TTL=3s", "ACCORD_SHUTDOWN_TIMEOUT=10s", "ACCORD_DEMO_STEP_DURATION=6s", "ACCORD_DB_MAX_CONNS=8")
	start := func() (*exec.Cmd, *lockedBuffer) {
		cmd := exec.Command(sshtest.BuildAccord(t), "serve")
		cmd.Env = env
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, out
	}
	waitOutput := func(out *lockedBuffer, what string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Contains(out.String(), what) }, 120*time.Second, 100*time.Millisecond,
			"the server says %q:\n%s", what, out)
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	ctx := context.Background()
	labDir := filepath.Join(dataDir, "demo")

	first, out := start()
	waitOutput(out, "Accord demo is up")
	lab, err := demo.ReadLabState(labDir)
	require.NoError(t, err)
	require.Len(t, lab, 3, "sshd and two emulators")
	var runID int64
	require.Eventually(t, func() bool {
		return pool.QueryRow(ctx, `SELECT id FROM runs WHERE state = 'running' AND events_offset > 0`).Scan(&runID) == nil
	}, 120*time.Second, 200*time.Millisecond, "the demo's first run measures:\n%s", out)

	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_, _ = first.Process.Wait()
	time.Sleep(time.Second)
	for _, p := range lab {
		require.True(t, p.Running(), "%s (pid %d) outlived the server", p.Name, p.PID)
		require.True(t, p.Answers(), "%s still answers on %s", p.Name, p.Addr)
	}

	second, out := start()
	waitOutput(out, "The demo lab outlived the last server and is used again")
	again, err := demo.ReadLabState(labDir)
	require.NoError(t, err)
	require.Len(t, again, 3)
	for name, p := range again {
		require.Equal(t, lab[name].PID, p.PID, "%s is the same process", name)
	}

	// The run is taken over and completes; every request found a live
	// emulator.
	var state, verdict string
	require.Eventually(t, func() bool {
		err := pool.QueryRow(ctx, `SELECT state, coalesce(verdict, '') FROM runs WHERE id = $1`, runID).Scan(&state, &verdict)
		return err == nil && (state == "failed" || state == "cancelled" || (state == "done" && verdict != ""))
	}, 4*time.Minute, 500*time.Millisecond, "the run completes:\n%s", out)
	require.Equal(t, "done", state)
	rows, err := pool.Query(ctx, `SELECT data FROM run_events WHERE run_id = $1 AND type = 'step_result'`, runID)
	require.NoError(t, err)
	var requests, failed int64
	for rows.Next() {
		var raw []byte
		require.NoError(t, rows.Scan(&raw))
		var res wire.StepResult
		require.NoError(t, json.Unmarshal(raw, &res))
		if res.Inference != nil {
			requests += res.Inference.Requests
			failed += res.Inference.Failed
		}
	}
	require.NoError(t, rows.Err())
	require.Positive(t, requests)
	require.Zero(t, failed, "no request met a dead endpoint (%d requests)", requests)

	// A clean stop ends the lab.
	require.NoError(t, second.Process.Signal(syscall.SIGTERM))
	_, _ = second.Process.Wait()
	for _, p := range again {
		require.False(t, p.Running(), "%s (pid %d) stopped with a clean shutdown", p.Name, p.PID)
	}
	require.NoFileExists(t, filepath.Join(labDir, demo.LabStateFile))
}
