package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/sshtest"
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
		"ACCORD_DEMO_SSH_PORT": strconv.Itoa(freePort(t)), "ACCORD_DEMO_EMULATOR_PORTS": fmt.Sprintf("%d,%d", freePort(t), freePort(t)),
	}))
	require.NoError(t, err)
	lab, err := startDemoLab(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			lab.stop()
		}
	})

	kvDir := filepath.Join(dataDir, "demo", "kv")
	for _, name := range demoKVFiles {
		require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(kvDir, name)); return err == nil }, 30*time.Second, 50*time.Millisecond,
			"%s is laid out under the data directory", name)
	}
	// Every emulator names its file under the data directory, none in /dev/shm.
	var emulators int
	for _, p := range lab.procs {
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

	lab.stop()
	stopped = true
	for _, name := range demoKVFiles {
		require.NoFileExists(t, filepath.Join(kvDir, name), "removed at shutdown")
	}
}
