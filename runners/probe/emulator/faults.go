package emulator

import (
	"fmt"
	"strconv"
	"strings"
)

// Request headers that make the emulator misbehave on purpose, to test
// clients (the load generator's failure accounting above all).
const (
	// faultHeader lists faults, comma-separated, each optionally with
	// "@fraction" so that only that share of requests (chosen by a hash of
	// the request id and the seed, so deterministically) suffers it:
	//
	//	http-NNN      answer with HTTP status NNN (400..599) and an error object
	//	stream-error  after half of the tokens, an error object in the stream, then [DONE]
	//	early-close   after half of the tokens, cut the connection mid-body
	//	stall         after half of the tokens, send nothing more until the client leaves
	//	no-usage      leave out the usage chunk even when include_usage was asked for
	//
	// e.g. "X-Emulate-Fault: stream-error@0.25, no-usage".
	faultHeader = "X-Emulate-Fault"
	// chunkTokensHeader makes every content chunk carry N tokens (words),
	// each chunk then carrying usage as vLLM's continuous_usage_stats does.
	chunkTokensHeader = "X-Emulate-Chunk-Tokens"
)

// faults are the misbehaviours applied to one request.
type faults struct {
	status      int
	streamError bool
	earlyClose  bool
	stall       bool
	noUsage     bool
	chunkTokens int
	applied     []string
}

func (f faults) failsMidStream() bool { return f.streamError || f.earlyClose || f.stall }

func (f faults) String() string { return strings.Join(f.applied, ",") }

// parseFaults reads the fault headers of request id.
func parseFaults(spec, chunkSpec, id string, seed int64) (faults, error) {
	var f faults
	if chunkSpec = strings.TrimSpace(chunkSpec); chunkSpec != "" {
		n, err := strconv.Atoi(chunkSpec)
		if err != nil || n < 1 || n > 64 {
			return f, fmt.Errorf("%s must be an integer in 1..64, not %q", chunkTokensHeader, chunkSpec)
		}
		f.chunkTokens = n
	}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kind, share := item, 1.0
		if i := strings.IndexByte(item, '@'); i >= 0 {
			kind = item[:i]
			v, err := strconv.ParseFloat(item[i+1:], 64)
			if err != nil || v < 0 || v > 1 {
				return f, fmt.Errorf("%s: %q: the share after @ must be in 0..1", faultHeader, item)
			}
			share = v
		}
		status := 0
		switch {
		case strings.HasPrefix(kind, "http-"):
			n, err := strconv.Atoi(strings.TrimPrefix(kind, "http-"))
			if err != nil || n < 400 || n > 599 {
				return f, fmt.Errorf("%s: %q: use http-NNN with NNN in 400..599", faultHeader, item)
			}
			status = n
		case kind == "stream-error", kind == "early-close", kind == "stall", kind == "no-usage":
		default:
			return f, fmt.Errorf("%s: unknown fault %q (http-NNN, stream-error, early-close, stall, no-usage)", faultHeader, kind)
		}
		if !chosen(id, kind, seed, share) {
			continue
		}
		f.applied = append(f.applied, kind)
		switch kind {
		case "stream-error":
			f.streamError = true
		case "early-close":
			f.earlyClose = true
		case "stall":
			f.stall = true
		case "no-usage":
			f.noUsage = true
		default:
			f.status = status
		}
	}
	return f, nil
}

// chosen decides deterministically whether request id gets fault kind.
func chosen(id, kind string, seed int64, share float64) bool {
	if share >= 1 {
		return true
	}
	h := uint64(fnvOffset) ^ uint64(seed)
	for _, s := range []string{id, "\x00", kind} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * fnvPrime
		}
	}
	return float64(mix(h)>>11)/(1<<53) < share
}
