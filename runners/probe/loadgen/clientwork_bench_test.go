package loadgen

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// recordResponse sends the generator's request 0 of step to a real
// emulator over TCP and returns the raw HTTP response it answered with.
func recordResponse(b testing.TB, step acceptance.InferenceStep) []byte {
	b.Helper()
	cfg := emuConfig(b)
	cfg.ITL = 0
	e := startEmulator(b, cfg)
	step.Endpoint = e.url
	g, err := newGenerator(Config{Step: step, Level: Level{Concurrency: 1}})
	require.NoError(b, err)
	defer g.release()
	var r request
	require.NoError(b, g.prompts.next(0, &r))
	nc, err := net.Dial("tcp", e.addr)
	require.NoError(b, err)
	defer nc.Close()
	_, err = nc.Write(g.appendRequest(nil, 0, g.appendBody(nil, &r, true)))
	require.NoError(b, err)
	// The emulator answers with a chunked body: read up to its last chunk.
	var out []byte
	buf := make([]byte, 64<<10)
	for !endsWith(out, "\r\n0\r\n\r\n") {
		require.NoError(b, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
		n, err := nc.Read(buf)
		require.NoError(b, err)
		out = append(out, buf[:n]...)
	}
	return out
}

func endsWith(b []byte, s string) bool { return len(b) >= len(s) && string(b[len(b)-len(s):]) == s }

// replay delivers a recorded response again and again, in reads of at most
// size bytes, as a socket would.
type replay struct {
	resp []byte
	off  int
	size int
}

func (r *replay) Read(p []byte) (int, error) {
	if r.off == len(r.resp) {
		return 0, io.EOF
	}
	n := min(len(p), r.size, len(r.resp)-r.off)
	copy(p, r.resp[r.off:r.off+n])
	r.off += n
	return n, nil
}

// BenchmarkClientWork: the load generator's own work for one request of 32
// tokens, without the network: build the request, read the recorded
// emulator response (delivered in 2 KiB reads), time, frame and decode
// every chunk, account the statistics and encode the record. It is what
// BenchmarkCapacity's CPU per request holds besides system calls and the
// Go scheduler, measured without the noise of a shared machine.
func BenchmarkClientWork(b *testing.B) {
	step := acceptance.InferenceStep{
		Model: "m", API: "chat",
		PromptTokens: acceptance.TokenDist{Mean: 16}, OutputTokens: acceptance.TokenDist{Mean: 32},
		Duration: acceptance.Duration(time.Minute), Seed: 1,
	}
	resp := recordResponse(b, step)
	step.Endpoint = "http://127.0.0.1:1/v1"
	g, err := newGenerator(Config{Step: step, Level: Level{Concurrency: 1}})
	require.NoError(b, err)
	defer g.release()
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	defer g.cancel(nil)
	g.clock = clock{t0: time.Now()}
	src := &replay{resp: resp, size: 2 << 10}
	w := g.getWorker()
	w.c = &conn{tr: timedReader{r: src, clock: g.clock}}
	w.c.br = newConnReader(&w.c.tr, 16<<10)
	deadline := time.Now().Add(time.Hour)
	b.ReportAllocs()
	b.SetBytes(int64(len(resp)))
	b.ResetTimer()
	cpu0 := processCPU()
	for i := range b.N {
		src.off = 0
		require.NoError(b, g.prompts.next(int64(i), &w.req))
		w.bodyBuf = g.appendBody(w.bodyBuf[:0], &w.req, true)
		w.msg = g.appendRequest(w.msg[:0], int64(i), w.bodyBuf)
		w.rec = wireRecord(int64(i))
		w.itl = w.itl[:0]
		if err := readResponse(w.c.br, &w.resp); err != nil {
			b.Fatal(err)
		}
		w.body.reset(w.c.br, &w.resp)
		if !g.stream(w, deadline) || w.rec.ErrorKind != "" || w.rec.OutputTokens != 32 {
			b.Fatalf("stream not read whole: %+v", w.rec)
		}
		w.out = appendRecord(w.out[:0], &w.rec)
		g.stats.add(&w.rec, w.itl)
	}
	// CPU time, not wall time: on a shared machine the loop waits for a
	// core, and ns/op counts the waiting.
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func wireRecord(id int64) wire.RequestRecord { return wire.RequestRecord{ID: id, Sent: 1} }
