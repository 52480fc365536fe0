package main

import (
	"fmt"
	"github.com/accordlab/accord/internal/demo"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/accordlab/accord/egress"
)

// Config is everything the process reads from its environment. It is built
// once in main and passed down; no package reads the environment itself.
type Config struct {
	Listen           string
	MetricsListen    string // /metrics on its own address when set
	DatabaseURL      string
	DBMaxConns       int32
	DataDir          string
	SecretKeyFile    string
	SigningKeyFile   string
	LogLevel         slog.Level
	LogFormat        string
	Dev              bool
	MigrateOnStart   bool
	Queues           map[string]int
	RequestTimeout   time.Duration
	ShutdownTimeout  time.Duration
	BaseURL          *url.URL
	ProbeDir         string
	RunWorkers       bool
	RescueAfter      time.Duration
	LeaseTTL         time.Duration
	RemoteDir        string
	AgentSockets     []string       // ssh-agent sockets lab hosts may authenticate with
	EgressAllow      []netip.Prefix // internal networks outbound calls (webhooks, watches) may reach nonetheless
	Demo             bool
	DemoSSHPort      int
	DemoPorts        [2]int        // the emulators: the NVMe-oF path, the local-NVMe path
	DemoStepDuration time.Duration // each repetition of the demo's TTFT step, warm-up included
}

// envVar documents one variable; the table is the single source for
// parsing, `accord help config` and the README.
type envVar struct {
	Name    string
	Default string
	Help    string
}

var envVars = []envVar{
	{"ACCORD_LISTEN", "127.0.0.1:8080", "address the web server listens on"},
	{"ACCORD_METRICS_LISTEN", "", "address of a listener of its own for /metrics (the Prometheus convention: a port the web's users cannot reach); empty: /metrics is on ACCORD_LISTEN"},
	{"DATABASE_URL", "postgres://127.0.0.1:5432/accord?sslmode=disable", "PostgreSQL connection URL (shared by the app and River)"},
	{"ACCORD_DB_MAX_CONNS", "20", "size of the PostgreSQL connection pool"},
	{"ACCORD_DATA_DIR", "./data", "directory for the secret key, the signing keys and the demo lab"},
	{"ACCORD_SECRET_KEY_FILE", "$ACCORD_DATA_DIR/secret.key", "32+ random bytes that sign sessions and seal host keys; generated (mode 0400) when the default path is missing"},
	{"ACCORD_SIGNING_KEY_FILE", "", "ECDSA P-256 report signing key (PKCS#8 PEM); empty: the keyring in $ACCORD_DATA_DIR/signing"},
	{"ACCORD_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"ACCORD_LOG_FORMAT", "json (text when ACCORD_DEV)", "json or text"},
	{"ACCORD_DEV", "false", "development mode: migrate at start, text logs, and the demo (see ACCORD_DEMO)"},
	{"ACCORD_MIGRATE_ON_START", "$ACCORD_DEV", "apply pending migrations when serve starts"},
	{"ACCORD_DEMO", "$ACCORD_DEV", "seed the demo installation and start the demo lab (a local sshd and two inference emulators) with the server; only in development mode"},
	{"ACCORD_DEMO_SSH_PORT", "2222", "port of the demo lab's sshd (127.0.0.1)"},
	{"ACCORD_DEMO_EMULATOR_PORTS", "8000,8001", "ports of the demo lab's two inference emulators: the NVMe-oF path, then the local-NVMe path"},
	{"ACCORD_DEMO_STEP_DURATION", "15s", "how long each of the three repetitions of the demo's TTFT profiles runs, its 2s of warm-up included (at least 3s, at most 10m): shorter brings the demo's runs sooner, judged from fewer requests; the demo's profiles take it when they are first seeded"},
	{"ACCORD_QUEUES", "default=10,runs=50,reports=4", "River queues this process works, as name=max_workers"},
	{"ACCORD_REQUEST_TIMEOUT", "30s", "time limit of one HTTP request (streams excepted)"},
	{"ACCORD_SHUTDOWN_TIMEOUT", "20s", "time to drain requests and stop River on SIGTERM"},
	{"ACCORD_BASE_URL", "http://localhost:8080", "public URL; https makes cookies Secure and every answer carry HSTS (Strict-Transport-Security, two years)"},
	{"ACCORD_PROBE_DIR", "", "directory with static accord binaries per architecture (accord-linux-amd64, accord-linux-arm64); empty: the running binary"},
	{"ACCORD_WORKERS", "true", "run River workers in `serve` (false: only `accord worker` processes work jobs)"},
	{"ACCORD_LEASE_TTL", "30s", "a host lease not renewed for this long means its worker is gone: another worker takes the run over about a third of it later (or once River has elected a new leader, about 15s, if the leader died); the heartbeat renews it every third of it; at least 3s"},
	{"ACCORD_REMOTE_DIR", ".accord/<installation id>", "folder on lab hosts (relative to the login's home) for the probe cache and run folders"},
	{"ACCORD_SSH_AGENT_SOCKETS", "", "comma-separated absolute paths of ssh-agent sockets lab hosts may authenticate with (empty: agent authentication is off; hosts use the key Accord generates)"},
	{"ACCORD_EGRESS_ALLOW_CIDRS", "", "comma-separated CIDRs that outbound calls to URLs users give (webhooks, production watches' Prometheus) may reach although they are the server's own networks (loopback, private, CGNAT, unique-local, link-local), for example the network of production Prometheus; cloud metadata addresses stay refused; empty: none"},
	{"ACCORD_WEBHOOK_ALLOW_CIDRS", "", "the former name of ACCORD_EGRESS_ALLOW_CIDRS, still read (its CIDRs are added to it)"},
	{"ACCORD_RESCUE_AFTER", "10m", "a job other than a run's (evaluating, signing, notifying) whose worker vanished is handed to another worker after this long, or after the job's own time limit if that is longer; at least 1m, River's time limit of a job that sets none: a shorter delay would hand over jobs still being worked. Runs are taken over sooner, through their host lease (ACCORD_LEASE_TTL)"},
}

// MinRescueAfter is the shortest ACCORD_RESCUE_AFTER: River's time limit
// of a job that sets none of its own (we leave River's JobTimeout at its
// default), which River requires the rescue delay to cover.
const MinRescueAfter = river.JobTimeoutDefault

// MinLeaseTTL is the shortest ACCORD_LEASE_TTL.
const MinLeaseTTL = 3 * time.Second

// configError names the variable at fault, so start-up stops with one clear line.
type configError struct {
	Name, Value, Problem string
}

func (e *configError) Error() string {
	return fmt.Sprintf("config: %s=%q: %s", e.Name, e.Value, e.Problem)
}

// loadConfig reads the configuration through getenv (os.Getenv in main, a
// map in tests).
func loadConfig(getenv func(string) string) (Config, error) {
	get := func(name string) (string, bool) {
		v := strings.TrimSpace(getenv(name))
		return v, v != ""
	}
	var c Config
	var err error

	if c.Dev, err = parseBool(get, "ACCORD_DEV", false); err != nil {
		return c, err
	}
	c.Listen = "127.0.0.1:8080"
	if v, ok := get("ACCORD_LISTEN"); ok {
		if _, _, splitErr := net.SplitHostPort(v); splitErr != nil {
			return c, &configError{"ACCORD_LISTEN", v, "must be host:port, for example 127.0.0.1:8080 or :8080"}
		}
		c.Listen = v
	}
	if v, ok := get("ACCORD_METRICS_LISTEN"); ok {
		if _, _, splitErr := net.SplitHostPort(v); splitErr != nil {
			return c, &configError{"ACCORD_METRICS_LISTEN", v, "must be host:port, for example 127.0.0.1:9464"}
		}
		if v == c.Listen {
			return c, &configError{"ACCORD_METRICS_LISTEN", v, "must differ from ACCORD_LISTEN"}
		}
		c.MetricsListen = v
	}
	c.DatabaseURL = "postgres://127.0.0.1:5432/accord?sslmode=disable"
	if v, ok := get("DATABASE_URL"); ok {
		u, parseErr := url.Parse(v)
		if parseErr != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return c, &configError{"DATABASE_URL", redactURL(v), "must be a postgres:// URL"}
		}
		c.DatabaseURL = v
	}
	maxConns, err := parseInt(get, "ACCORD_DB_MAX_CONNS", 20, 2, 1000)
	if err != nil {
		return c, err
	}
	c.DBMaxConns = int32(maxConns)
	c.DataDir = "./data"
	if v, ok := get("ACCORD_DATA_DIR"); ok {
		c.DataDir = v
	}
	c.SecretKeyFile = filepath.Join(c.DataDir, "secret.key")
	if v, ok := get("ACCORD_SECRET_KEY_FILE"); ok {
		c.SecretKeyFile = v
	}
	c.SigningKeyFile, _ = get("ACCORD_SIGNING_KEY_FILE")

	c.LogLevel = slog.LevelInfo
	if v, ok := get("ACCORD_LOG_LEVEL"); ok {
		if unmarshalErr := c.LogLevel.UnmarshalText([]byte(v)); unmarshalErr != nil {
			return c, &configError{"ACCORD_LOG_LEVEL", v, "must be debug, info, warn or error"}
		}
	}
	c.LogFormat = "json"
	if c.Dev {
		c.LogFormat = "text"
	}
	if v, ok := get("ACCORD_LOG_FORMAT"); ok {
		if v != "json" && v != "text" {
			return c, &configError{"ACCORD_LOG_FORMAT", v, "must be json or text"}
		}
		c.LogFormat = v
	}
	if c.MigrateOnStart, err = parseBool(get, "ACCORD_MIGRATE_ON_START", c.Dev); err != nil {
		return c, err
	}
	queues := "default=10,runs=50,reports=4"
	if v, ok := get("ACCORD_QUEUES"); ok {
		queues = v
	}
	if c.Queues, err = parseQueues(queues); err != nil {
		return c, &configError{"ACCORD_QUEUES", queues, err.Error()}
	}
	if c.RequestTimeout, err = parseDuration(get, "ACCORD_REQUEST_TIMEOUT", 30*time.Second); err != nil {
		return c, err
	}
	if c.ShutdownTimeout, err = parseDuration(get, "ACCORD_SHUTDOWN_TIMEOUT", 20*time.Second); err != nil {
		return c, err
	}
	base := "http://localhost:8080"
	if v, ok := get("ACCORD_BASE_URL"); ok {
		base = v
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, &configError{"ACCORD_BASE_URL", base, "must be an absolute http(s) URL"}
	}
	c.BaseURL = u
	c.ProbeDir, _ = get("ACCORD_PROBE_DIR")
	if c.RunWorkers, err = parseBool(get, "ACCORD_WORKERS", true); err != nil {
		return c, err
	}
	if c.RescueAfter, err = parseDuration(get, "ACCORD_RESCUE_AFTER", 10*time.Minute); err != nil {
		return c, err
	}
	if c.RescueAfter < MinRescueAfter {
		// River would refuse it at start (after migrations) in its own words.
		v, _ := get("ACCORD_RESCUE_AFTER")
		return c, &configError{"ACCORD_RESCUE_AFTER", v, fmt.Sprintf("must be at least %s: River's time limit of a job that sets none of its own; a shorter delay would hand jobs to another worker while the first may still be working them", shortDuration(MinRescueAfter))}
	}
	if c.LeaseTTL, err = parseDuration(get, "ACCORD_LEASE_TTL", 30*time.Second); err != nil {
		return c, err
	}
	if c.LeaseTTL < MinLeaseTTL {
		v, _ := get("ACCORD_LEASE_TTL")
		return c, &configError{"ACCORD_LEASE_TTL", v, fmt.Sprintf("must be at least %s: the heartbeat renews the lease every third of it, and a database round trip must fit in that", shortDuration(MinLeaseTTL))}
	}
	if c.Demo, err = parseBool(get, "ACCORD_DEMO", c.Dev); err != nil {
		return c, err
	}
	if c.Demo && !c.Dev {
		// The demo's accounts (a site admin among them) share a published
		// password: never outside development mode.
		v, _ := get("ACCORD_DEMO")
		return c, &configError{"ACCORD_DEMO", v, "the demo (accounts with a published password) runs only with ACCORD_DEV=true"}
	}
	if c.DemoSSHPort, err = parseInt(get, "ACCORD_DEMO_SSH_PORT", 2222, 1, 65535); err != nil {
		return c, err
	}
	c.DemoPorts = [2]int{8000, 8001}
	if v, ok := get("ACCORD_DEMO_EMULATOR_PORTS"); ok {
		a, b, found := strings.Cut(v, ",")
		p1, err1 := strconv.Atoi(strings.TrimSpace(a))
		p2, err2 := strconv.Atoi(strings.TrimSpace(b))
		if !found || err1 != nil || err2 != nil || p1 < 1 || p1 > 65535 || p2 < 1 || p2 > 65535 || p1 == p2 {
			return c, &configError{"ACCORD_DEMO_EMULATOR_PORTS", v, "must be two different ports, like 8000,8001"}
		}
		c.DemoPorts = [2]int{p1, p2}
	}
	if c.DemoStepDuration, err = parseDuration(get, "ACCORD_DEMO_STEP_DURATION", demo.DefaultStepDuration); err != nil {
		return c, err
	}
	if c.DemoStepDuration < demo.DemoWarmup+time.Second || c.DemoStepDuration > 10*time.Minute {
		v, _ := get("ACCORD_DEMO_STEP_DURATION")
		return c, &configError{"ACCORD_DEMO_STEP_DURATION", v, "must be between 3s (2s of warm-up and a second measured) and 10m"}
	}
	if v, ok := get("ACCORD_REMOTE_DIR"); ok {
		if strings.ContainsAny(v, " '\"\\$`;&|<>*?\n") || strings.Contains(v, "..") {
			return c, &configError{"ACCORD_REMOTE_DIR", v, "must be a plain path without spaces, quotes, shell characters or .."}
		}
		c.RemoteDir = v
	}
	if v, ok := get("ACCORD_SSH_AGENT_SOCKETS"); ok {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				return c, &configError{"ACCORD_SSH_AGENT_SOCKETS", v, "must be absolute, clean paths separated by commas"}
			}
			c.AgentSockets = append(c.AgentSockets, p)
		}
	}
	// ACCORD_WEBHOOK_ALLOW_CIDRS is the variable's name from when only
	// webhooks went through the egress policy; an installation that set
	// it keeps what it allowed.
	for _, name := range []string{"ACCORD_EGRESS_ALLOW_CIDRS", "ACCORD_WEBHOOK_ALLOW_CIDRS"} {
		if v, ok := get(name); ok {
			allow, err := egress.ParseCIDRs(v)
			if err != nil {
				return c, &configError{name, v, err.Error()}
			}
			c.EgressAllow = append(c.EgressAllow, allow...)
		}
	}
	return c, nil
}

func parseBool(get func(string) (string, bool), name string, def bool) (bool, error) {
	v, ok := get(name)
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &configError{name, v, "must be true or false"}
	}
	return b, nil
}

func parseInt(get func(string) (string, bool), name string, def, lo, hi int) (int, error) {
	v, ok := get(name)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, &configError{name, v, fmt.Sprintf("must be a whole number from %d to %d", lo, hi)}
	}
	return n, nil
}

func parseDuration(get func(string) (string, bool), name string, def time.Duration) (time.Duration, error) {
	v, ok := get(name)
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, &configError{name, v, "must be a positive duration such as 30s or 2m"}
	}
	return d, nil
}

func parseQueues(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		name, n, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("must be a list like default=10,runs=50")
		}
		workers, err := strconv.Atoi(n)
		if err != nil || workers < 1 || workers > 10000 {
			return nil, fmt.Errorf("queue %q: max workers must be 1..10000", name)
		}
		out[name] = workers
	}
	return out, nil
}

// shortDuration writes 1m rather than 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		return strings.TrimSuffix(s, "0s")
	}
	return s
}

// redactURL hides a password in a connection URL before it is printed.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// demoLabConfig is the part of the configuration the demo lab takes.
func demoLabConfig(cfg Config) demo.LabConfig {
	return demo.LabConfig{DataDir: cfg.DataDir, SSHPort: cfg.DemoSSHPort, Ports: cfg.DemoPorts, ProbeDir: cfg.ProbeDir, StepDuration: cfg.DemoStepDuration}
}
