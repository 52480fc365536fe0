package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/emulator"
	"github.com/accordlab/accord/runners/probe/wire"
)

// emu is a real emulator serving on 127.0.0.1 inside the test process.
type emu struct {
	url     string // base URL, .../v1
	addr    string
	timings string
	stop    func() // stops serving and flushes the timings file; idempotent
}

// emuConfig is a quick emulator: small blocks, no storage tier, short ITL.
func emuConfig(t testing.TB) emulator.Config {
	return emulator.Config{
		Model:            "m",
		BlockTokens:      16,
		BlockBytes:       4096,
		CacheBlocks:      1024,
		PrefillPerToken:  0,
		ITL:              2 * time.Millisecond,
		DefaultMaxTokens: 16,
		Seed:             7,
		Timings:          filepath.Join(t.TempDir(), "timings.jsonl"),
	}
}

func startEmulator(t testing.TB, cfg emulator.Config) *emu {
	t.Helper()
	s, err := emulator.New(cfg, io.Discard)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	var once sync.Once
	e := &emu{url: "http://" + ln.Addr().String() + "/v1", addr: ln.Addr().String(), timings: cfg.Timings}
	e.stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
			require.NoError(t, s.Close())
		})
	}
	t.Cleanup(e.stop)
	return e
}

// emuTiming is one line of the emulator's timings file.
type emuTiming struct {
	ID           string `json:"id"`
	Recv         int64  `json:"recv"`
	RecvUnix     int64  `json:"recv_unix_ns"`
	FirstToken   int64  `json:"first_token"`
	LastToken    int64  `json:"last_token"`
	Done         int64  `json:"done"`
	Status       int    `json:"status"`
	PromptTokens int    `json:"prompt_tokens"`
	OutputTokens int    `json:"output_tokens"`
	HitBlocks    int    `json:"hit_blocks"`
	MissBlocks   int    `json:"miss_blocks"`
	ReadNs       int64  `json:"read_ns"`
	Fault        string `json:"fault"`
}

// readTimings stops the emulator and reads its timings by request id.
func (e *emu) readTimings(t testing.TB) map[string]emuTiming {
	t.Helper()
	e.stop()
	f, err := os.Open(e.timings)
	require.NoError(t, err)
	defer f.Close()
	out := map[string]emuTiming{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var tm emuTiming
		require.NoError(t, json.Unmarshal(sc.Bytes(), &tm))
		out[tm.ID] = tm
	}
	require.NoError(t, sc.Err())
	return out
}

// baseStep is a small chat step against e.
func baseStep(e *emu) acceptance.InferenceStep {
	return acceptance.InferenceStep{
		Endpoint:       e.url,
		Model:          "m",
		API:            "chat",
		PromptTokens:   acceptance.TokenDist{Dist: "fixed", Mean: 32},
		OutputTokens:   acceptance.TokenDist{Dist: "fixed", Mean: 8},
		Requests:       20,
		RequestTimeout: acceptance.Duration(10 * time.Second),
		Seed:           1,
	}
}

// run runs one level and returns its summary and records.
func run(t testing.TB, cfg Config) (*wire.InferenceSummary, []wire.RequestRecord) {
	t.Helper()
	var buf bytes.Buffer
	cfg.Records = &buf
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := Run(ctx, cfg)
	require.NoError(t, err)
	return sum, parseRecords(t, buf.Bytes())
}

func parseRecords(t testing.TB, b []byte) []wire.RequestRecord {
	t.Helper()
	var out []wire.RequestRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	for {
		var r wire.RequestRecord
		err := dec.Decode(&r)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, r)
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }
