package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/accordlab/accord/internal/demo"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/handlers"
	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// cmdServe runs the web server (web=true) or only the River workers.
func cmdServe(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer, web bool) int {
	cfg, err := loadConfig(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "accord:", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	if err := serve(ctx, cfg, log, web, nil); err != nil {
		log.Error("accord stopped", "err", err)
		fmt.Fprintln(stderr, "accord:", err)
		return 1
	}
	return 0
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// serve wires everything and runs until ctx ends (SIGTERM), then shuts
// down: stop accepting, drain requests, stop River within the timeout.
// ready, when set, receives the listener's address once it accepts.
func serve(ctx context.Context, cfg Config, log *slog.Logger, withWeb bool, ready chan<- string) error {
	secret, err := loadSecret(cfg)
	if err != nil {
		return err
	}
	keys, err := auth.NewKeys(secret)
	if err != nil {
		return fmt.Errorf("config: ACCORD_SECRET_KEY_FILE: %w", err)
	}
	pool, err := store.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
	if err != nil {
		return fmt.Errorf("%w (check DATABASE_URL=%s)", err, redactURL(cfg.DatabaseURL))
	}
	defer pool.Close()
	if err := ensureMigrated(ctx, cfg, log, pool); err != nil {
		return err
	}
	st := store.New(pool)
	sealer, err := runners.NewSealer(secret)
	if err != nil {
		return fmt.Errorf("config: ACCORD_SECRET_KEY_FILE: %w", err)
	}
	runner := runnerConfig(cfg, secret)
	keyring, err := attest.OpenKeyring(filepath.Join(cfg.DataDir, "signing"), attest.KeyringOptions{KeyFile: cfg.SigningKeyFile})
	if err != nil {
		return fmt.Errorf("config: signing keys (ACCORD_DATA_DIR, ACCORD_SIGNING_KEY_FILE): %w", err)
	}
	// Every outbound call to a URL a user gave goes through one policy.
	outbound := egress.NewPolicy(cfg.EgressAllow, nil)
	deps := jobs.Deps{Log: log, Store: st, Runner: runner, Sealer: sealer, Holder: holderName(), Version: version, LeaseTTL: cfg.LeaseTTL, Keyring: keyring,
		Report: web.RenderReport, BaseURL: cfg.BaseURL, Egress: outbound}
	if err := os.MkdirAll(runner.Limits.TempDir, 0o700); err != nil {
		return fmt.Errorf("config: ACCORD_DATA_DIR=%s: %w", cfg.DataDir, err)
	}

	riverClient, err := newRiverClient(cfg, log, deps, pool, withWeb)
	if err != nil {
		return err
	}
	if riverClient.Queues() != nil && (cfg.RunWorkers || !withWeb) {
		if err := riverClient.Start(ctx); err != nil {
			return fmt.Errorf("river: start: %w", err)
		}
	}
	defer stopRiver(riverClient, cfg.ShutdownTimeout, log)

	// The web port is taken before the demo starts: "Accord demo is up"
	// is printed only when its address accepts connections, and a port
	// already in use stops the server before it starts a demo lab. Until
	// Serve runs below, connections wait in the listen backlog.
	var ln net.Listener
	if withWeb {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("config: ACCORD_LISTEN=%s: %w", cfg.Listen, err)
		}
		defer ln.Close() // on the ways out before Serve, which closes it too
	}
	if cfg.Demo && withWeb {
		lab, err := demo.StartLab(ctx, demoLabConfig(cfg), log)
		if err != nil {
			return fmt.Errorf("demo lab: %w (set ACCORD_DEMO=false to serve without it)", err)
		}
		defer lab.Stop()
		if err := demo.Seed(ctx, st, sealer, riverClient, lab, os.Stdout, cfg.BaseURL.String(), log); err != nil {
			return err
		}
	}
	if !withWeb {
		log.Info("accord worker started", "queues", cfg.Queues)
		<-ctx.Done()
		return nil
	}

	reg := prometheus.NewRegistry()
	handlers.RegisterProcessMetrics(reg, pool)
	opts := handlers.Options{
		Log: log, Pool: pool, Store: st, River: riverClient, Dev: cfg.Dev, BaseURL: cfg.BaseURL,
		RequestTimeout: cfg.RequestTimeout, Registry: reg, Keys: keys, Sealer: sealer, Runner: runner, Keyring: keyring, Egress: outbound,
		MetricsElsewhere: cfg.MetricsListen != "",
	}
	if cfg.Demo {
		opts.Demo = demoSignIn(demo.SignIn())
	}
	ui, err := newRiverUI(ctx, riverClient, log)
	if err != nil {
		return err
	}
	opts.RiverUI = ui
	handler := handlers.New(opts)
	defer handler.Close()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// The metrics listener stops with the web one, whichever way that ends.
	metricsCtx, stopMetrics := context.WithCancel(ctx)
	defer stopMetrics()
	metricsDone := make(chan error, 1)
	if cfg.MetricsListen != "" {
		mln, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("config: ACCORD_METRICS_LISTEN=%s: %w", cfg.MetricsListen, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", handler.MetricsHandler())
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		log.Info("accord metrics", "url", "http://"+mln.Addr().String()+"/metrics")
		go func() { metricsDone <- runHTTPServer(metricsCtx, log, msrv, mln, cfg.ShutdownTimeout) }()
	} else {
		metricsDone <- nil
	}
	log.Info("accord serving", "url", "http://"+ln.Addr().String(), "dev", cfg.Dev, "version", version)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	err = runHTTPServer(ctx, log, srv, ln, cfg.ShutdownTimeout)
	stopMetrics()
	return errors.Join(err, <-metricsDone)
}

// runHTTPServer serves until ctx ends, then stops accepting and waits up to
// timeout for requests in flight. Long-lived streams end through
// RegisterOnShutdown (handlers watch the server's base context).
func runHTTPServer(ctx context.Context, log *slog.Logger, srv *http.Server, ln net.Listener, timeout time.Duration) error {
	baseCtx, cancelStreams := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelStreams()
	srv.BaseContext = func(net.Listener) context.Context { return baseCtx }
	srv.RegisterOnShutdown(cancelStreams)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: draining requests", "timeout", timeout)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

func newRiverClient(cfg Config, log *slog.Logger, deps jobs.Deps, pool *pgxpool.Pool, web bool) (*river.Client[pgx.Tx], error) {
	rc := &river.Config{Logger: riverLogger(log), RescueStuckJobsAfter: cfg.RescueAfter}
	if cfg.RunWorkers || !web {
		rc.Queues = map[string]river.QueueConfig{}
		for name, n := range cfg.Queues {
			rc.Queues[name] = river.QueueConfig{MaxWorkers: n}
		}
		rc.Workers = jobs.Register(deps)
		rc.PeriodicJobs = jobs.Periodic(deps)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	return client, nil
}

// stopRiver lets running jobs finish within the timeout, then cancels them
// (they are retried elsewhere).
func stopRiver(c *river.Client[pgx.Tx], timeout time.Duration, log *slog.Logger) {
	if c.Queues() == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout/2)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		log.Warn("river: jobs still running at shutdown, cancelling them", "err", err)
		ctx2, cancel2 := context.WithTimeout(context.Background(), timeout/2)
		defer cancel2()
		_ = c.StopAndCancel(ctx2)
	}
}

func newRiverUI(ctx context.Context, client *river.Client[pgx.Tx], log *slog.Logger) (http.Handler, error) {
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		Logger:    log.With("component", "riverui"),
		Prefix:    "/admin/queue",
	})
	if err != nil {
		return nil, fmt.Errorf("river UI: %w", err)
	}
	if err := h.Start(ctx); err != nil {
		return nil, fmt.Errorf("river UI: %w", err)
	}
	return h, nil
}

// runnerConfig says how runs reach lab hosts. The remote folder carries an
// id derived from the secret, so that two Accord installations driving the
// same lab host never share run folders.
func runnerConfig(cfg Config, secret []byte) runners.Config {
	remote := cfg.RemoteDir
	if remote == "" {
		sum := sha256.Sum256(append([]byte("accord installation id\x00"), secret...))
		remote = ".accord/" + hex.EncodeToString(sum[:4])
	}
	return runners.Config{
		Options: sshrun.Options{RemoteBase: remote, AgentSockets: cfg.AgentSockets},
		Probe:   sshrun.ProbeSource{Dir: cfg.ProbeDir},
		// A file as large as the importers take (ten million requests'
		// records are 2.3 GB), streamed to a temporary file.
		Limits: sshrun.Limits{MaxFileBytes: parse.MaxRecordBytes, MaxTotalBytes: 16 << 30, TempDir: filepath.Join(cfg.DataDir, "tmp")},
	}
}

// holderName names this process in host leases.
func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// ensureMigrated applies migrations when configured to, and otherwise
// refuses to start with pending ones.
func ensureMigrated(ctx context.Context, cfg Config, log *slog.Logger, pool *pgxpool.Pool) error {
	if cfg.MigrateOnStart {
		applied, err := store.Migrate(ctx, pool)
		if err != nil {
			return err
		}
		for _, m := range applied {
			log.Info("migration applied", "file", m.Name)
		}
		return nil
	}
	st, err := store.Status(ctx, pool)
	if err != nil {
		return err
	}
	if !st.Current() {
		return fmt.Errorf("the database has %d pending migrations (and %d of River's): run `accord migrate up` first, or set ACCORD_MIGRATE_ON_START=true", len(st.Pending), len(st.RiverPending))
	}
	return nil
}

// loadSecret reads the server's secret. The default path is created with
// 32 random bytes (mode 0400) on first start; an explicitly configured file
// must exist.
func loadSecret(cfg Config) ([]byte, error) {
	b, err := os.ReadFile(cfg.SecretKeyFile)
	if errors.Is(err, fs.ErrNotExist) && cfg.SecretKeyFile == filepath.Join(cfg.DataDir, "secret.key") {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("config: ACCORD_DATA_DIR=%s: %w", cfg.DataDir, err)
		}
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(cfg.SecretKeyFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
		if err != nil {
			return nil, fmt.Errorf("config: ACCORD_SECRET_KEY_FILE=%s: %w", cfg.SecretKeyFile, err)
		}
		defer f.Close()
		if _, err := f.WriteString(hex.EncodeToString(raw) + "\n"); err != nil {
			return nil, fmt.Errorf("config: ACCORD_SECRET_KEY_FILE=%s: %w", cfg.SecretKeyFile, err)
		}
		return []byte(hex.EncodeToString(raw)), nil
	}
	if err != nil {
		return nil, fmt.Errorf("config: ACCORD_SECRET_KEY_FILE=%s: %w", cfg.SecretKeyFile, err)
	}
	secret := []byte(strings.TrimSpace(string(b)))
	if len(secret) < 32 {
		return nil, fmt.Errorf("config: ACCORD_SECRET_KEY_FILE=%s: needs at least 32 bytes of secret, has %d", cfg.SecretKeyFile, len(secret))
	}
	return secret, nil
}

// demoSignIn is the sign-in page's view of the demo's accounts.
func demoSignIn(a demo.Accounts) *web.DemoSignIn {
	d := &web.DemoSignIn{Password: a.Password}
	for _, u := range a.Accounts {
		d.Accounts = append(d.Accounts, web.DemoAccount{Email: u.Email, Name: u.Name, Role: u.Role, Org: u.Org})
	}
	return d
}
