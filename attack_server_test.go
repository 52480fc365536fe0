package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/internal/freeport"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// serverProcess is `accord serve` run as a child process, so that what it
// costs (its resident memory) can be read from /proc.
type serverProcess struct {
	base  string
	cmd   *exec.Cmd
	pool  *pgxpool.Pool
	store *store.Store
	// tmp is the server's TMPDIR: uploads and spill files go there.
	tmp string
}

// startServerProcess runs the built accord binary's `serve` on a fresh
// database with extra environment variables, and waits for /healthz.
func startServerProcess(t *testing.T, extraEnv ...string) *serverProcess {
	t.Helper()
	dbURL := storetest.NewDatabase(t)
	dataDir := t.TempDir()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "secret.key"), []byte(hex.EncodeToString(raw)+"\n"), 0o400))
	addr := fmt.Sprintf("127.0.0.1:%d", freeport.Port(t))
	tmp := t.TempDir()
	cmd := exec.Command(sshtest.BuildAccord(t), "serve")
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + tmp,
		"ACCORD_LISTEN=" + addr, "ACCORD_BASE_URL=http://" + addr, "DATABASE_URL=" + dbURL, "ACCORD_DATA_DIR=" + dataDir,
		"ACCORD_WORKERS=false", "ACCORD_LOG_LEVEL=warn", "ACCORD_DB_MAX_CONNS=5", "ACCORD_SHUTDOWN_TIMEOUT=5s",
	}, extraEnv...)
	logFile, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("server log:\n%s", log)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("serve exited: %v\n%s", err, log)
		default:
		}
		require.True(t, time.Now().Before(deadline), "serve did not answer /healthz")
		time.Sleep(100 * time.Millisecond)
	}
	pool, err := store.Open(context.Background(), dbURL, 2)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return &serverProcess{base: "http://" + addr, cmd: cmd, pool: pool, store: store.New(pool), tmp: tmp}
}

// user creates an account with a password and returns its id.
func (p *serverProcess) user(t *testing.T, email string, org *int64, admin bool) (int64, string) {
	t.Helper()
	return userWithPassword(t, p.store, email, org, admin)
}

// userWithPassword creates an account with a password in st and returns
// its id and password.
func userWithPassword(t *testing.T, st *store.Store, email string, org *int64, admin bool) (int64, string) {
	t.Helper()
	password := "attack-test-" + email
	hash, err := auth.HashPassword(password)
	require.NoError(t, err)
	id, err := st.CreateUser(context.Background(), store.NewUser{Email: email, DisplayName: email, PasswordHash: hash, OrganizationID: org, IsAdmin: admin})
	require.NoError(t, err)
	return id, password
}

// signIn returns a client holding the session of email.
func (p *serverProcess) signIn(t *testing.T, email, password string) *http.Client {
	t.Helper()
	return signInAt(t, p.base, email, password)
}

// signInAt signs email in at the server at base and returns a client
// holding the session (it does not follow redirects).
func signInAt(t *testing.T, base, email, password string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, Timeout: 5 * time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(base+"/signin", url.Values{"email": {email}, "password": {password}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "sign-in of %s", email)
	return c
}

var procStatusKB = regexp.MustCompile(`(?m)^(VmRSS|VmHWM):\s+(\d+) kB`)

// memory reads the process's resident set and its peak (VmHWM) in bytes.
func (p *serverProcess) memory(t *testing.T) (rss, peak int64) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	require.NoError(t, err)
	for _, m := range procStatusKB.FindAllSubmatch(data, -1) {
		kb, err := strconv.ParseInt(string(m[2]), 10, 64)
		require.NoError(t, err)
		if string(m[1]) == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	require.NotZero(t, rss)
	require.NotZero(t, peak)
	return rss, peak
}

// resetPeak makes the process's VmHWM start again from its current RSS
// (Linux ≥ 4.0), so that the next reading is the peak of what follows.
func (p *serverProcess) resetPeak(t *testing.T) {
	t.Helper()
	require.NoError(t, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0))
}

// answer reads a response's status and body.
func answer(t *testing.T, resp *http.Response, err error) (int, string) {
	t.Helper()
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
