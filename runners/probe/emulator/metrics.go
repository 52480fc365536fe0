package emulator

import (
	"bufio"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// metrics are the emulator's Prometheus counters, named like vLLM's where
// vLLM has one (vLLM v1 counts prefix-cache queries and hits in tokens),
// so that the probe's scrape before and after a step reads either server.
// The text format is written directly: a dozen counters do not need a
// client library.
type metrics struct {
	model        string
	queries      atomic.Int64 // prompt tokens looked up in the prefix cache
	hits         atomic.Int64 // of which found
	promptTokens atomic.Int64
	genTokens    atomic.Int64
	success      atomic.Int64
	running      atomic.Int64
	blocksHit    atomic.Int64
	blocksRead   atomic.Int64
	bytesRead    atomic.Int64
	readNanos    atomic.Int64

	mu       sync.Mutex
	outcomes map[string]int64
}

func newMetrics(model string) *metrics {
	return &metrics{model: model, outcomes: map[string]int64{}}
}

func (m *metrics) kv(queryTokens, hitTokens int, f fetch) {
	m.queries.Add(int64(queryTokens))
	m.hits.Add(int64(min(hitTokens, queryTokens)))
	m.blocksHit.Add(int64(f.hitBlocks))
	m.blocksRead.Add(int64(f.readBlocks))
	m.bytesRead.Add(f.readBytes)
	m.readNanos.Add(int64(f.readTime))
}

func (m *metrics) finished(promptTokens, outputTokens int) {
	m.promptTokens.Add(int64(promptTokens))
	m.genTokens.Add(int64(outputTokens))
	m.success.Add(1)
}

func (m *metrics) outcome(name string) {
	m.mu.Lock()
	m.outcomes[name]++
	m.mu.Unlock()
}

func (m *metrics) serve(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	bw := bufio.NewWriter(w)
	label := `{model_name="` + escapeLabel(m.model) + `"}`
	counter := func(name, help string, labels string, v int64) {
		bw.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n")
		bw.WriteString(name + labels + " " + strconv.FormatInt(v, 10) + "\n")
	}
	counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", label, m.queries.Load())
	counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", label, m.hits.Load())
	counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", label, m.promptTokens.Load())
	counter("vllm:generation_tokens_total", "Number of generation tokens processed.", label, m.genTokens.Load())
	bw.WriteString("# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE vllm:request_success_total counter\n")
	bw.WriteString(`vllm:request_success_total{finished_reason="length",model_name="` + escapeLabel(m.model) + `"} ` + strconv.FormatInt(m.success.Load(), 10) + "\n")
	bw.WriteString("# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\n")
	bw.WriteString("vllm:num_requests_running" + label + " " + strconv.FormatInt(m.running.Load(), 10) + "\n")

	counter("accord_emulator_kv_blocks_hit_total", "KV blocks found in the in-memory cache.", "", m.blocksHit.Load())
	counter("accord_emulator_kv_blocks_read_total", "KV blocks read from the KV file.", "", m.blocksRead.Load())
	counter("accord_emulator_kv_read_bytes_total", "Bytes read from the KV file.", "", m.bytesRead.Load())
	bw.WriteString("# HELP accord_emulator_kv_read_seconds_total Time spent reading the KV file.\n# TYPE accord_emulator_kv_read_seconds_total counter\n")
	bw.WriteString("accord_emulator_kv_read_seconds_total " + strconv.FormatFloat(float64(m.readNanos.Load())/1e9, 'g', -1, 64) + "\n")

	m.mu.Lock()
	names := make([]string, 0, len(m.outcomes))
	for k := range m.outcomes {
		names = append(names, k)
	}
	sort.Strings(names)
	bw.WriteString("# HELP accord_emulator_requests_total Requests by outcome (ok, http_error, stream_error, early_close, stall, aborted, bad_request).\n# TYPE accord_emulator_requests_total counter\n")
	for _, k := range names {
		bw.WriteString(`accord_emulator_requests_total{outcome="` + escapeLabel(k) + `"} ` + strconv.FormatInt(m.outcomes[k], 10) + "\n")
	}
	m.mu.Unlock()
	_ = bw.Flush()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
