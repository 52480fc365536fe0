package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg *prometheus.Registry) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "accord_http_requests_total",
			Help: "HTTP requests by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "accord_http_request_duration_seconds",
			Help:    "HTTP request durations by method and route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *httpMetrics) observe(method, route string, status int, d time.Duration) {
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(method, route).Observe(d.Seconds())
}

// RegisterProcessMetrics adds the Go runtime and process collectors and the
// River job counts to reg.
func RegisterProcessMetrics(reg *prometheus.Registry, pool *pgxpool.Pool) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if pool != nil {
		reg.MustRegister(&riverJobCollector{pool: pool})
	}
}

// riverJobCollector reads River's job counts by queue and state at scrape time.
type riverJobCollector struct{ pool *pgxpool.Pool }

var riverJobsDesc = prometheus.NewDesc("accord_river_jobs", "River jobs by queue and state.", []string{"queue", "state"}, nil)

func (c *riverJobCollector) Describe(ch chan<- *prometheus.Desc) { ch <- riverJobsDesc }

func (c *riverJobCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Every state of every known queue, zero included, so that dashboards
	// see a series before the first job of a kind.
	rows, err := c.pool.Query(ctx, `WITH queues AS (
			SELECT name AS queue FROM river_queue UNION SELECT DISTINCT queue FROM river_job UNION SELECT 'default'
		), states AS (SELECT unnest(enum_range(NULL::river_job_state)) AS state)
		SELECT q.queue, s.state::text, count(j.id)
		FROM queues q CROSS JOIN states s LEFT JOIN river_job j ON j.queue = q.queue AND j.state = s.state
		GROUP BY q.queue, s.state`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(riverJobsDesc, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var queue, state string
		var n int64
		if err := rows.Scan(&queue, &state, &n); err != nil {
			ch <- prometheus.NewInvalidMetric(riverJobsDesc, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(riverJobsDesc, prometheus.GaugeValue, float64(n), queue, state)
	}
}

// MetricsHandler serves the Prometheus metrics: at /metrics of the web
// routes, or on the operator's own metrics listener.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
}
