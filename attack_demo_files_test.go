package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
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

	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/store/storetest"
)

// The demo's "NVMe-oF" emulator kept its 256 MiB KV file at
// /dev/shm/accord-demo-<uid>/nvmeof.kv, shared by every instance of the
// same user and left behind. Both emulators' files now live under the
// installation's data directory, and stopping the lab removes them.
func TestAttackDemoEmulatorFilesSharedAndLeftBehind(t *testing.T) {
	t.Parallel()
	probeDir := t.TempDir()
	require.NoError(t, os.Symlink(sshtest.BuildAccord(t), filepath.Join(probeDir, "accord-linux-amd64")))
	dataDir := t.TempDir()
	cfg, err := loadConfig(envMap(map[string]string{
		"ACCORD_DEV": "true", "ACCORD_DATA_DIR": dataDir, "ACCORD_PROBE_DIR": probeDir,
		"ACCORD_DEMO_SSH_PORT": strconv.Itoa(freeport.Port(t)), "ACCORD_DEMO_EMULATOR_PORTS": fmt.Sprintf("%d,%d", freeport.Port(t), freeport.Port(t)),
	}))
	require.NoError(t, err)
	lab, err := demo.StartLab(context.Background(), demoLabConfig(cfg), quietLog())
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			lab.Stop()
		}
	})

	kvDir := filepath.Join(dataDir, "demo", "kv")
	for _, name := range demo.KVFiles {
		require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(kvDir, name)); return err == nil }, 30*time.Second, 50*time.Millisecond,
			"%s is laid out under the data directory", name)
	}
	// Every emulator names its file under the data directory, none in /dev/shm.
	var emulators int
	started, err := demo.ReadLabState(filepath.Join(dataDir, "demo"))
	require.NoError(t, err)
	for _, p := range started {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		require.NoError(t, err)
		args := strings.Split(string(cmdline), "\x00")
		for i, a := range args {
			if a == "--kv-file" {
				emulators++
				require.True(t, strings.HasPrefix(args[i+1], kvDir+"/"), "the emulator's file %s", args[i+1])
			}
		}
	}
	require.Equal(t, 2, emulators)

	lab.Stop()
	stopped = true
	for _, name := range demo.KVFiles {
		require.NoFileExists(t, filepath.Join(kvDir, name), "removed at shutdown")
	}
}

// The demo's KV-cache lookup profile lays out a 64 MiB fio file,
// demo/fio/kv-blocks.dat, which stayed behind when the server stopped.
// Through the real path: `accord serve` in dev mode with its demo lab, an
// engineer runs that profile in the browser's form, the probe lays the
// file out with fio; SIGTERM, and the KV files and the fio file are gone.
func TestEndToEndAttackDemoFioFileLeftBehindAtShutdown(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	dataDir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freeport.Port(t))
	base := "http://" + addr
	cmd := exec.Command(sshtest.BuildAccord(t), "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "ACCORD_DATA_DIR="+dataDir, "ACCORD_DEV=true", "ACCORD_LISTEN="+addr, "ACCORD_BASE_URL="+base,
		"ACCORD_DEMO_SSH_PORT="+strconv.Itoa(freeport.Port(t)), fmt.Sprintf("ACCORD_DEMO_EMULATOR_PORTS=%d,%d", freeport.Port(t), freeport.Port(t)),
		// The run below waits for the demo's own two to finish with the
		// host: short ones.
		"ACCORD_REMOTE_DIR="+t.TempDir(), "ACCORD_SHUTDOWN_TIMEOUT=10s", "ACCORD_DEMO_STEP_DURATION=3s", "ACCORD_DB_MAX_CONNS=8")
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = demo.StopRecorded(dataDir) // what a failed test left running
	})
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "Accord demo is up") }, 120*time.Second, 100*time.Millisecond,
		"the demo starts:\n%s", out)

	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	ctx := context.Background()
	var programID, hostID, versionID int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT program_id, id FROM hosts`).Scan(&programID, &hostID))
	require.NoError(t, pool.QueryRow(ctx, `SELECT v.id FROM profile_versions v JOIN profiles p ON p.id = v.profile_id
		WHERE p.name = 'Demo KV-cache lookup I/O'`).Scan(&versionID))
	engineer := signInAt(t, base, "vendor.engineer@accord.demo", demo.Password)
	resp, err := engineer.PostForm(fmt.Sprintf("%s/programs/%d/runs", base, programID), url.Values{"profile_version": {strconv.FormatInt(versionID, 10)},
		"host": {strconv.FormatInt(hostID, 10)}, "confirm_readiness": {"1"}, "confirm_warnings": {"1"}})
	status, page := answer(t, resp, err)
	require.Equal(t, http.StatusSeeOther, status, page)

	kvDir, fioFile := filepath.Join(dataDir, "demo", "kv"), filepath.Join(dataDir, "demo", "fio", "kv-blocks.dat")
	require.Eventually(t, func() bool {
		fi, err := os.Stat(fioFile)
		return err == nil && fi.Size() == 64<<20
	}, 5*time.Minute, 200*time.Millisecond, "fio lays its 64 MiB file out:\n%s", out)
	for _, name := range demo.KVFiles {
		require.FileExists(t, filepath.Join(kvDir, name))
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-exited:
		exited <- nil // for the cleanup
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM:\n%s", out)
	}
	require.NoFileExists(t, fioFile, "the fio file is removed at shutdown")
	for _, name := range demo.KVFiles {
		require.NoFileExists(t, filepath.Join(kvDir, name), "the KV files are removed at shutdown")
	}
	left, err := os.ReadDir(filepath.Join(dataDir, "demo", "fio"))
	require.NoError(t, err)
	require.Empty(t, left)
}
