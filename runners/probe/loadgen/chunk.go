package loadgen

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
)

// chunk is what the load generator needs to know about one streamed JSON
// chunk of an OpenAI-compatible response. It is filled by decodeChunk
// without allocating on the common path: the text itself is never kept,
// only whether it is there.
type chunk struct {
	// tokens: a choice carries content, reasoning (reasoning_content or
	// reasoning) or tool calls, or completion text.
	tokens bool
	// content: a choice carries visible content (chat content or completion text).
	content bool
	// usage is set when the chunk has a "usage" object.
	usage            bool
	promptTokens     int64
	completionTokens int64
	// failed is set for an error inside the stream: a top-level "error"
	// (SGLang, vLLM ≥ 0.6) or "object": "error" (older vLLM).
	failed bool
	errMsg string
}

// maxJSONDepth matches encoding/json's nesting limit.
const maxJSONDepth = 10000

var errNotObject = errors.New("chunk is not a JSON object")

// decodeChunk decodes one SSE data payload. Keys are matched exactly (JSON
// is case-sensitive; encoding/json's case folding is not copied), and a
// repeated key counts as its last occurrence, as in any JSON object decoder.
func decodeChunk(data []byte, c *chunk) error {
	s := scanner{data: data, textStart: -1}
	return s.decode(c)
}

// chunkMemo decodes the chunks of one stream. The chunks of a stream are
// alike: from one token to the next, only the token's text differs. So the
// memo keeps the last chunk decoded in full and where in it the text of
// its first non-empty content, reasoning or completion string lay; a chunk
// equal to it before and after that place, with a non-empty valid string
// body in between, decodes as the kept one did, for only the emptiness of
// that string counts. Anything else is decoded in full. The result is
// decodeChunk's, always (FuzzChunkMemo).
type chunkMemo struct {
	prev       []byte
	start, end int // the text's raw contents in prev
	c          chunk
	ok         bool
}

func (m *chunkMemo) decode(data []byte, c *chunk) error {
	if m.ok {
		tail := len(m.prev) - m.end
		if len(data) > m.start+tail && bytes.Equal(data[:m.start], m.prev[:m.start]) &&
			bytes.Equal(data[len(data)-tail:], m.prev[m.end:]) && stringBody(data[m.start:len(data)-tail]) {
			*c = m.c
			return nil
		}
	}
	s := scanner{data: data, textStart: -1}
	err := s.decode(c)
	m.ok = err == nil && s.textStart >= 0 && !c.failed
	if m.ok {
		if cap(m.prev) > 1<<16 {
			m.prev = nil // not kept for a huge chunk
		}
		m.prev = append(m.prev[:0], data...)
		m.start, m.end, m.c = s.textStart, s.textEnd, *c
	}
	return err
}

// stringBody says whether b is the whole inside of a JSON string: no quote
// or control character, every escape complete.
func stringBody(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"' || c < 0x20:
			return false
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+6 > len(b) {
					return false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return false
					}
				}
				i += 5
			default:
				return false
			}
		}
	}
	return true
}

// text notes where the first non-empty text string's raw contents lie
// (for chunkMemo).
func (s *scanner) text(raw []byte) {
	if s.textStart < 0 && len(raw) > 0 {
		s.textEnd = s.pos - 1 // before the closing quote
		s.textStart = s.textEnd - len(raw)
	}
}

func (s *scanner) decode(c *chunk) error {
	*c = chunk{}
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != '{' {
		if err := s.value(); err != nil {
			return err
		}
		if err := s.end(); err != nil {
			return err
		}
		return errNotObject
	}
	var (
		objectIsError bool
		message       []byte
		messageEsc    bool
		errValue      []byte
		errSet        bool
	)
	s.pos++
	first := true
	for {
		key, more, err := s.key(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		switch string(key) {
		case "choices":
			tokens, content, err := s.choices()
			if err != nil {
				return err
			}
			c.tokens, c.content = tokens, content
		case "usage":
			has, p, comp, err := s.usage()
			if err != nil {
				return err
			}
			c.usage, c.promptTokens, c.completionTokens = has, p, comp
		case "error":
			start := s.pos
			null, err := s.null()
			if err != nil {
				return err
			}
			if null {
				errSet, errValue = false, nil
				continue
			}
			if err := s.value(); err != nil {
				return err
			}
			errSet, errValue = true, s.data[start:s.pos]
		case "object":
			raw, esc, isStr, err := s.maybeString()
			if err != nil {
				return err
			}
			objectIsError = isStr && stringEquals(raw, esc, "error")
		case "message":
			raw, esc, isStr, err := s.maybeString()
			if err != nil {
				return err
			}
			if isStr {
				message, messageEsc = raw, esc
			} else {
				message = nil
			}
		default:
			if err := s.value(); err != nil {
				return err
			}
		}
	}
	if err := s.end(); err != nil {
		return err
	}
	switch {
	case errSet:
		c.failed = true
		c.errMsg = errorMessage(errValue)
	case objectIsError:
		c.failed = true
		c.errMsg = "error object in stream"
		if message != nil {
			c.errMsg = unquote(message, messageEsc)
		}
	}
	return nil
}

// errorMessage turns an "error" value into a message: the string itself, the
// object's "message", or the raw JSON. Only used on the failure path.
func errorMessage(raw []byte) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	switch e := v.(type) {
	case string:
		return e
	case map[string]any:
		if m, ok := e["message"].(string); ok {
			return m
		}
	}
	const limit = 512
	if len(raw) > limit {
		return string(raw[:limit])
	}
	return string(raw)
}

// choices scans the "choices" array and reports whether any choice carries
// tokens or visible content. null or a non-array means none.
func (s *scanner) choices() (tokens, content bool, err error) {
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != '[' {
		return false, false, s.value()
	}
	if err := s.push(); err != nil {
		return false, false, err
	}
	s.pos++
	first := true
	for {
		more, err := s.elem(&first)
		if err != nil {
			return false, false, err
		}
		if !more {
			break
		}
		t, c, err := s.choice()
		if err != nil {
			return false, false, err
		}
		tokens = tokens || t
		content = content || c
	}
	s.depth--
	return tokens, content, nil
}

// choice scans one element of "choices": chat's delta or a completion's text.
func (s *scanner) choice() (tokens, content bool, err error) {
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != '{' {
		return false, false, s.value()
	}
	if err := s.push(); err != nil {
		return false, false, err
	}
	s.pos++
	var deltaTokens, deltaContent, text bool
	first := true
	for {
		key, more, err := s.key(&first)
		if err != nil {
			return false, false, err
		}
		if !more {
			break
		}
		switch string(key) {
		case "delta":
			deltaTokens, deltaContent, err = s.delta()
			if err != nil {
				return false, false, err
			}
		case "text":
			raw, _, isStr, err := s.maybeString()
			if err != nil {
				return false, false, err
			}
			text = isStr && len(raw) > 0
			if isStr {
				s.text(raw)
			}
		default:
			if err := s.value(); err != nil {
				return false, false, err
			}
		}
	}
	s.depth--
	return deltaTokens || text, deltaContent || text, nil
}

// delta scans a chat delta: content, reasoning_content, reasoning, tool_calls.
func (s *scanner) delta() (tokens, content bool, err error) {
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != '{' {
		return false, false, s.value()
	}
	if err := s.push(); err != nil {
		return false, false, err
	}
	s.pos++
	var hasContent, reasoningContent, reasoning, toolCalls bool
	first := true
	for {
		key, more, err := s.key(&first)
		if err != nil {
			return false, false, err
		}
		if !more {
			break
		}
		switch string(key) {
		case "content", "reasoning_content", "reasoning":
			raw, _, isStr, err := s.maybeString()
			if err != nil {
				return false, false, err
			}
			nonEmpty := isStr && len(raw) > 0
			if isStr {
				s.text(raw)
			}
			switch string(key) {
			case "content":
				hasContent = nonEmpty
			case "reasoning_content":
				reasoningContent = nonEmpty
			default:
				reasoning = nonEmpty
			}
		case "tool_calls":
			n, err := s.arrayLen()
			if err != nil {
				return false, false, err
			}
			toolCalls = n > 0
		default:
			if err := s.value(); err != nil {
				return false, false, err
			}
		}
	}
	s.depth--
	return hasContent || reasoningContent || reasoning || toolCalls, hasContent, nil
}

// usage scans the "usage" value: an object with token counts, or null.
func (s *scanner) usage() (has bool, prompt, completion int64, err error) {
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != '{' {
		return false, 0, 0, s.value()
	}
	if err := s.push(); err != nil {
		return false, 0, 0, err
	}
	s.pos++
	first := true
	for {
		key, more, err := s.key(&first)
		if err != nil {
			return false, 0, 0, err
		}
		if !more {
			break
		}
		switch string(key) {
		case "prompt_tokens":
			prompt, err = s.count()
		case "completion_tokens":
			completion, err = s.count()
		default:
			err = s.value()
		}
		if err != nil {
			return false, 0, 0, err
		}
	}
	s.depth--
	return true, prompt, completion, nil
}

// count reads a token count: a JSON number in [0, 1e15], truncated to an
// integer; anything else counts as 0.
func (s *scanner) count() (int64, error) {
	s.ws()
	start := s.pos
	if s.pos < len(s.data) && (s.data[s.pos] == '-' || isDigit(s.data[s.pos])) {
		if err := s.number(); err != nil {
			return 0, err
		}
		return countFromNumber(s.data[start:s.pos]), nil
	}
	return 0, s.value()
}

func countFromNumber(raw []byte) int64 {
	// Fast path: a plain unsigned integer.
	if len(raw) > 0 && len(raw) <= 15 {
		var n int64
		plain := true
		for _, b := range raw {
			if !isDigit(b) {
				plain = false
				break
			}
			n = n*10 + int64(b-'0')
		}
		if plain {
			return n
		}
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f < 0 || f > 1e15 {
		return 0
	}
	return int64(f)
}

// scanner is a strict JSON scanner over one payload (RFC 8259 grammar,
// invalid UTF-8 tolerated inside strings as encoding/json does).
type scanner struct {
	data  []byte
	pos   int
	depth int
	// textStart and textEnd: see text; -1 when none was seen.
	textStart, textEnd int
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", s.pos, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return // the usual case: no whitespace at all
		}
		s.pos++
	}
}

func (s *scanner) end() error {
	s.ws()
	if s.pos != len(s.data) {
		return s.errorf("trailing data")
	}
	return nil
}

func (s *scanner) push() error {
	s.depth++
	if s.depth > maxJSONDepth {
		return s.errorf("nested too deeply")
	}
	return nil
}

// key advances to the next key of an object whose '{' was consumed. It
// returns more=false after consuming the closing '}'. The key is decoded
// when it holds escapes (rare, so that path may allocate).
func (s *scanner) key(first *bool) (key []byte, more bool, err error) {
	s.ws()
	if s.pos >= len(s.data) {
		return nil, false, s.errorf("unterminated object")
	}
	if *first {
		*first = false
		if s.data[s.pos] == '}' {
			s.pos++
			return nil, false, nil
		}
	} else {
		switch s.data[s.pos] {
		case '}':
			s.pos++
			return nil, false, nil
		case ',':
			s.pos++
			s.ws()
		default:
			return nil, false, s.errorf("expected , or } in object")
		}
	}
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return nil, false, s.errorf("expected a key")
	}
	raw, esc, err := s.str()
	if err != nil {
		return nil, false, err
	}
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return nil, false, s.errorf("expected :")
	}
	s.pos++
	if esc {
		raw = []byte(unquote(raw, true))
	}
	return raw, true, nil
}

// elem advances to the next element of an array whose '[' was consumed.
func (s *scanner) elem(first *bool) (more bool, err error) {
	s.ws()
	if s.pos >= len(s.data) {
		return false, s.errorf("unterminated array")
	}
	if *first {
		*first = false
		if s.data[s.pos] == ']' {
			s.pos++
			return false, nil
		}
		return true, nil
	}
	switch s.data[s.pos] {
	case ']':
		s.pos++
		return false, nil
	case ',':
		s.pos++
		return true, nil
	}
	return false, s.errorf("expected , or ] in array")
}

// arrayLen skips a value and returns its length if it is an array, else 0.
func (s *scanner) arrayLen() (int, error) {
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != '[' {
		return 0, s.value()
	}
	if err := s.push(); err != nil {
		return 0, err
	}
	s.pos++
	n := 0
	first := true
	for {
		more, err := s.elem(&first)
		if err != nil {
			return 0, err
		}
		if !more {
			break
		}
		if err := s.value(); err != nil {
			return 0, err
		}
		n++
	}
	s.depth--
	return n, nil
}

// null consumes a null literal if one is next.
func (s *scanner) null() (bool, error) {
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == 'n' {
		return true, s.literal("null")
	}
	return false, nil
}

// maybeString consumes a value; if it is a string, its raw (undecoded)
// contents are returned.
func (s *scanner) maybeString() (raw []byte, escaped, isString bool, err error) {
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == '"' {
		raw, escaped, err = s.str()
		return raw, escaped, err == nil, err
	}
	return nil, false, false, s.value()
}

// value skips one JSON value, validating it.
func (s *scanner) value() error {
	s.ws()
	if s.pos >= len(s.data) {
		return s.errorf("unexpected end")
	}
	switch b := s.data[s.pos]; {
	case b == '{':
		if err := s.push(); err != nil {
			return err
		}
		s.pos++
		first := true
		for {
			_, more, err := s.key(&first)
			if err != nil {
				return err
			}
			if !more {
				break
			}
			if err := s.value(); err != nil {
				return err
			}
		}
		s.depth--
		return nil
	case b == '[':
		_, err := s.arrayLen()
		return err
	case b == '"':
		_, _, err := s.str()
		return err
	case b == 't':
		return s.literal("true")
	case b == 'f':
		return s.literal("false")
	case b == 'n':
		return s.literal("null")
	case b == '-' || isDigit(b):
		return s.number()
	default:
		return s.errorf("unexpected byte %q", b)
	}
}

func (s *scanner) literal(lit string) error {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return s.errorf("expected %s", lit)
	}
	s.pos += len(lit)
	return nil
}

// str consumes a string starting at '"' and returns its raw contents and
// whether they contain escapes.
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	s.pos++ // opening quote
	start := s.pos
	for s.pos < len(s.data) {
		// Eight bytes at a time up to the first that ends the string,
		// starts an escape or is a control character: most of a chunk
		// is strings.
		for s.pos+8 <= len(s.data) {
			if m := strStops(binary.LittleEndian.Uint64(s.data[s.pos:])); m != 0 {
				s.pos += bits.TrailingZeros64(m) >> 3
				break
			}
			s.pos += 8
		}
		if s.pos >= len(s.data) {
			break
		}
		b := s.data[s.pos]
		switch {
		case b == '"':
			raw = s.data[start:s.pos]
			s.pos++
			return raw, escaped, nil
		case b == '\\':
			escaped = true
			if s.pos+1 >= len(s.data) {
				return nil, false, s.errorf("unterminated escape")
			}
			switch s.data[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case 'u':
				if s.pos+6 > len(s.data) {
					return nil, false, s.errorf("short \\u escape")
				}
				for _, h := range s.data[s.pos+2 : s.pos+6] {
					if !isHex(h) {
						return nil, false, s.errorf("bad \\u escape")
					}
				}
				s.pos += 6
			default:
				return nil, false, s.errorf("bad escape")
			}
		case b < 0x20:
			return nil, false, s.errorf("control character in string")
		default:
			s.pos++
		}
	}
	return nil, false, s.errorf("unterminated string")
}

func (s *scanner) number() error {
	if s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos >= len(s.data) {
		return s.errorf("bad number")
	}
	switch {
	case s.data[s.pos] == '0':
		s.pos++
	case isDigit(s.data[s.pos]):
		for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
			s.pos++
		}
	default:
		return s.errorf("bad number")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if s.pos >= len(s.data) || !isDigit(s.data[s.pos]) {
			return s.errorf("bad fraction")
		}
		for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
			s.pos++
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if s.pos >= len(s.data) || !isDigit(s.data[s.pos]) {
			return s.errorf("bad exponent")
		}
		for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
			s.pos++
		}
	}
	return nil
}

// strStops marks, in the high bit of each byte, the bytes of x (eight of a
// string, the first in the lowest byte) that are '"', '\\' or below 0x20.
// Only the lowest mark is exact (a borrow may mark a byte above a true
// one), and only it is used.
func strStops(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return ((q-ones)&^q | (bs-ones)&^bs | (x-ones*0x20)&^x) & highs
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func isHex(b byte) bool {
	return isDigit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F')
}

// unquote decodes raw string contents; escapes go through encoding/json.
func unquote(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw)
	}
	q := make([]byte, 0, len(raw)+2)
	q = append(q, '"')
	q = append(q, raw...)
	q = append(q, '"')
	var out string
	if err := json.Unmarshal(q, &out); err != nil {
		return string(raw)
	}
	return out
}

func stringEquals(raw []byte, escaped bool, want string) bool {
	if !escaped {
		return string(raw) == want
	}
	return unquote(raw, true) == want
}
