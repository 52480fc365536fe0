package parse

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/accordlab/accord/runners/probe/wire"
)

// This file is a hand-written decoder for one line of requests.jsonl into a
// wire.RequestRecord. A million records through encoding/json's reflection
// cost several seconds; this decoder does one pass without allocating. It
// accepts exactly what encoding/json accepts for this struct (any key order,
// whitespace, unknown keys with any valid JSON value, null for "unset",
// case-insensitive key matching) and rejects what it rejects (floats or
// strings in integer fields, overflow, trailing data); a fuzz test holds it
// to that.

// recordLine is a decoded record plus the raw error strings (only their
// emptiness and the error kind's text matter to the importer).
type recordLine struct {
	wire.RequestRecord
	errorKind []byte // raw JSON string body of error_kind (escapes not decoded)
	errorText bool   // error is non-empty
}

type scanError struct {
	field string
	msg   string
}

func (e *scanError) Error() string {
	if e.field != "" {
		return e.field + ": " + e.msg
	}
	return e.msg
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	// Locals, not the fields: the compiler keeps them in registers.
	b, i := s.b, s.i
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			s.i = i
			return
		}
	}
	s.i = i
}

func (s *scanner) fail(field, format string, args ...any) error {
	return &scanError{field: field, msg: fmt.Sprintf(format, args...)}
}

func (s *scanner) eofOr(field, what string) error {
	if s.i >= len(s.b) {
		return s.fail(field, "truncated record (the line ends inside the JSON object)")
	}
	return s.fail(field, "%s at byte %d, found %q", what, s.i+1, s.b[s.i])
}

// decodeRecordLine decodes one JSON object into r. r must be zeroed by the caller.
func decodeRecordLine(line []byte, r *recordLine) error {
	s := scanner{b: line}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		if s.i >= len(s.b) {
			return s.fail("", "empty record")
		}
		return s.fail("", "a record must be a JSON object, found %q at byte %d", s.b[s.i], s.i+1)
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return s.end()
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.eofOr("", "expected a key")
		}
		key, escaped, err := s.str("")
		if err != nil {
			return err
		}
		if escaped {
			k, ok := unescape(key)
			if !ok {
				return s.fail("", "invalid escape in key")
			}
			key = k
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.eofOr(string(key), "expected ':'")
		}
		s.i++
		s.ws()
		if err := s.field(key, r); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.eofOr("", "")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return s.end()
		default:
			return s.eofOr("", "expected ',' or '}'")
		}
	}
}

func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail("", "unexpected data after the record at byte %d", s.i+1)
	}
	return nil
}

// Field ids, matched exactly first and then case-insensitively as
// encoding/json does.
var recordFields = []string{
	"id", "warmup", "t_intended", "t_sent", "t_first_chunk", "t_first_token", "t_first_content",
	"t_last_token", "t_done", "prompt_tokens", "output_tokens", "usage_counted", "chunks",
	"error_kind", "error", "http_status",
}

func (s *scanner) field(key []byte, r *recordLine) error {
	// switch string(key) compares without allocating; the field names
	// passed on are constants for the same reason.
	switch string(key) {
	case "id":
		return s.int("id", &r.ID)
	case "t_intended":
		return s.int("t_intended", &r.Intended)
	case "t_sent":
		return s.int("t_sent", &r.Sent)
	case "t_first_chunk":
		return s.int("t_first_chunk", &r.FirstChunk)
	case "t_first_token":
		return s.int("t_first_token", &r.FirstToken)
	case "t_first_content":
		return s.int("t_first_content", &r.FirstContent)
	case "t_last_token":
		return s.int("t_last_token", &r.LastToken)
	case "t_done":
		return s.int("t_done", &r.Done)
	case "prompt_tokens":
		return s.intInt("prompt_tokens", &r.PromptTokens)
	case "output_tokens":
		return s.intInt("output_tokens", &r.OutputTokens)
	case "chunks":
		return s.intInt("chunks", &r.Chunks)
	case "http_status":
		return s.intInt("http_status", &r.HTTPStatus)
	case "warmup":
		return s.bool("warmup", &r.Warmup)
	case "usage_counted":
		return s.bool("usage_counted", &r.UsageCounted)
	case "error_kind":
		return s.strField("error_kind", &r.errorKind, nil)
	case "error":
		return s.strField("error", nil, &r.errorText)
	}
	for _, f := range recordFields {
		if bytes.EqualFold([]byte(f), key) {
			return s.field([]byte(f), r)
		}
	}
	if err := s.skip(""); err != nil {
		var se *scanError
		if errors.As(err, &se) && se.field == "" {
			se.field = string(key)
		}
		return err
	}
	return nil
}

func (s *scanner) null() bool {
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

func (s *scanner) int(field string, dst *int64) error {
	if s.null() {
		return nil
	}
	start := s.i
	neg := false
	if s.i < len(s.b) && s.b[s.i] == '-' {
		neg = true
		s.i++
	}
	if s.i >= len(s.b) {
		return s.eofOr(field, "")
	}
	c := s.b[s.i]
	if c < '0' || c > '9' {
		if c == '"' || c == 't' || c == 'f' || c == '{' || c == '[' {
			return s.fail(field, "must be an integer, found %q", c)
		}
		return s.eofOr(field, "invalid number")
	}
	var v uint64
	if c == '0' {
		s.i++
	} else {
		b, i := s.b, s.i
		for i < len(b) {
			d := b[i] - '0'
			if d > 9 {
				break
			}
			if v > (1<<63)/10 {
				return s.fail(field, "integer %s… overflows int64", b[start:i])
			}
			v = v*10 + uint64(d)
			i++
		}
		s.i = i
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			if err := s.numberTail(); err != nil {
				return s.fail(field, "%v", err)
			}
			return s.fail(field, "must be an integer, found %s", s.b[start:s.i])
		case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return s.fail(field, "invalid number (leading zero)")
		}
	}
	if neg {
		if v > 1<<63 {
			return s.fail(field, "integer %s overflows int64", s.b[start:s.i])
		}
		*dst = -int64(v)
		return nil
	}
	if v > 1<<63-1 {
		return s.fail(field, "integer %s overflows int64", s.b[start:s.i])
	}
	*dst = int64(v)
	return nil
}

func (s *scanner) intInt(field string, dst *int) error {
	var v int64
	if s.null() {
		return nil
	}
	if err := s.int(field, &v); err != nil {
		return err
	}
	*dst = int(v)
	return nil
}

func (s *scanner) bool(field string, dst *bool) error {
	switch {
	case len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "true":
		s.i += 4
		*dst = true
	case len(s.b)-s.i >= 5 && string(s.b[s.i:s.i+5]) == "false":
		s.i += 5
		*dst = false
	case s.null():
	default:
		if s.i >= len(s.b) {
			return s.eofOr(field, "")
		}
		if err := s.skip(field); err != nil {
			return err
		}
		return s.fail(field, "must be true or false")
	}
	return nil
}

// strField reads a string field: raw receives the string's raw body, nonEmpty
// whether it decodes to a non-empty string.
func (s *scanner) strField(field string, raw *[]byte, nonEmpty *bool) error {
	if s.null() {
		return nil
	}
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		if s.i >= len(s.b) {
			return s.eofOr(field, "")
		}
		if err := s.skip(field); err != nil {
			return err
		}
		return s.fail(field, "must be a string")
	}
	body, _, err := s.str(field)
	if err != nil {
		return err
	}
	if raw != nil {
		*raw = body
	}
	if nonEmpty != nil {
		*nonEmpty = len(body) > 0
	}
	return nil
}

// str reads a JSON string at s.i (which is '"') and returns its raw body and
// whether it contains escapes. It validates escapes and control characters.
func (s *scanner) str(field string) ([]byte, bool, error) {
	s.i++ // opening quote
	start := s.i
	escaped := false
	for s.i < len(s.b) {
		// Plain characters in a run, with the index in a register.
		b, i := s.b, s.i
		for i < len(b) && !strSpecial[b[i]] {
			i++
		}
		s.i = i
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			body := s.b[start:s.i]
			s.i++
			return body, escaped, nil
		case c == '\\':
			escaped = true
			s.i++
			if s.i >= len(s.b) {
				return nil, false, s.eofOr(field, "")
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if len(s.b)-s.i < 5 {
					return nil, false, s.fail(field, "truncated \\u escape")
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return nil, false, s.fail(field, "invalid \\u escape")
					}
				}
				s.i += 5
			default:
				return nil, false, s.fail(field, "invalid escape \\%c in string", s.b[s.i])
			}
		case c < 0x20:
			return nil, false, s.fail(field, "control character in string")
		default:
			s.i++
		}
	}
	return nil, false, s.eofOr(field, "")
}

// strSpecial marks the bytes that end a run of plain characters in a
// string: the closing quote, a backslash, control characters.
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// unescape decodes a validated JSON string body (keys only; rare).
func unescape(b []byte) ([]byte, bool) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			out = append(out, b[i])
			continue
		}
		i++
		switch b[i] {
		case '"', '\\', '/':
			out = append(out, b[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(b[i+1 : i+5])
			i += 4
			if r >= 0xD800 && r < 0xDC00 && i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
				if r2 := hex4(b[i+3 : i+7]); r2 >= 0xDC00 && r2 < 0xE000 {
					r = (r-0xD800)<<10 + (r2 - 0xDC00) + 0x10000
					i += 6
				} else {
					r = utf8.RuneError
				}
			} else if r >= 0xD800 && r < 0xE000 {
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
	}
	return out, true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		}
	}
	return r
}

// numberTail validates the fraction and exponent of a JSON number.
func (s *scanner) numberTail() error {
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.i >= len(s.b) || s.b[s.i] < '0' || s.b[s.i] > '9' {
			return errors.New("invalid number")
		}
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.i >= len(s.b) || s.b[s.i] < '0' || s.b[s.i] > '9' {
			return errors.New("invalid number")
		}
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
	}
	return nil
}

// maxSkipDepth matches encoding/json's nesting limit.
const maxSkipDepth = 10000

// skip validates and skips one JSON value of an unknown field.
func (s *scanner) skip(field string) error {
	depth := 0
	var stack []byte // '{' or '[' per open container
	for {
		s.ws()
		if s.i >= len(s.b) {
			return s.eofOr(field, "")
		}
		// one value
		switch c := s.b[s.i]; {
		case c == '{' || c == '[':
			depth++
			if depth > maxSkipDepth {
				return s.fail(field, "nested too deeply")
			}
			stack = append(stack, c)
			s.i++
			s.ws()
			if s.i < len(s.b) && (c == '{' && s.b[s.i] == '}' || c == '[' && s.b[s.i] == ']') {
				s.i++
				stack = stack[:len(stack)-1]
				depth--
				break
			}
			if c == '{' {
				if err := s.objKey(field); err != nil {
					return err
				}
			}
			continue
		case c == '"':
			if _, _, err := s.str(field); err != nil {
				return err
			}
		case c == '-' || c >= '0' && c <= '9':
			if err := s.number(field); err != nil {
				return err
			}
		case c == 't':
			if !s.lit("true") {
				return s.eofOr(field, "invalid value")
			}
		case c == 'f':
			if !s.lit("false") {
				return s.eofOr(field, "invalid value")
			}
		case c == 'n':
			if !s.lit("null") {
				return s.eofOr(field, "invalid value")
			}
		default:
			return s.eofOr(field, "invalid value")
		}
		// after a value: close containers or move to the next element
		for {
			if len(stack) == 0 {
				return nil
			}
			s.ws()
			if s.i >= len(s.b) {
				return s.eofOr(field, "")
			}
			top := stack[len(stack)-1]
			c := s.b[s.i]
			if c == ',' {
				s.i++
				if top == '{' {
					s.ws()
					if err := s.objKey(field); err != nil {
						return err
					}
				}
				break
			}
			if top == '{' && c == '}' || top == '[' && c == ']' {
				s.i++
				stack = stack[:len(stack)-1]
				depth--
				continue
			}
			return s.eofOr(field, "expected ',' or the end of a container")
		}
	}
}

// objKey reads `"key" :` inside a skipped object.
func (s *scanner) objKey(field string) error {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return s.eofOr(field, "expected a key")
	}
	if _, _, err := s.str(field); err != nil {
		return err
	}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return s.eofOr(field, "expected ':'")
	}
	s.i++
	return nil
}

func (s *scanner) lit(word string) bool {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

func (s *scanner) number(field string) error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) || s.b[s.i] < '0' || s.b[s.i] > '9' {
		return s.eofOr(field, "invalid number")
	}
	if s.b[s.i] == '0' {
		s.i++
	} else {
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
	}
	if err := s.numberTail(); err != nil {
		return s.fail(field, "%v", err)
	}
	return nil
}
