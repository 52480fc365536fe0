// Package emulator is `accord emulate`: an OpenAI-compatible streaming server
// standing in for a GPU inference server, whose TTFT depends on real reads
// from the storage under test.
package emulator

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/accordlab/accord/acceptance"
)

const usageText = `usage: accord emulate [FLAGS]

An OpenAI-compatible inference server without a GPU, standing in for vLLM
or SGLang in tests of the storage behind a KV-cache tier. It serves
POST /v1/chat/completions and /v1/completions (streaming and not),
GET /v1/models, GET /metrics (Prometheus), GET /health, and the
degradation switch GET/PUT /emulator/degradation.

Model of a request:
  - Tokens are the whitespace-separated words of the prompt (for chat, of
    every message's text). Output tokens are words too; the emulator always
    produces max_completion_tokens / max_tokens (--default-max-tokens when
    neither is given), as with ignore_eos.
  - The prompt's full blocks of --block-tokens words are hashed, each hash
    covering the whole prefix up to its block, as vLLM's prefix caching does.
    The longest run of blocks from the start found in the in-memory LRU
    (--cache-blocks) is a cache hit; every later block is read from
    --kv-file (--block-bytes at an offset derived from its hash, O_DIRECT
    where the filesystem allows it), then cached. Without --kv-file, misses
    cost compute only.
  - Admission: at most --max-num-seqs requests are answered at once (as
    vLLM's flag of that name); the others wait, and their wait is part of
    their TTFT.
  - Prefill: the reads, then --prefill-per-token for every prompt token not
    served from memory. Decoding: one token every --itl. After
    --degrade-after, compute, ITL and read times are multiplied by
    --degrade-factor (to exercise stop-loss). The degradation switch does
    the same at once: PUT /emulator/degradation with {"factor": 25} (1
    restores; GET answers the factor in force). Sleeps are honoured to the
    timer resolution of the host (about 1 ms here); the timings file has
    the actual times.
  - Streaming (chat): a role-only chunk at once, then the content chunks
    (one token each), a chunk with finish_reason "length", a usage chunk when
    stream_options.include_usage is set (usage in every chunk with
    continuous_usage_stats), then data: [DONE]. Completions have no role
    chunk.

Request headers for testing clients:
  X-Request-Id: ID            copied to the timings file
  X-Emulate-Fault: LIST       comma-separated faults, each optionally with
                              @SHARE (0..1) to hit only that share of requests,
                              chosen by a hash of the request id and --seed:
      http-NNN       answer HTTP NNN (400..599) with an error object
      stream-error   after half of the tokens, an error object in the stream, then [DONE]
      early-close    after half of the tokens, cut the connection mid-body
      stall          after half of the tokens, send nothing until the client leaves
      no-usage       leave out the usage chunk
  X-Emulate-Chunk-Tokens: N   N tokens per content chunk, with usage in each chunk

Timings file (--timings): one JSON object per request, times in nanoseconds
since the emulator started (monotonic clock): id, recv (when the request
was read from the socket; recv_unix_ns is the same on the wall clock, to
line up with other processes on the host),
first_token (after the first token's chunk was written and flushed),
last_token, done (after data: [DONE] was flushed), status, stream,
prompt_tokens, output_tokens, hit_blocks, miss_blocks, read_ns, fault.

Metrics, with vLLM v1's names, types, buckets and labels (model_name,
engine="0"), so a vLLM user's queries read the emulator unchanged:
histograms vllm:time_to_first_token_seconds (arrival to the first token),
vllm:e2e_request_latency_seconds, vllm:inter_token_latency_seconds and
vllm:request_queue_time_seconds; gauges vllm:num_requests_running and
vllm:num_requests_waiting; counters vllm:prefix_cache_queries_total and
vllm:prefix_cache_hits_total (in tokens), vllm:prompt_tokens_total,
vllm:generation_tokens_total, vllm:request_success_total; and
accord_emulator_* counters for KV reads and request outcomes. For example:
  histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[1m])))

Flags:
`

// Main runs `accord emulate ARGS...` and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("accord emulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg        Config
		listen     string
		kvFileSize = byteSizeFlag(1 << 30)
		blockBytes = byteSizeFlag(128 << 10)
	)
	fs.StringVar(&listen, "listen", "127.0.0.1:8000", "`address` to listen on (port 0 picks one; the address is printed)")
	fs.StringVar(&cfg.Model, "model", "emulated", "served model `name`; requests naming another model get 404")
	fs.StringVar(&cfg.KVFile, "kv-file", "", "`path` of the KV file on the storage under test (or a block device); created if missing")
	fs.Var(&kvFileSize, "kv-file-size", "`size` of a KV file created because it was missing, filled with random data")
	fs.IntVar(&cfg.BlockTokens, "block-tokens", 16, "tokens per KV block")
	fs.Var(&blockBytes, "block-bytes", "`size` read per missing block (a multiple of 4KiB)")
	fs.IntVar(&cfg.CacheBlocks, "cache-blocks", 4096, "in-memory LRU size in blocks (0: nothing stays cached)")
	fs.DurationVar(&cfg.PrefillPerToken, "prefill-per-token", 20*time.Microsecond, "compute time per prompt token not served from memory")
	fs.DurationVar(&cfg.ITL, "itl", 20*time.Millisecond, "inter-token latency")
	fs.IntVar(&cfg.DefaultMaxTokens, "default-max-tokens", 16, "output tokens when a request sets no max_tokens")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of everything random (output words, fault shares, KV file contents)")
	fs.IntVar(&cfg.MaxNumSeqs, "max-num-seqs", 0, "requests answered at once, the others wait (0: no limit)")
	fs.DurationVar(&cfg.DegradeAfter, "degrade-after", 0, "after this time, latencies grow by --degrade-factor (0: never)")
	fs.Float64Var(&cfg.DegradeFactor, "degrade-factor", 1, "latency multiplier after --degrade-after")
	fs.Float64Var(&cfg.KVReadMBps, "kv-read-mbps", 0, "cap on KV read bandwidth in MB/s (10^6 bytes), to stand for a slower path (0: none)")
	fs.StringVar(&cfg.Timings, "timings", "", "`file` to append one JSON line per request to")
	fs.BoolVar(&cfg.OpenAIStrict, "openai-strict", false, "reject min_tokens, ignore_eos and continuous_usage_stats with 400, as OpenAI's API does")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "accord emulate: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg.KVFileSize, cfg.BlockBytes = int64(kvFileSize), int(blockBytes)

	s, err := New(cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "accord emulate: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		_ = s.Close()
		fmt.Fprintf(stderr, "accord emulate: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "accord emulate: listening on http://%s/v1\n", ln.Addr())
	serveErr := s.Serve(ctx, ln)
	closeErr := s.Close()
	if err := errors.Join(serveErr, closeErr); err != nil {
		fmt.Fprintf(stderr, "accord emulate: %v\n", err)
		return 1
	}
	return 0
}

// byteSizeFlag accepts sizes like 128KiB or 1GiB.
type byteSizeFlag int64

func (b *byteSizeFlag) String() string { return acceptance.ByteSize(*b).String() }

func (b *byteSizeFlag) Set(s string) error {
	v, err := acceptance.ParseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSizeFlag(v)
	return nil
}
