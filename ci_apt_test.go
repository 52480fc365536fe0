package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// `make run` waits while another package install holds dpkg's lock, says
// what it waits for, and gives up after its timeout with a message
// (.ci/apt.sh, with the lock paths and the timeout pointed at a test file).
func TestAptWaitsForTheDpkgLockAndSaysSo(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("fuser"); err != nil {
		t.Skip("fuser (psmisc) is not installed: .ci/apt.sh leaves the wait to apt-get's own DPkg::Lock::Timeout")
	}
	lock := filepath.Join(t.TempDir(), "lock-frontend")
	require.NoError(t, os.WriteFile(lock, nil, 0o600))
	f, err := os.Open(lock)
	require.NoError(t, err)
	// Another "package manager" holds the lock file open (the test does not).
	holder := exec.Command("sleep", "300")
	holder.Stdin = f
	require.NoError(t, holder.Start())
	require.NoError(t, f.Close())
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })

	wait := func() (int, string) {
		// As ensure-tools.sh runs it: set -euo pipefail.
		cmd := exec.Command("bash", "-c", `set -euo pipefail; source .ci/apt.sh; apt_wait_for_lock make-run`)
		cmd.Env = append(os.Environ(), "ACCORD_APT_LOCKS="+lock, "ACCORD_APT_LOCK_TIMEOUT=2")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		require.NoError(t, err)
		return 0, string(out)
	}
	code, out := wait()
	require.Equal(t, 1, code, out)
	pid := strconv.Itoa(holder.Process.Pid)
	require.Contains(t, out, "make-run: waiting for another package install to finish: "+pid+" (sleep) holds the dpkg lock (waited 0s of 2s)")
	require.Contains(t, out, "make-run: gave up after 2s: the package manager is still busy ("+pid+" (sleep)); run make run again when it is done")

	require.NoError(t, holder.Process.Kill())
	_ = holder.Wait()
	code, out = wait()
	require.Equal(t, 0, code, out)
	require.Empty(t, out, "a free lock is not waited for")
}
