package probe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// streamingServer is a small OpenAI-compatible chat server on 127.0.0.1
// that streams a few tokens per request and counts requests in a
// Prometheus counter, so that the probe's scrape deltas can be checked.
func streamingServer(t *testing.T) (base string, served *atomic.Int64) {
	t.Helper()
	served = &atomic.Int64{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		write := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			fl.Flush()
		}
		write(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant"}}}})
		for i := range 4 {
			time.Sleep(5 * time.Millisecond)
			write(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": fmt.Sprintf("t%d ", i)}}}})
		}
		write(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": 16, "completion_tokens": 4, "total_tokens": 20}})
		fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE test_requests_total counter\ntest_requests_total{model=\"m\"} %d\n# TYPE test_running gauge\ntest_running 1\n", served.Load())
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), served
}

func TestInferenceStep(t *testing.T) {
	t.Parallel()
	needBinary(t)
	base, served := streamingServer(t)
	plan := planOf(acceptance.StepSpec{Name: "chat", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
		Endpoint: base + "/v1", Model: "m", API: "chat",
		PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 16},
		OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 4},
		Load:         acceptance.Load{Mode: "concurrency", Sweep: []float64{1, 2}},
		Duration:     acceptance.Duration(2 * time.Second),
		MetricsURL:   base + "/metrics",
		Seed:         7,
	}})
	dir := runDir(t, plan)
	r := probe(t, "run", "--dir", dir)
	st := status(t, dir)
	require.Equal(t, 0, r.code, "%s\n%s", r.stderr, st.Reason)

	results := eventsOfType(events(t, dir), wire.EventStepResult)
	require.Len(t, results, 2, "one result per level")
	var total int64
	for i, label := range []string{"c=1", "c=2"} {
		res := results[i].Result
		require.Equal(t, label, res.Level)
		require.Equal(t, "probe-requests", res.Format)
		require.Equal(t, "out/01-chat/rep-1/"+label, res.Dir)
		require.Equal(t, res.Dir+"/"+wire.RequestsFile, res.Files[0])
		require.NotNil(t, res.Inference)
		require.Positive(t, res.Inference.Requests)
		levelDir := filepath.Join(dir, "out", "01-chat", "rep-1", label)
		f, err := os.Open(filepath.Join(levelDir, wire.RequestsFile))
		require.NoError(t, err)
		var n int64
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var rec wire.RequestRecord
			require.NoError(t, json.Unmarshal(sc.Bytes(), &rec))
			n++
		}
		f.Close()
		require.Positive(t, n)
		require.FileExists(t, filepath.Join(levelDir, wire.PromBefore))
		require.FileExists(t, filepath.Join(levelDir, wire.PromAfter))
		delta := res.PromDelta[`test_requests_total{model="m"}`]
		require.Positive(t, delta, "the counter increase between the scrapes")
		require.NotContains(t, res.PromDelta, "test_running", "gauges are not counters")
		total += int64(delta)
	}
	require.Equal(t, served.Load(), total, "every request served falls between a before and an after scrape")
}
