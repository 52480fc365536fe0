// Package parsetest writes realistic inputs for the importers' benchmarks
// and tests: request records as the probe's encoder writes them.
package parsetest

import (
	"bufio"
	"io"
	"math/rand/v2"
	"strconv"
)

// RecordRate is the offered rate of the level WriteRecords writes.
const RecordRate = 1000.0

// WriteRecords writes n request records (wire.RequestRecord's field order
// and omitempty rules) of an open-loop level at RecordRate requests per
// second, with 1 % warm-up, 1 % failures and 0.5 % requests whose usage
// was counted from chunks. It returns the measured window in seconds.
func WriteRecords(w io.Writer, n int, seed uint64) (window float64, err error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var b []byte
	for i := 0; i < n; i++ {
		intended := int64(float64(i) / RecordRate * 1e9)
		sent := intended + int64(rng.ExpFloat64()*50_000) // ~50 µs late
		ttft := int64((80 + rng.ExpFloat64()*40) * 1e6)
		out := 64 + rng.IntN(192)
		tpot := int64((15 + rng.NormFloat64()*2) * 1e6)
		if tpot < 1e6 {
			tpot = 1e6
		}
		firstChunk := sent + ttft - 2e6
		firstToken := sent + ttft
		lastToken := firstToken + int64(out-1)*tpot
		done := lastToken + 300_000
		b = b[:0]
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, int64(i+1), 10)
		if i < n/100 {
			b = append(b, `,"warmup":true`...)
		}
		b = append(b, `,"t_intended":`...)
		b = strconv.AppendInt(b, intended, 10)
		b = append(b, `,"t_sent":`...)
		b = strconv.AppendInt(b, sent, 10)
		failed := rng.IntN(100) == 0
		if failed {
			b = append(b, `,"t_first_chunk":0,"t_first_token":0,"t_first_content":0,"t_last_token":0,"t_done":`...)
			b = strconv.AppendInt(b, sent+5e6, 10)
			b = append(b, `,"prompt_tokens":0,"output_tokens":0,"chunks":0,"error_kind":"http","error":"HTTP 503: {\"object\":\"error\",\"message\":\"server overloaded\"}","http_status":503}`...)
		} else {
			for _, f := range []struct {
				k string
				v int64
			}{{`,"t_first_chunk":`, firstChunk}, {`,"t_first_token":`, firstToken}, {`,"t_first_content":`, firstToken},
				{`,"t_last_token":`, lastToken}, {`,"t_done":`, done}, {`,"prompt_tokens":`, int64(480 + rng.IntN(64))},
				{`,"output_tokens":`, int64(out)}} {
				b = append(b, f.k...)
				b = strconv.AppendInt(b, f.v, 10)
			}
			if rng.IntN(200) == 0 {
				b = append(b, `,"usage_counted":true`...)
			}
			b = append(b, `,"chunks":`...)
			b = strconv.AppendInt(b, int64(out), 10)
			b = append(b, '}')
		}
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return 0, err
		}
	}
	return float64(n) / RecordRate * 0.99, bw.Flush()
}
