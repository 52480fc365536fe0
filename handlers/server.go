// Package handlers is Accord's HTTP side: one route table (routes.go), the
// middleware, the HTML pages and the JSON API. Handlers are methods named by
// verb (showRunPage, createRun, cancelRun) and follow one shape: load →
// authorize (404 for what is not the caller's) → bind → validate → re-render
// with errors, or save → redirect.
package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// Options are the server's dependencies, built in main.
type Options struct {
	Log            *slog.Logger
	Pool           *pgxpool.Pool
	Store          *store.Store
	River          *river.Client[pgx.Tx]
	Dev            bool
	BaseURL        *url.URL
	RequestTimeout time.Duration
	// Registry receives the HTTP metrics; /metrics serves it.
	Registry *prometheus.Registry
	// RiverUI is mounted under /admin/queue when set.
	RiverUI http.Handler
	// Keys sign sessions and API tokens (derived from the server's secret).
	Keys *auth.Keys
	// Sealer seals lab-host private keys; Runner reaches hosts (scans).
	Sealer *runners.Sealer
	Runner runners.Config
	// Keyring holds the installation's signing keys (reports, decisions).
	Keyring *attest.Keyring
	// Egress says which addresses a webhook URL may point to (nil: none of
	// the server's own networks).
	Egress *egress.Policy
	// MetricsElsewhere leaves /metrics out of the web routes: the operator
	// serves MetricsHandler on a listen address of its own
	// (ACCORD_METRICS_LISTEN).
	MetricsElsewhere bool
	// Demo lists the demo's accounts for the sign-in page (dev mode with
	// the demo only: they share a published password).
	Demo *web.DemoSignIn
}

// Server is the HTTP handler with its dependencies.
type Server struct {
	log     *slog.Logger
	pool    *pgxpool.Pool
	store   *store.Store
	river   *river.Client[pgx.Tx]
	dev     bool
	baseURL *url.URL
	timeout time.Duration
	metrics *httpMetrics
	reg     *prometheus.Registry
	riverUI http.Handler
	keys    *auth.Keys
	sealer  *runners.Sealer
	runner  runners.Config
	live    *liveHub
	keyring *attest.Keyring
	egress  *egress.Policy
	// metricsElsewhere: /metrics is not a web route (Options.MetricsElsewhere).
	metricsElsewhere bool
	demo             *web.DemoSignIn
	// bundles bounds the report bundles read at once (bundlegate.go).
	bundles *bundleGate

	handler http.Handler
}

// New builds the server and its route table.
func New(opts Options) *Server {
	s := &Server{
		log:     opts.Log,
		pool:    opts.Pool,
		store:   opts.Store,
		river:   opts.River,
		dev:     opts.Dev,
		baseURL: opts.BaseURL,
		timeout: opts.RequestTimeout,
		reg:     opts.Registry,
		riverUI: opts.RiverUI,
		keys:    opts.Keys,
		sealer:  opts.Sealer,
		runner:  opts.Runner,
		keyring: opts.Keyring,
		egress:  opts.Egress,

		metricsElsewhere: opts.MetricsElsewhere,
		bundles:          newBundleGate(maxBundleReads),
	}
	if opts.Dev {
		s.demo = opts.Demo
	}
	if s.egress == nil {
		s.egress = egress.NewPolicy(nil, nil)
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.timeout == 0 {
		s.timeout = 30 * time.Second
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.metrics = newHTTPMetrics(s.reg)
	s.reg.MustRegister(s.bundles.gauge())
	s.live = newLiveHub(s.pool, s.log)
	s.handler = s.routes()
	return s
}

// Close stops the server's background work (the live-updates listener);
// call it before closing the pool.
func (s *Server) Close() { s.live.close() }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// secureCookies is true when the public URL is https.
func (s *Server) secureCookies() bool { return s.baseURL != nil && s.baseURL.Scheme == "https" }

// ctxKey is the type of this package's context keys.
type ctxKey int

const (
	keyRequestID ctxKey = iota
	keyViewer
	keyAPIToken
)

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(keyRequestID).(string)
	return id
}
