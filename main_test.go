package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/internal/freeport"
	"github.com/accordlab/accord/store/storetest"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(envMap(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", cfg.Listen)
	require.False(t, cfg.Dev)
	require.False(t, cfg.MigrateOnStart)
	require.Equal(t, "json", cfg.LogFormat)
	require.Equal(t, map[string]int{"default": 10, "runs": 50, "reports": 4}, cfg.Queues)
	require.EqualValues(t, 20, cfg.DBMaxConns)
	require.Equal(t, 15*time.Second, cfg.DemoStepDuration)

	dev, err := loadConfig(envMap(map[string]string{"ACCORD_DEV": "true"}))
	require.NoError(t, err)
	require.True(t, dev.MigrateOnStart, "dev migrates at start")
	require.Equal(t, "text", dev.LogFormat)
	require.True(t, dev.Demo, "dev seeds the demo")
	noDemo, err := loadConfig(envMap(map[string]string{"ACCORD_DEV": "true", "ACCORD_DEMO": "false"}))
	require.NoError(t, err)
	require.False(t, noDemo.Demo)

	bad := map[string]string{
		"ACCORD_LISTEN":              "8080",
		"DATABASE_URL":               "mysql://x",
		"ACCORD_DB_MAX_CONNS":        "0",
		"ACCORD_LOG_LEVEL":           "loud",
		"ACCORD_LOG_FORMAT":          "xml",
		"ACCORD_DEV":                 "maybe",
		"ACCORD_QUEUES":              "runs",
		"ACCORD_REQUEST_TIMEOUT":     "-1s",
		"ACCORD_BASE_URL":            "ftp://x",
		"ACCORD_DEMO":                "true", // published demo passwords: development mode only
		"ACCORD_RESCUE_AFTER":        "30s",  // shorter than River's job time limit
		"ACCORD_LEASE_TTL":           "1s",
		"ACCORD_WEBHOOK_ALLOW_CIDRS": "intranet",
		"ACCORD_EGRESS_ALLOW_CIDRS":  "10.0.0.0/33",
		"ACCORD_METRICS_LISTEN":      "9464",
		"ACCORD_DEMO_STEP_DURATION":  "2s",
	}
	for name, value := range bad {
		_, err := loadConfig(envMap(map[string]string{name: value}))
		require.Error(t, err, name)
		require.Contains(t, err.Error(), name, "the error names the variable")
	}
	// The egress allow-list under its name and its former one: both are
	// read, their CIDRs together.
	both, err := loadConfig(envMap(map[string]string{"ACCORD_EGRESS_ALLOW_CIDRS": "10.20.0.0/16", "ACCORD_WEBHOOK_ALLOW_CIDRS": "192.168.5.7"}))
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("192.168.5.7/32")}, both.EgressAllow)
	old, err := loadConfig(envMap(map[string]string{"ACCORD_WEBHOOK_ALLOW_CIDRS": "fd12::/64"}))
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("fd12::/64")}, old.EgressAllow)
	// A password in DATABASE_URL is never echoed.
	_, err = loadConfig(envMap(map[string]string{"DATABASE_URL": "mysql://u:hunter2@h/db"}))
	require.NotContains(t, err.Error(), "hunter2")
}

// tcpProxy forwards to a target and can be stopped and started again, to
// take "the database" away from a running server.
type tcpProxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{target: target}
	p.start(t, "127.0.0.1:0")
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) start(t *testing.T, addr string) {
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func testConfig(t *testing.T, dbURL string) Config {
	t.Helper()
	dir := t.TempDir()
	cfg, err := loadConfig(envMap(map[string]string{
		"ACCORD_LISTEN": "127.0.0.1:0", "DATABASE_URL": dbURL, "ACCORD_DATA_DIR": dir,
		"ACCORD_SHUTDOWN_TIMEOUT": "5s", "ACCORD_DB_MAX_CONNS": "5",
	}))
	require.NoError(t, err)
	return cfg
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestServeAnswersAndReadinessFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	dbURL, err := url.Parse(storetest.NewDatabase(t))
	require.NoError(t, err)
	proxy := newTCPProxy(t, dbURL.Host)
	dbURL.Host = proxy.addr
	cfg := testConfig(t, dbURL.String())

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, quietLog(), true, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	base := "http://" + addr
	client := &http.Client{Timeout: 10 * time.Second}

	status := func(path string) (int, map[string]any) {
		res, err := client.Get(base + path)
		require.NoError(t, err)
		defer res.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body
	}
	code, _ := status("/healthz")
	require.Equal(t, http.StatusOK, code)
	// Ready as soon as the database answers within /readyz's 3 s; on a
	// machine loaded by a second test suite the first answers can be late
	// (one was a 503 under two suites), so the test waits for it as it
	// does below after the database comes back.
	var body map[string]any
	require.Eventually(t, func() bool { code, body = status("/readyz"); return code == http.StatusOK },
		20*time.Second, 200*time.Millisecond, "readiness after start")
	require.Equal(t, true, body["ready"])
	res, err := client.Get(base + "/metrics")
	require.NoError(t, err)
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.True(t, strings.Contains(string(metrics), `accord_river_jobs{queue="default",state="available"}`), "River job counts in /metrics")
	require.True(t, strings.Contains(string(metrics), "go_goroutines"), "Go runtime metrics in /metrics")

	// The secret key was generated with mode 0400.
	info, err := os.Stat(filepath.Join(cfg.DataDir, "secret.key"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o400), info.Mode().Perm())

	// Take the database away: /readyz fails, /healthz still answers.
	proxy.stop()
	code, body = status("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "unreachable", body["database"])
	code, _ = status("/healthz")
	require.Equal(t, http.StatusOK, code)

	// Bring it back: ready again.
	proxy.start(t, proxy.addr)
	require.Eventually(t, func() bool { c, _ := status("/readyz"); return c == http.StatusOK }, 20*time.Second, 200*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestServeRefusesPendingMigrations(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, storetest.NewEmptyDatabase(t))
	err := serve(context.Background(), cfg, quietLog(), true, nil)
	require.ErrorContains(t, err, "pending migrations")
	require.ErrorContains(t, err, "accord migrate up")
}

// A request in flight when SIGTERM arrives completes; new connections are
// refused afterwards.
func TestGracefulShutdownOnSIGTERM(t *testing.T) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	started := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(1500 * time.Millisecond)
		_, _ = w.Write([]byte("finished"))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- runHTTPServer(ctx, quietLog(), srv, ln, 10*time.Second) }()

	result := make(chan string, 1)
	go func() {
		res, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err != nil {
			result <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		result <- string(b)
	}()
	<-started
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	require.Equal(t, "finished", <-result)
	require.NoError(t, <-done)
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	require.Error(t, err, "the listener is closed after shutdown")
}

// With ACCORD_METRICS_LISTEN, /metrics answers on that address only: the
// web listener, which the users reach, answers 404 there.
func TestMetricsOnTheirOwnListenAddress(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, storetest.NewDatabase(t))
	cfg.MetricsListen = fmt.Sprintf("127.0.0.1:%d", freeport.Port(t))
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, quietLog(), true, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	get := func(url string) (int, string) {
		res, err := http.Get(url)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	status, _ := get("http://" + addr + "/healthz")
	require.Equal(t, http.StatusOK, status)
	status, _ = get("http://" + addr + "/metrics")
	require.Equal(t, http.StatusNotFound, status, "not on the web listener")
	status, body := get("http://" + cfg.MetricsListen + "/metrics")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "accord_http_requests_total")
	status, _ = get("http://" + cfg.MetricsListen + "/")
	require.Equal(t, http.StatusNotFound, status, "the metrics listener serves /metrics alone")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	_, err := http.Get("http://" + cfg.MetricsListen + "/metrics")
	require.Error(t, err, "the metrics listener stopped with the server")
}
