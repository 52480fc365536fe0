package emulator

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the emulator's Prometheus metrics. Those vLLM has carry
// vLLM v1's names, types, help texts, buckets and labels (model_name and
// engine; vllm/v1/metrics/loggers.py), so that a vLLM user's own queries
// and dashboards read the emulator unchanged: for example
// histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[1m]))).
// vLLM v1 counts prefix-cache queries and hits in tokens. The accord_emulator_*
// metrics are the emulator's own (its KV reads and request outcomes).
type metrics struct {
	registry *prometheus.Registry

	ttft      prometheus.Observer // arrival to the first token
	e2e       prometheus.Observer // arrival to the end, finished requests
	itl       prometheus.Observer // each gap between output chunks
	queueTime prometheus.Observer // arrival to admission (--max-num-seqs)
	running   prometheus.Gauge
	waiting   prometheus.Gauge

	queries      prometheus.Counter // prompt tokens looked up in the prefix cache
	hits         prometheus.Counter // of which found
	promptTokens prometheus.Counter
	genTokens    prometheus.Counter
	success      prometheus.Counter

	blocksHit   prometheus.Counter
	blocksRead  prometheus.Counter
	bytesRead   prometheus.Counter
	readSeconds prometheus.Counter
	outcomes    *prometheus.CounterVec
}

// vLLM's bucket boundaries, in seconds.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

func newMetrics(model string) *metrics {
	reg := prometheus.NewRegistry()
	// One engine, as a vLLM server without data parallelism labels it.
	engine := prometheus.Labels{"model_name": model, "engine": "0"}
	histogram := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: engine})
		reg.MustRegister(h)
		return h
	}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: engine})
		reg.MustRegister(g)
		return g
	}
	counter := func(name, help string, labels prometheus.Labels) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(c)
		return c
	}
	m := &metrics{registry: reg}
	m.ttft = histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.e2e = histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestLatencyBuckets)
	m.itl = histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets)
	m.queueTime = histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets)
	m.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
	m.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
	m.queries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", engine)
	m.hits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", engine)
	m.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", engine)
	m.genTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.", engine)
	// The emulator always generates max_tokens, so every request finishes
	// by length.
	m.success = counter("vllm:request_success_total", "Count of successfully processed requests.",
		prometheus.Labels{"model_name": model, "engine": "0", "finished_reason": "length"})

	m.blocksHit = counter("accord_emulator_kv_blocks_hit_total", "KV blocks found in the in-memory cache.", nil)
	m.blocksRead = counter("accord_emulator_kv_blocks_read_total", "KV blocks read from the KV file.", nil)
	m.bytesRead = counter("accord_emulator_kv_read_bytes_total", "Bytes read from the KV file.", nil)
	m.readSeconds = counter("accord_emulator_kv_read_seconds_total", "Time spent reading the KV file.", nil)
	m.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "accord_emulator_requests_total",
		Help: "Requests by outcome (ok, http_error, stream_error, early_close, stall, aborted, bad_request)."}, []string{"outcome"})
	reg.MustRegister(m.outcomes)
	return m
}

func (m *metrics) kv(queryTokens, hitTokens int, f fetch) {
	m.queries.Add(float64(queryTokens))
	m.hits.Add(float64(min(hitTokens, queryTokens)))
	m.blocksHit.Add(float64(f.hitBlocks))
	m.blocksRead.Add(float64(f.readBlocks))
	m.bytesRead.Add(float64(f.readBytes))
	m.readSeconds.Add(f.readTime.Seconds())
}

// finished counts a request answered in full; e2e is from its arrival to
// its last byte.
func (m *metrics) finished(promptTokens, outputTokens int, e2eNanos int64) {
	m.promptTokens.Add(float64(promptTokens))
	m.genTokens.Add(float64(outputTokens))
	m.success.Inc()
	m.e2e.Observe(float64(e2eNanos) / 1e9)
}

func (m *metrics) outcome(name string) { m.outcomes.WithLabelValues(name).Inc() }

// handler serves the registry in the format the scraper asks for (the
// text format unless it asks for another).
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
