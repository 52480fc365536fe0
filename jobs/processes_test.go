package jobs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/sshtest"
)

// workerProcess is a real `accord worker` on the bundle's database, with
// its own data folder and log.
type workerProcess struct {
	cmd *exec.Cmd
	log string
}

// startWorker starts `accord worker` with the bundle's secret and lab
// folder, the variables given (NAME=value) added; it is killed when the
// test ends.
func (b *testBundle) startWorker(t *testing.T, name string, env ...string) *workerProcess {
	t.Helper()
	dataDir := t.TempDir()
	secretFile := filepath.Join(dataDir, "secret.key")
	require.NoError(t, os.WriteFile(secretFile, b.secret, 0o400))
	logPath := filepath.Join(dataDir, name+".log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	t.Cleanup(func() { logFile.Close() })
	cmd := exec.Command(sshtest.BuildAccord(t), "worker")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+b.pool.Config().ConnString(), "ACCORD_DATA_DIR="+dataDir, "ACCORD_SECRET_KEY_FILE="+secretFile,
		"ACCORD_REMOTE_DIR="+b.remote, "ACCORD_QUEUES=runs=4,default=2,reports=1", "ACCORD_LOG_FORMAT=text", "ACCORD_LOG_LEVEL=debug",
		// A smaller pool than a server's 20: several workers run in each of
		// several tests, and two suites side by side share PostgreSQL's
		// 100 connections.
		"ACCORD_DB_MAX_CONNS=8")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	w := &workerProcess{cmd: cmd, log: logPath}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return w
}

// crash kills the worker with SIGKILL: no deferred work, no goodbye to the
// database or the host.
func (w *workerProcess) crash(t *testing.T) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGKILL))
	_, _ = w.cmd.Process.Wait()
}

// logText is what the worker logged, for failure messages.
func (w *workerProcess) logText() string {
	b, _ := os.ReadFile(w.log)
	s := string(b)
	if len(s) > 20000 {
		s = "…" + s[len(s)-20000:]
	}
	return strings.TrimSpace(s)
}
