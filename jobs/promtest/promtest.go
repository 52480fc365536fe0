// Package promtest starts Debian's Prometheus (/usr/bin/prometheus) for
// tests: its configuration and storage in the test's temporary folder,
// scraping targets on 127.0.0.1 at a short interval and answering its
// HTTP API on a free loopback port. A test without the binary is skipped
// with the command that installs it.
package promtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Binary is where Debian's prometheus package installs the server.
const Binary = "/usr/bin/prometheus"

// Options configure one Prometheus.
type Options struct {
	// Targets are host:port addresses on 127.0.0.1 scraped as job Job.
	Targets []string
	// Job names the scrape job (default "vllm").
	Job string
	// MetricsPath is the targets' path (default /metrics).
	MetricsPath string
	// ScrapeInterval is how often the targets are scraped (default 1s).
	ScrapeInterval time.Duration
}

// Server is a running Prometheus.
type Server struct {
	// URL is the base of its HTTP API, e.g. http://127.0.0.1:41234.
	URL            string
	Job            string
	ScrapeInterval time.Duration
	Dir            string // its configuration, storage and log
}

// Start runs Prometheus for the test and stops it at the end.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		t.Skipf("Prometheus is not installed (%s missing): apt-get install prometheus, as .ci/run does", Binary)
	}
	if opts.Job == "" {
		opts.Job = "vllm"
	}
	if opts.MetricsPath == "" {
		opts.MetricsPath = "/metrics"
	}
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = time.Second
	}
	for _, target := range opts.Targets {
		host, _, err := net.SplitHostPort(target)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("promtest: target %q is not a host:port on 127.0.0.1", target)
		}
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(configText(opts)), 0o600); err != nil {
		t.Fatalf("promtest: write the configuration: %v", err)
	}
	// The free port is found by listening on port 0 and closing; another
	// process may take it meanwhile, so a failed start is tried again.
	var lastErr error
	for range 3 {
		s, err := start(t, dir, config, opts)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("promtest: %v", lastErr)
	return nil
}

// configText is the prometheus.yml of opts: one job, a short interval.
func configText(opts Options) string {
	quoted := make([]string, len(opts.Targets))
	for i, target := range opts.Targets {
		quoted[i] = fmt.Sprintf("%q", target)
	}
	interval := opts.ScrapeInterval.String()
	return fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: %[2]q
    metrics_path: %[3]q
    static_configs:
      - targets: [%[4]s]
`, interval, opts.Job, opts.MetricsPath, strings.Join(quoted, ", "))
}

func start(t testing.TB, dir, config string, opts Options) (*Server, error) {
	t.Helper()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(dir, fmt.Sprintf("prometheus-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create the log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(Binary,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, fmt.Sprintf("data-%d", port)),
		"--storage.tsdb.retention.time=1h",
		"--web.listen-address="+listen,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", Binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s := &Server{URL: "http://" + listen, Job: opts.Job, ScrapeInterval: opts.ScrapeInterval, Dir: dir}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("prometheus exited before it was ready (%v): %s", err, readLog(logPath))
		default:
		}
		if ready(s.URL) {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return nil, fmt.Errorf("prometheus was not ready within 30 s: %s", readLog(logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", readLog(logPath))
		}
	})
	return s, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func ready(base string) bool {
	resp, err := http.Get(base + "/-/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func readLog(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(data) > 8<<10 {
		data = data[len(data)-8<<10:]
	}
	return string(data)
}

// Sample is one value of an instant query.
type Sample struct {
	Labels map[string]string
	At     time.Time
	Value  string
}

// Query runs an instant query now and returns its vector or scalar.
func (s *Server) Query(ctx context.Context, query string) ([]Sample, error) {
	u := s.URL + "/api/v1/query?" + url.Values{"query": {query}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("promtest: query %q: %w", query, err)
	}
	defer resp.Body.Close()
	var a struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return nil, fmt.Errorf("promtest: query %q: %w", query, err)
	}
	if a.Status != "success" {
		return nil, fmt.Errorf("promtest: query %q: %s", query, a.Error)
	}
	var out []Sample
	switch a.Data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(a.Data.Result, &vec); err != nil {
			return nil, fmt.Errorf("promtest: query %q: %w", query, err)
		}
		for _, v := range vec {
			out = append(out, sample(v.Metric, v.Value))
		}
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(a.Data.Result, &v); err != nil {
			return nil, fmt.Errorf("promtest: query %q: %w", query, err)
		}
		out = append(out, sample(nil, v))
	default:
		return nil, fmt.Errorf("promtest: query %q: result type %s", query, a.Data.ResultType)
	}
	return out, nil
}

func sample(labels map[string]string, v [2]any) Sample {
	ts, _ := v[0].(float64)
	val, _ := v[1].(string)
	sec := int64(ts)
	return Sample{Labels: labels, At: time.Unix(sec, int64((ts-float64(sec))*1e9)), Value: val}
}

// WaitUp waits until every target of the job was scraped successfully
// (up == 1 for each).
func (s *Server) WaitUp(t testing.TB, targets int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	query := fmt.Sprintf(`up{job=%q} == 1`, s.Job)
	for {
		got, err := s.Query(context.Background(), query)
		if err == nil && len(got) >= targets {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("promtest: %d of %d targets up after 30 s (%v)", len(got), targets, errors.Join(err))
		}
		time.Sleep(s.ScrapeInterval / 4)
	}
}
