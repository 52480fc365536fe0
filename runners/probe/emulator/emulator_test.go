package emulator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type testBundle struct {
	url     string // http://127.0.0.1:PORT
	server  *Server
	notes   *syncBuffer
	timings string
	stop    func()
}

func baseConfig(t *testing.T) Config {
	return Config{
		Model: "m", BlockTokens: 16, BlockBytes: 4096, CacheBlocks: 1024,
		ITL: time.Millisecond, DefaultMaxTokens: 16, Seed: 3,
		Timings: filepath.Join(t.TempDir(), "timings.jsonl"),
	}
}

func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	notes := &syncBuffer{}
	s, err := New(cfg, notes)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	var once sync.Once
	b := &testBundle{url: "http://" + ln.Addr().String(), server: s, notes: notes, timings: cfg.Timings}
	b.stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
			require.NoError(t, s.Close())
		})
	}
	t.Cleanup(b.stop)
	return b
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (b *testBundle) post(t *testing.T, path string, body any, header map[string]string) *http.Response {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, b.url+path, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads a whole SSE body: the data of each event.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, data)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func (b *testBundle) timingLines(t *testing.T) []timing {
	t.Helper()
	b.stop()
	data, err := os.ReadFile(b.timings)
	require.NoError(t, err)
	var out []timing
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var tm timing
		require.NoError(t, json.Unmarshal([]byte(line), &tm))
		out = append(out, tm)
	}
	return out
}

func words(n int, tag string) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("%s%d", tag, i)
	}
	return strings.Join(w, " ")
}

func chat(prompt string, maxTokens int, stream bool) map[string]any {
	return map[string]any{
		"model": "m", "messages": []map[string]any{{"role": "user", "content": prompt}},
		"max_tokens": maxTokens, "stream": stream, "stream_options": map[string]bool{"include_usage": stream},
	}
}

type sseChunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
		Details          struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func decode(t *testing.T, s string) sseChunk {
	t.Helper()
	var c sseChunk
	require.NoError(t, json.Unmarshal([]byte(s), &c), s)
	return c
}

func TestChatStreamShape(t *testing.T) {
	t.Parallel()
	b := setup(t, baseConfig(t))
	resp := b.post(t, "/v1/chat/completions", chat(words(40, "w"), 5, true), map[string]string{"X-Request-Id": "r1"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	ev := events(t, resp.Body)
	require.Len(t, ev, 1+5+1+1+1, "role, 5 tokens, finish, usage, [DONE]")
	role := decode(t, ev[0])
	require.Equal(t, "chat.completion.chunk", role.Object)
	require.Equal(t, "assistant", *role.Choices[0].Delta.Role)
	require.Empty(t, *role.Choices[0].Delta.Content)
	for _, e := range ev[1:6] {
		c := decode(t, e)
		require.Nil(t, c.Choices[0].Delta.Role)
		require.Len(t, strings.Fields(*c.Choices[0].Delta.Content), 1)
		require.Nil(t, c.Usage)
	}
	fin := decode(t, ev[6])
	require.Equal(t, "length", *fin.Choices[0].FinishReason)
	require.Nil(t, fin.Choices[0].Delta.Content)
	usage := decode(t, ev[7])
	require.Empty(t, usage.Choices)
	require.Equal(t, 40, usage.Usage.PromptTokens)
	require.Equal(t, 5, usage.Usage.CompletionTokens)
	require.Equal(t, 45, usage.Usage.TotalTokens)
	require.Equal(t, "[DONE]", ev[8])

	tms := b.timingLines(t)
	require.Len(t, tms, 1)
	tm := tms[0]
	require.Equal(t, "r1", tm.ID)
	require.Equal(t, 200, tm.Status)
	require.True(t, tm.Stream)
	require.Less(t, tm.Recv, tm.FirstToken)
	require.LessOrEqual(t, tm.FirstToken, tm.LastToken)
	require.LessOrEqual(t, tm.LastToken, tm.Done)
	require.GreaterOrEqual(t, tm.LastToken-tm.FirstToken, int64(4*time.Millisecond), "4 gaps of 1 ms")
	require.Equal(t, 2, tm.MissBlocks)
}

func TestCompletionsAndWholeResponses(t *testing.T) {
	t.Parallel()
	b := setup(t, baseConfig(t))
	resp := b.post(t, "/v1/completions", map[string]any{"model": "m", "prompt": "a b c", "max_tokens": 3, "stream": true}, nil)
	ev := events(t, resp.Body)
	require.Len(t, ev, 3+1+1, "no role chunk, no usage chunk unless asked")
	require.Equal(t, "text_completion", decode(t, ev[0]).Object)
	require.NotEmpty(t, *decode(t, ev[0]).Choices[0].Text)

	resp = b.post(t, "/v1/chat/completions", chat("x y", 4, false), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var whole struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct{ PromptTokens, CompletionTokens int } `json:"usage"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&whole))
	require.Equal(t, "chat.completion", whole.Object)
	require.Len(t, strings.Fields(whole.Choices[0].Message.Content), 4)

	resp = b.post(t, "/v1/completions", map[string]any{"prompt": []string{"p q", "r"}}, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var wc struct {
		Choices []struct{ Text string } `json:"choices"`
		Usage   struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&wc))
	require.Equal(t, 3, wc.Usage.PromptTokens)
	require.Equal(t, 16, wc.Usage.CompletionTokens, "--default-max-tokens")

	r, err := http.Get(b.url + "/v1/models")
	require.NoError(t, err)
	defer r.Body.Close()
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	require.NoError(t, json.NewDecoder(r.Body).Decode(&models))
	require.Equal(t, "m", models.Data[0].ID)
}

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, baseConfig(t))
	cases := []struct {
		body   any
		header map[string]string
		status int
	}{
		{map[string]any{"model": "other", "prompt": "x"}, nil, http.StatusNotFound},
		{map[string]any{"messages": []any{}}, nil, http.StatusBadRequest},
		{map[string]any{"prompt": 5}, nil, http.StatusBadRequest},
		{map[string]any{"prompt": "x", "max_tokens": 0}, nil, http.StatusBadRequest},
		{map[string]any{"prompt": "x"}, map[string]string{"X-Emulate-Fault": "explode"}, http.StatusBadRequest},
		{map[string]any{"prompt": "x"}, map[string]string{"X-Emulate-Fault": "http-503"}, http.StatusServiceUnavailable},
		{map[string]any{"prompt": "x"}, map[string]string{"X-Emulate-Chunk-Tokens": "0"}, http.StatusBadRequest},
	}
	for _, tc := range cases {
		path := "/v1/completions"
		if m, ok := tc.body.(map[string]any); ok && m["messages"] != nil {
			path = "/v1/chat/completions"
		}
		resp := b.post(t, path, tc.body, tc.header)
		require.Equal(t, tc.status, resp.StatusCode, "%v %v", tc.body, tc.header)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		require.NotEmpty(t, e.Error.Message)
		require.Equal(t, tc.status, e.Error.Code)
	}
}

func TestStreamFaults(t *testing.T) {
	t.Parallel()
	b := setup(t, baseConfig(t))
	// stream-error: an error object, then [DONE].
	ev := events(t, b.post(t, "/v1/chat/completions", chat("a", 6, true), map[string]string{"X-Emulate-Fault": "stream-error"}).Body)
	require.Equal(t, "[DONE]", ev[len(ev)-1])
	require.Equal(t, "emulated error in the stream", decode(t, ev[len(ev)-2]).Error.Message)
	require.Len(t, ev, 1+3+2, "role, half of the tokens, error, [DONE]")

	// no-usage.
	ev = events(t, b.post(t, "/v1/chat/completions", chat("a", 2, true), map[string]string{"X-Emulate-Fault": "no-usage"}).Body)
	require.Len(t, ev, 1+2+1+1)
	for _, e := range ev[:len(ev)-1] {
		require.Nil(t, decode(t, e).Usage)
	}

	// early-close: the body ends with an error, without [DONE].
	resp := b.post(t, "/v1/chat/completions", chat("a", 6, true), map[string]string{"X-Emulate-Fault": "early-close"})
	data, err := io.ReadAll(resp.Body)
	require.Error(t, err)
	require.NotContains(t, string(data), "[DONE]")

	// stall: nothing after half of the tokens until the client leaves.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/v1/completions", strings.NewReader(`{"prompt":"a","max_tokens":4,"stream":true}`))
	require.NoError(t, err)
	req.Header.Set("X-Emulate-Fault", "stall")
	start := time.Now()
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	data, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.GreaterOrEqual(t, time.Since(start), 190*time.Millisecond)
	require.Equal(t, 2, strings.Count(string(data), "data: "), "two tokens, then silence")

	// Several tokens a chunk, with usage in each.
	ev = events(t, b.post(t, "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 7, "stream": true}, map[string]string{"X-Emulate-Chunk-Tokens": "3"}).Body)
	require.Len(t, ev, 3+1+1)
	for i, want := range []int{3, 6, 7} {
		c := decode(t, ev[i])
		require.Len(t, strings.Fields(*c.Choices[0].Text), want-[]int{0, 3, 6}[i])
		require.Equal(t, want, c.Usage.CompletionTokens)
	}

	tms := b.timingLines(t)
	faults := map[string]int{}
	for _, tm := range tms {
		faults[tm.Fault]++
	}
	require.Equal(t, map[string]int{"stream-error": 1, "no-usage": 1, "early-close": 1, "stall": 1, "": 1}, faults)
}

func TestFaultShares(t *testing.T) {
	t.Parallel()
	hit := 0
	for i := range 2000 {
		f, err := parseFaults("early-close@0.25, no-usage", "", strconv.Itoa(i), 9)
		require.NoError(t, err)
		require.True(t, f.noUsage)
		if f.earlyClose {
			hit++
			require.Equal(t, "early-close,no-usage", f.String())
		}
		again, err := parseFaults("early-close@0.25, no-usage", "", strconv.Itoa(i), 9)
		require.NoError(t, err)
		require.Equal(t, f, again, "deterministic")
	}
	require.InDelta(t, 500, hit, 80)
	for _, bad := range []string{"http-200", "http-x", "stall@2", "stall@-1", "nope", "http-500@x"} {
		_, err := parseFaults(bad, "", "1", 1)
		require.Error(t, err, bad)
	}
}

func FuzzParseFaults(f *testing.F) {
	for _, s := range []string{"http-500", "stream-error@0.3, no-usage", "stall@1", " , ", "http-599@0", "x@"} {
		f.Add(s, "3", "id-1")
	}
	f.Fuzz(func(t *testing.T, spec, chunks, id string) {
		got, err := parseFaults(spec, chunks, id, 1)
		if err != nil {
			return
		}
		require.True(t, got.status == 0 || (got.status >= 400 && got.status <= 599))
		require.True(t, got.chunkTokens >= 0 && got.chunkTokens <= 64)
		require.LessOrEqual(t, len(got.applied), strings.Count(spec, ",")+1)
	})
}

func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`).FindStringSubmatch(string(data))
	require.NotNil(t, m, "%s in\n%s", name, data)
	v, err := strconv.ParseFloat(m[2], 64)
	require.NoError(t, err)
	return v
}

func TestPrefixCacheAndStorageReads(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t)
	cfg.KVFile = filepath.Join(t.TempDir(), "kv.bin") // on the root filesystem: O_DIRECT
	cfg.KVFileSize = 4 << 20
	cfg.CacheBlocks = 6
	b := setup(t, cfg)
	info, err := os.Stat(cfg.KVFile)
	require.NoError(t, err)
	require.EqualValues(t, 4<<20, info.Size(), "created at the asked size")
	require.True(t, b.server.kv.direct, "O_DIRECT on the root filesystem")
	require.NotContains(t, b.notes.String(), "page cache")

	shared := words(32, "s")
	send := func(prompt string) {
		resp := b.post(t, "/v1/chat/completions", chat(prompt, 1, true), nil)
		events(t, resp.Body)
	}
	send(shared + " " + words(32, "a")) // 4 blocks, all missing
	send(shared + " " + words(32, "a")) // all 4 cached
	send(shared + " " + words(40, "b")) // 72 words: the shared 2 blocks cached, 2 more read
	send(words(16*4, "c"))              // 4 new blocks: the LRU (6) evicts
	send(shared + " " + words(32, "a")) // its first blocks were evicted: all read again

	tms := b.timingLines(t)
	require.Len(t, tms, 5)
	type hm struct{ hit, miss int }
	var got []hm
	for _, tm := range tms {
		got = append(got, hm{tm.HitBlocks, tm.MissBlocks})
		if tm.MissBlocks > 0 {
			require.Positive(t, tm.ReadNs, "misses are read from the file")
		}
	}
	require.Equal(t, []hm{{0, 4}, {4, 0}, {2, 2}, {0, 4}, {0, 4}}, got)
}

func TestMetricsCountTokens(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t)
	cfg.KVFile = filepath.Join(t.TempDir(), "kv.bin")
	cfg.KVFileSize = 1 << 20
	b := setup(t, cfg)
	p := words(40, "q") // 2 full blocks and 8 more tokens
	for range 2 {
		events(t, b.post(t, "/v1/chat/completions", chat(p, 3, true), nil).Body)
	}
	require.EqualValues(t, 80, metricValue(t, b.url, "vllm:prefix_cache_queries_total"))
	require.EqualValues(t, 32, metricValue(t, b.url, "vllm:prefix_cache_hits_total"))
	require.EqualValues(t, 80, metricValue(t, b.url, "vllm:prompt_tokens_total"))
	require.EqualValues(t, 6, metricValue(t, b.url, "vllm:generation_tokens_total"))
	require.EqualValues(t, 2, metricValue(t, b.url, "vllm:request_success_total"))
	require.EqualValues(t, 2, metricValue(t, b.url, "accord_emulator_kv_blocks_read_total"))
	require.EqualValues(t, 2, metricValue(t, b.url, "accord_emulator_kv_blocks_hit_total"))
	require.EqualValues(t, 2*4096, metricValue(t, b.url, "accord_emulator_kv_read_bytes_total"))
	require.EqualValues(t, 2, metricValue(t, b.url, `accord_emulator_requests_total{outcome="ok"}`))
}

func TestReadBandwidthCap(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t)
	cfg.KVFile = filepath.Join(t.TempDir(), "kv.bin")
	cfg.KVFileSize = 8 << 20
	cfg.BlockBytes = 64 << 10
	cfg.KVReadMBps = 10 // 16 blocks × 64 KiB ≈ 1.05 MB: ≥ 100 ms
	cfg.CacheBlocks = 0
	b := setup(t, cfg)
	events(t, b.post(t, "/v1/completions", map[string]any{"prompt": words(16*16, "z"), "max_tokens": 1, "stream": true}, nil).Body)
	tm := b.timingLines(t)[0]
	require.Equal(t, 16, tm.MissBlocks)
	require.GreaterOrEqual(t, time.Duration(tm.ReadNs), 100*time.Millisecond)
	require.GreaterOrEqual(t, time.Duration(tm.FirstToken-tm.Recv), 100*time.Millisecond)
}

func TestDegradation(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t)
	cfg.ITL = 2 * time.Millisecond
	cfg.DegradeAfter = 150 * time.Millisecond
	cfg.DegradeFactor = 10
	b := setup(t, cfg)
	send := func() {
		events(t, b.post(t, "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 6, "stream": true}, nil).Body)
	}
	send()
	time.Sleep(200 * time.Millisecond)
	send()
	tms := b.timingLines(t)
	before, after := tms[0].LastToken-tms[0].FirstToken, tms[1].LastToken-tms[1].FirstToken
	// The second request starts after the switch: its five gaps are at
	// least 10 × 2 ms each, by construction.
	require.GreaterOrEqual(t, time.Duration(after), 10*5*2*time.Millisecond, "5 gaps of 20 ms")
	// The first is undegraded only if it ended before the switch; on a
	// loaded machine it may not have, and then it says nothing.
	if time.Duration(tms[0].Done) < cfg.DegradeAfter {
		require.Less(t, before, after)
	}
}

func TestOutputIsSeeded(t *testing.T) {
	t.Parallel()
	text := func(seed int64) string {
		cfg := baseConfig(t)
		cfg.Seed = seed
		b := setup(t, cfg)
		resp := b.post(t, "/v1/completions", map[string]any{"prompt": "same prompt", "max_tokens": 12}, nil)
		var out struct {
			Choices []struct{ Text string } `json:"choices"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out.Choices[0].Text
	}
	require.Equal(t, text(5), text(5))
	require.NotEqual(t, text(5), text(6))
}

func TestStrictModeRejectsExtensions(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t)
	cfg.OpenAIStrict = true
	b := setup(t, cfg)
	resp := b.post(t, "/v1/completions", map[string]any{"prompt": "a", "min_tokens": 2}, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp = b.post(t, "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 2}, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestBlockHashesChainPrefixes(t *testing.T) {
	t.Parallel()
	a := blockHashes("a b c d e f g", 2, 1)
	require.Len(t, a, 3)
	require.Equal(t, a, blockHashes("  a\tb c\nd e f g h", 2, 1)[:3], "whitespace does not matter; only full blocks")
	c := blockHashes("a b X d e f", 2, 1)
	require.Equal(t, a[0], c[0])
	require.NotEqual(t, a[1], c[1])
	require.NotEqual(t, a[2], c[2], "a block's hash covers its whole prefix")
	require.NotEqual(t, a, blockHashes("a b c d e f g", 2, 2), "seeded")
	require.Equal(t, 0, countWords(" \t\n"))
	require.Equal(t, 3, countWords(" a  b\nc "))
}

func TestMain_(t *testing.T) {
	t.Parallel()
	var out, errb syncBuffer
	require.Equal(t, 0, Main(context.Background(), []string{"-h"}, &out, &errb))
	require.Contains(t, out.String(), "X-Emulate-Fault")
	require.Contains(t, out.String(), "-kv-read-mbps")
	require.Equal(t, 2, Main(context.Background(), []string{"--itl", "soon"}, &out, &errb))
	require.Equal(t, 2, Main(context.Background(), []string{"extra"}, &out, &errb))
	require.Equal(t, 1, Main(context.Background(), []string{"--block-bytes", "1000", "--kv-file", filepath.Join(t.TempDir(), "k")}, &out, &errb))

	ctx, cancel := context.WithCancel(context.Background())
	var stdout syncBuffer
	code := make(chan int, 1)
	timings := filepath.Join(t.TempDir(), "t.jsonl")
	go func() {
		code <- Main(ctx, []string{"--listen", "127.0.0.1:0", "--itl", "0", "--timings", timings, "--kv-file-size", "1MiB"}, &stdout, &errb)
	}()
	var url string
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(stdout.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	}, 10*time.Second, 10*time.Millisecond)
	resp, err := http.Post(url+"/completions", "application/json", strings.NewReader(`{"prompt":"a b","max_tokens":2}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	cancel()
	require.Equal(t, 0, <-code, errb.String())
	data, err := os.ReadFile(timings)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(data), "\n"), "timings flushed at exit")
}
