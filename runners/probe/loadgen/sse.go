package loadgen

import (
	"bytes"
	"errors"
	"io"
	"math"
	"time"
)

// maxLineBytes bounds one SSE line, so that a broken server cannot make the
// generator buffer without limit.
const maxLineBytes = 16 << 20

var errLineTooLong = errors.New("SSE line longer than 16 MiB")

// clock gives nanoseconds on the monotonic clock since a level started.
type clock struct{ t0 time.Time }

func (c clock) now() int64 { return int64(time.Since(c.t0)) }

// timedReader remembers when the last bytes arrived from the network: the
// time a Read returned them, before anything is parsed or decoded.
type timedReader struct {
	r     io.Reader
	clock clock
	at    int64
}

func (t *timedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.at = t.clock.now()
	}
	return n, err
}

// sseReader splits a text/event-stream body into events. Lines end in LF
// or CRLF (a lone CR is not treated as a line end: no OpenAI-compatible
// server sends one). Each event carries the arrival time of the network
// read that completed its last data line, taken from the timedReader under
// the body (the connection's).
//
// It reads the body's bytes where they lie in the connection's buffer
// (body.view): a line, and an event's data, are used in place, and copied
// only when they straddle two reads. Buffers are reused across requests.
type sseReader struct {
	src   *body
	times *timedReader
	cur   []byte // what is left of the current view
	long  []byte // a line begun in an earlier view is assembled here

	data    []byte // the current event's data lines, joined by LF
	owned   bool   // data is in dataBuf, not in the view
	dataBuf []byte
	kind    []byte // the current event's "event:" field
	has     bool   // a data line was seen
	at      int64
}

func newSSEReader() *sseReader { return &sseReader{} }

// reset points the reader at a new body whose bytes arrive through times.
func (s *sseReader) reset(body *body, times *timedReader) {
	s.src, s.times, s.cur = body, times, nil
	if cap(s.long) > 1<<20 {
		s.long = nil // give back a buffer grown by one huge line
	}
	if cap(s.dataBuf) > 1<<20 {
		s.dataBuf = nil
	}
	s.long = s.long[:0]
	s.clear()
}

func (s *sseReader) clear() {
	s.data, s.owned, s.has = nil, false, false
	s.kind = s.kind[:0]
}

// event is one dispatched SSE event. data is valid until the next call.
type event struct {
	data []byte
	kind []byte // "event:" field, empty for the default "message"
	at   int64  // arrival of the bytes that completed its last data line
}

// next returns the next event with data. At the end of the body it returns
// io.EOF; an event whose lines were complete but which lacks its blank line
// at EOF is still returned (servers that close right after "data: [DONE]\n"
// exist), while a line cut off by EOF is dropped.
func (s *sseReader) next(ev *event) error {
	s.clear()
	for {
		line, assembled, err := s.line()
		if err != nil {
			if errors.Is(err, io.EOF) && s.has && len(s.data) > 0 {
				*ev = event{data: s.data, kind: s.kind, at: s.at}
				return nil
			}
			return err
		}
		if len(line) == 0 {
			if s.has && len(s.data) > 0 {
				*ev = event{data: s.data, kind: s.kind, at: s.at}
				return nil
			}
			s.clear()
			continue
		}
		s.field(line, assembled)
	}
}

// field applies one non-empty line to the event being assembled; assembled
// says the line is in s.long, which the next line reuses.
func (s *sseReader) field(line []byte, assembled bool) {
	if line[0] == ':' {
		return // comment (keep-alive)
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		switch {
		case s.has: // another data line: joined to the others
			s.own()
			s.dataBuf = append(append(s.dataBuf, '\n'), value...)
			s.data = s.dataBuf
		case assembled:
			s.dataBuf = append(s.dataBuf[:0], value...)
			s.data, s.owned = s.dataBuf, true
		default:
			s.data, s.owned = value, false // in place
		}
		s.has = true
		s.at = s.times.at
	case "event":
		s.kind = append(s.kind[:0], value...)
	}
}

// own moves the event's data out of the view, before the view changes.
func (s *sseReader) own() {
	if !s.owned {
		s.dataBuf = append(s.dataBuf[:0], s.data...)
		s.data, s.owned = s.dataBuf, true
	}
}

// line returns the next complete line without its line end, and whether it
// was assembled from several views (then it is valid only until the next
// call). Bytes cut off by the end of the body are dropped, with io.EOF.
func (s *sseReader) line() ([]byte, bool, error) {
	for {
		if i := bytes.IndexByte(s.cur, '\n'); i >= 0 {
			line := s.cur[:i]
			s.cur = s.cur[i+1:]
			assembled := len(s.long) > 0
			if assembled {
				if len(s.long)+len(line) > maxLineBytes {
					return nil, false, errLineTooLong
				}
				line = append(s.long, line...)
				s.long = line[:0]
			}
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			return line, assembled, nil
		}
		if len(s.cur) > 0 {
			if len(s.long)+len(s.cur) > maxLineBytes {
				return nil, false, errLineTooLong
			}
			s.long = append(s.long, s.cur...)
			s.cur = nil
		}
		if s.has {
			s.own()
		}
		v, err := s.src.view(math.MaxInt)
		if err != nil {
			s.long = s.long[:0]
			return nil, false, err
		}
		s.cur = v
	}
}

// drain reads the rest of the body, at most limit bytes; true when it
// reached the end.
func (s *sseReader) drain(limit int) bool {
	limit -= len(s.cur)
	s.cur = nil
	for limit >= 0 {
		v, err := s.src.view(limit + 1)
		if err != nil {
			return errors.Is(err, io.EOF)
		}
		limit -= len(v)
	}
	return false
}
