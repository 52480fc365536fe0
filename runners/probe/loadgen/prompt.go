package loadgen

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/accordlab/accord/acceptance"
)

// Streams of the seeded generators, so that prompts, prefixes and arrivals
// draw from independent sequences.
const (
	streamPrompt  = 0x70726f6d7074 // "prompt"
	streamPrefix  = 0x707265666978 // "prefix"
	streamArrival = 0x617272697665 // "arrive"
	streamSalted  = 0x73616c746564 // "salted"
)

// vocabulary holds common English words that are one token each (with
// their leading space) in the usual BPE tokenizers, so that a prompt of n
// words is close to n tokens on a real server. The emulator counts
// whitespace-separated words, so there it is exact.
var vocabulary = strings.Fields(`
the of and to in is was that for on are with as his they be at one have this
from or had by word but what some we can out other were all there when up use
your how said an each she which do their time if will way about many then them
write would like so these her long make thing see him two has look more day
could go come did number sound no most people my over know water than call first
who may down side been now find any new work part take get place made live where
after back little only round man year came show every good me give our under name
very through just form sentence great think say help low line differ turn cause
much mean before move right boy old too same tell does set three want air well
also play small end put home read hand port large spell add even land here must
big high such follow act why ask men change went light kind off need house picture
try us again animal point mother world near build self earth father head stand own
page should country found answer school grow study still learn plant cover food sun
four between state keep eye never last let thought city tree cross farm hard start
might story saw far sea draw left late run while press close night real life few north
`)

// request is what one request sends: its prompt and the lengths asked for.
type request struct {
	prompt       []byte // text, already safe to place inside a JSON string
	promptTokens int    // intended prompt tokens (words), for records without usage
	maxTokens    int    // output tokens to ask for
}

// promptSource gives the prompt of request id. It is deterministic: the
// same seed and id give the same prompt, whatever the concurrency.
type promptSource interface {
	// next fills r for request id, reusing r.prompt's storage.
	next(id int64, r *request) error
	close() error
}

// newPromptSource makes a step's prompts; salt (0: none) is mixed into
// every request's own words (Config.PromptSalt).
func newPromptSource(step acceptance.InferenceStep, salt uint64) (promptSource, error) {
	if step.Dataset != "" {
		return openDataset(step.Dataset, step.OutputTokens, step.Seed)
	}
	if err := validateDist("prompt_tokens", step.PromptTokens); err != nil {
		return nil, err
	}
	if err := validateDist("output_tokens", step.OutputTokens); err != nil {
		return nil, err
	}
	if p := step.Prefix; p != nil {
		switch {
		case p.Tokens < 0 || p.Distinct < 0:
			return nil, fmt.Errorf("prefix: tokens and distinct must not be negative (got %d and %d)", p.Tokens, p.Distinct)
		case !(p.Share >= 0 && p.Share <= 1):
			return nil, fmt.Errorf("prefix: share %v is not between 0 and 1", p.Share)
		case p.Tokens > 0 && p.Share > 0:
			return nil, errors.New("prefix: set tokens or share, not both")
		case (p.Tokens > 0 || p.Share > 0) && p.Distinct == 0:
			return nil, errors.New("prefix: distinct must be positive")
		}
	}
	return &synthetic{step: step, salt: salt}, nil
}

// synthetic builds prompts of random vocabulary words. With Prefix.Tokens,
// one of Distinct shared prefixes of Prefix.Tokens words is put before the
// PromptTokens words of the request's own, so the prompt has
// Prefix.Tokens + PromptTokens words. With Prefix.Share, the prompt has
// PromptTokens words, the first round(Share × PromptTokens) of them one of
// Distinct shared prefixes (the first words of the same prefix at every
// share). A salt other than 0 changes the request's own words, never the
// prefixes.
type synthetic struct {
	step acceptance.InferenceStep
	salt uint64
}

func (s *synthetic) next(id int64, r *request) error {
	rng := rand.New(rand.NewPCG(uint64(s.step.Seed), uint64(id)^streamPrompt))
	n := sampleTokens(s.step.PromptTokens, rng)
	r.maxTokens = sampleTokens(s.step.OutputTokens, rng)
	r.prompt = r.prompt[:0]
	r.promptTokens = n
	own := n
	if p := s.step.Prefix; p != nil && p.Distinct > 0 && (p.Tokens > 0 || p.Share > 0) {
		k := rng.IntN(p.Distinct)
		prng := rand.New(rand.NewPCG(uint64(s.step.Seed)^streamPrefix, uint64(k)))
		if p.Share > 0 {
			shared := min(int(math.Round(p.Share*float64(n))), n)
			r.prompt = appendWords(r.prompt, prng, shared)
			own = n - shared
		} else {
			r.prompt = appendWords(r.prompt, prng, p.Tokens)
			r.promptTokens += p.Tokens
		}
	}
	if s.salt != 0 {
		rng = rand.New(rand.NewPCG(uint64(s.step.Seed)^streamSalted, uint64(id)^s.salt))
	}
	r.prompt = appendWords(r.prompt, rng, own)
	return nil
}

func (s *synthetic) close() error { return nil }

func appendWords(b []byte, rng *rand.Rand, n int) []byte {
	for i := 0; i < n; i++ {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, vocabulary[rng.IntN(len(vocabulary))]...)
	}
	return b
}

func validateDist(name string, d acceptance.TokenDist) error {
	switch d.Dist {
	case "", "fixed":
		if d.Mean < 1 {
			return fmt.Errorf("%s: fixed needs mean ≥ 1 (got %d)", name, d.Mean)
		}
	case "uniform":
		lo, hi := d.Min, d.Max
		if lo == 0 && hi == 0 {
			lo, hi = d.Mean, d.Mean
		}
		if lo < 1 || hi < lo {
			return fmt.Errorf("%s: uniform needs 1 ≤ min ≤ max (got %d..%d)", name, d.Min, d.Max)
		}
	case "normal":
		if d.Mean < 1 || d.StdDev < 0 || math.IsNaN(d.StdDev) || math.IsInf(d.StdDev, 0) {
			return fmt.Errorf("%s: normal needs mean ≥ 1 and stddev ≥ 0 (got %d, %g)", name, d.Mean, d.StdDev)
		}
		if d.Max > 0 && d.Max < max(d.Min, 1) {
			return fmt.Errorf("%s: max %d is below min %d", name, d.Max, d.Min)
		}
	default:
		return fmt.Errorf("%s: unknown distribution %q (use fixed, uniform or normal)", name, d.Dist)
	}
	return nil
}

// sampleTokens draws a token count: fixed is Mean; uniform is an integer in
// [Min, Max]; normal is Mean + StdDev·N(0,1) rounded and clamped to
// [max(Min,1), Max] (Max 0: no upper bound). Never below 1.
func sampleTokens(d acceptance.TokenDist, rng *rand.Rand) int {
	switch d.Dist {
	case "uniform":
		lo, hi := d.Min, d.Max
		if lo == 0 && hi == 0 {
			return max(d.Mean, 1)
		}
		return lo + rng.IntN(hi-lo+1)
	case "normal":
		v := int(math.Round(float64(d.Mean) + d.StdDev*rng.NormFloat64()))
		v = max(v, d.Min, 1)
		if d.Max > 0 {
			v = min(v, d.Max)
		}
		return v
	default:
		return max(d.Mean, 1)
	}
}

// dataset serves prompts from a JSON-lines file of
// {"prompt": "...", "output_tokens": n}: request id gets line id mod lines.
// Only the lines' offsets are kept in memory; each prompt is read when
// needed. Lines without output_tokens draw it from the step's distribution.
type dataset struct {
	f       *os.File
	offsets []int64 // start of each record line; one more entry for the end
	output  acceptance.TokenDist
	seed    int64
}

type datasetLine struct {
	Prompt       *string `json:"prompt"`
	OutputTokens *int    `json:"output_tokens"`
}

func openDataset(path string, output acceptance.TokenDist, seed int64) (*dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	d := &dataset{f: f, output: output, seed: seed}
	if err := d.index(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("dataset %s: %w", path, err)
	}
	return d, nil
}

// index validates every line and records where each record starts.
func (d *dataset) index() error {
	br := bufio.NewReaderSize(d.f, 1<<20)
	var off int64
	var starts []int64
	var ends []int64
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			full := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				full = append(full, line...)
			}
			line = full
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
		n := int64(len(line))
		if trimmed := strings.TrimSpace(string(line)); trimmed != "" {
			var rec datasetLine
			if jerr := json.Unmarshal([]byte(trimmed), &rec); jerr != nil {
				return fmt.Errorf("line %d: %w", lineNo, jerr)
			}
			if rec.Prompt == nil || *rec.Prompt == "" {
				return fmt.Errorf("line %d: no prompt", lineNo)
			}
			if rec.OutputTokens != nil && *rec.OutputTokens < 1 {
				return fmt.Errorf("line %d: output_tokens must be ≥ 1", lineNo)
			}
			if rec.OutputTokens == nil {
				if verr := validateDist("output_tokens", d.output); verr != nil {
					return fmt.Errorf("line %d has no output_tokens and the step's %w", lineNo, verr)
				}
			}
			starts = append(starts, off)
			ends = append(ends, off+n)
		}
		off += n
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(starts) == 0 {
		return errors.New("no records")
	}
	// Interleave starts and ends so that one slice holds both.
	d.offsets = make([]int64, 0, 2*len(starts))
	for i := range starts {
		d.offsets = append(d.offsets, starts[i], ends[i])
	}
	return nil
}

func (d *dataset) lines() int { return len(d.offsets) / 2 }

func (d *dataset) next(id int64, r *request) error {
	i := int(id % int64(d.lines()))
	start, end := d.offsets[2*i], d.offsets[2*i+1]
	buf := make([]byte, end-start)
	if _, err := d.f.ReadAt(buf, start); err != nil {
		return fmt.Errorf("dataset: read record %d: %w", i+1, err)
	}
	var rec datasetLine
	if err := json.Unmarshal(buf, &rec); err != nil || rec.Prompt == nil {
		return fmt.Errorf("dataset: record %d changed since it was indexed", i+1)
	}
	r.prompt = appendJSONStringBody(r.prompt[:0], *rec.Prompt)
	r.promptTokens = len(strings.Fields(*rec.Prompt))
	if rec.OutputTokens != nil {
		r.maxTokens = *rec.OutputTokens
	} else {
		rng := rand.New(rand.NewPCG(uint64(d.seed), uint64(id)^streamPrompt))
		r.maxTokens = sampleTokens(d.output, rng)
	}
	return nil
}

func (d *dataset) close() error { return d.f.Close() }

const hexDigits = "0123456789abcdef"

// appendJSONStringBody appends s escaped for use inside a JSON string
// (without the quotes). Invalid UTF-8 becomes U+FFFD.
func appendJSONStringBody(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}
