package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// scrape reads the emulator's /metrics as Prometheus's own parser does.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

func family(t *testing.T, fams map[string]*dto.MetricFamily, name string, typ dto.MetricType) *dto.Metric {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "no %s", name)
	require.Equal(t, typ, f.GetType(), name)
	require.Len(t, f.Metric, 1, name)
	return f.Metric[0]
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// bucketBounds are a histogram's finite upper bounds (the text format
// adds +Inf).
func bucketBounds(h *dto.Histogram) []float64 {
	var out []float64
	for _, b := range h.Bucket {
		if !math.IsInf(b.GetUpperBound(), 1) {
			out = append(out, b.GetUpperBound())
		}
	}
	return out
}

// The emulator speaks vLLM's metrics: names, types, labels and bucket
// boundaries as vLLM v1 exposes them, and the values are the requests'
// own: the TTFT histogram holds each request's arrival-to-first-token
// time as the timings file records it, the ITL histogram each gap.
func TestMetricsAreVLLMs(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t)
	cfg.ITL = 2 * time.Millisecond
	cfg.PrefillPerToken = 100 * time.Microsecond
	b := setup(t, cfg)
	const requests, tokens = 3, 5
	for range requests {
		events(t, b.post(t, "/v1/chat/completions", chat(words(40, "w"), tokens, true), nil).Body)
	}
	resp := b.post(t, "/v1/completions", map[string]any{"prompt": words(20, "x"), "max_tokens": tokens}, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	fams := scrape(t, b.url)

	ttft := family(t, fams, "vllm:time_to_first_token_seconds", dto.MetricType_HISTOGRAM)
	require.Equal(t, map[string]string{"model_name": "m", "engine": "0"}, labels(ttft))
	require.Equal(t, ttftBuckets, bucketBounds(ttft.Histogram))
	require.EqualValues(t, requests+1, ttft.Histogram.GetSampleCount())
	e2e := family(t, fams, "vllm:e2e_request_latency_seconds", dto.MetricType_HISTOGRAM)
	require.Equal(t, requestLatencyBuckets, bucketBounds(e2e.Histogram))
	require.EqualValues(t, requests+1, e2e.Histogram.GetSampleCount())
	itl := family(t, fams, "vllm:inter_token_latency_seconds", dto.MetricType_HISTOGRAM)
	require.Equal(t, itlBuckets, bucketBounds(itl.Histogram))
	require.EqualValues(t, (requests+1)*(tokens-1), itl.Histogram.GetSampleCount(), "a gap between each two tokens")
	family(t, fams, "vllm:request_queue_time_seconds", dto.MetricType_HISTOGRAM)
	for _, g := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting"} {
		m := family(t, fams, g, dto.MetricType_GAUGE)
		require.Zero(t, m.Gauge.GetValue(), "%s when idle", g)
		require.Equal(t, map[string]string{"model_name": "m", "engine": "0"}, labels(m))
	}
	require.EqualValues(t, 3*40+20, family(t, fams, "vllm:prefix_cache_queries_total", dto.MetricType_COUNTER).Counter.GetValue())
	require.EqualValues(t, 2*32, family(t, fams, "vllm:prefix_cache_hits_total", dto.MetricType_COUNTER).Counter.GetValue(),
		"the second and third chat requests find the first one's two full blocks")
	success := family(t, fams, "vllm:request_success_total", dto.MetricType_COUNTER)
	require.EqualValues(t, requests+1, success.Counter.GetValue())
	require.Equal(t, "length", labels(success)["finished_reason"])

	// The histograms hold the timings file's own numbers.
	var ttftSum, e2eSum float64
	tms := b.timingLines(t)
	require.Len(t, tms, requests+1)
	for _, tm := range tms {
		ttftSum += float64(tm.FirstToken-tm.Recv) / 1e9
		e2eSum += float64(tm.Done-tm.Recv) / 1e9
	}
	require.InDelta(t, ttftSum, ttft.Histogram.GetSampleSum(), 1e-9)
	require.InDelta(t, e2eSum, e2e.Histogram.GetSampleSum(), 1e-9)
}

// With --max-num-seqs 1, a second request waits while the first holds
// the place: vllm:num_requests_waiting counts it, and its wait is in its
// queue time and its TTFT.
func TestMaxNumSeqsQueuesRequests(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t)
	cfg.MaxNumSeqs = 1
	b := setup(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first request stalls after half of its tokens, holding its place
	// until its client leaves.
	body, err := json.Marshal(chat("hold the place", 4, true))
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/v1/chat/completions", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Emulate-Fault", "stall")
	first, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer first.Body.Close()

	second := make(chan time.Time, 1)
	go func() {
		resp, err := http.Post(b.url+"/v1/completions", "application/json", bytes.NewReader([]byte(`{"prompt":"wait","max_tokens":2}`)))
		if err == nil {
			resp.Body.Close()
		}
		second <- time.Now()
	}()
	gauge := func(fams map[string]*dto.MetricFamily, name string) float64 {
		return family(t, fams, name, dto.MetricType_GAUGE).Gauge.GetValue()
	}
	require.Eventually(t, func() bool {
		fams := scrape(t, b.url)
		return gauge(fams, "vllm:num_requests_waiting") == 1 && gauge(fams, "vllm:num_requests_running") == 1
	}, 10*time.Second, 5*time.Millisecond)
	const held = 100 * time.Millisecond
	time.Sleep(held)
	select {
	case <-second:
		t.Fatal("the second request was answered while the first held the only place")
	default:
	}
	cancel() // the first client leaves: its place goes to the second
	<-second
	fams := scrape(t, b.url)
	require.Zero(t, gauge(fams, "vllm:num_requests_waiting"))
	queue := family(t, fams, "vllm:request_queue_time_seconds", dto.MetricType_HISTOGRAM).Histogram
	require.EqualValues(t, 2, queue.GetSampleCount())
	require.GreaterOrEqual(t, queue.GetSampleSum(), held.Seconds(), "the second waited at least as long as the test held the first")
	tms := b.timingLines(t)
	require.Len(t, tms, 2)
	waited := tms[0]
	if waited.Fault == "stall" {
		waited = tms[1]
	}
	require.GreaterOrEqual(t, time.Duration(waited.FirstToken-waited.Recv), held, "the wait is part of TTFT")
}

// The degradation switch multiplies the served TTFT at once, and 1
// restores it; it is thrown over HTTP as well.
func TestDegradationSwitch(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t)
	cfg.PrefillPerToken = 100 * time.Microsecond
	b := setup(t, cfg)
	send := func() {
		events(t, b.post(t, "/v1/completions", map[string]any{"prompt": words(50, "p"), "max_tokens": 2, "stream": true}, nil).Body)
	}
	factor := func(method, body string) (int, float64) {
		req, err := http.NewRequest(method, b.url+"/emulator/degradation", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var d degradation
		_ = json.NewDecoder(resp.Body).Decode(&d)
		return resp.StatusCode, d.Factor
	}
	code, f := factor(http.MethodGet, "")
	require.Equal(t, http.StatusOK, code)
	require.EqualValues(t, 1, f)
	send() // 50 tokens at 100 µs: 5 ms
	code, f = factor(http.MethodPut, `{"factor": 40}`)
	require.Equal(t, http.StatusOK, code)
	require.EqualValues(t, 40, f)
	send() // cached blocks are not recomputed: only the 2 words past the last full block, at 4 ms each
	require.NoError(t, b.server.Degrade(1))
	_, f = factor(http.MethodGet, "")
	require.EqualValues(t, 1, f, "restored")
	for _, body := range []string{`{"factor": 0}`, `{"factor": -2}`, `{"factor": 1e9}`, `nonsense`} {
		code, _ = factor(http.MethodPut, body)
		require.Equal(t, http.StatusBadRequest, code, body)
	}
	tms := b.timingLines(t)
	require.Len(t, tms, 2)
	ttft := func(i int) time.Duration { return time.Duration(tms[i].FirstToken - tms[i].Recv) }
	require.GreaterOrEqual(t, ttft(0), 5*time.Millisecond)
	require.GreaterOrEqual(t, ttft(1), 2*40*100*time.Microsecond, "degraded: 2 uncached tokens × 100 µs × 40")
}
