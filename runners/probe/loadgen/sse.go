package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"io"
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
// the body (the connection's). Buffers are reused across requests.
type sseReader struct {
	times *timedReader
	br    *bufio.Reader
	long  []byte // a line longer than br's buffer is assembled here
	data  []byte // the current event's data lines, joined by LF
	kind  []byte // the current event's "event:" field
}

func newSSEReader(bufSize int) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(nil, bufSize)}
}

// reset points the reader at a new body whose bytes arrive through times.
func (s *sseReader) reset(body io.Reader, times *timedReader) {
	s.times = times
	s.br.Reset(body)
	if cap(s.long) > 1<<20 {
		s.long = nil // give back a buffer grown by one huge line
	}
	if cap(s.data) > 1<<20 {
		s.data = nil
	}
	s.data = s.data[:0]
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
	s.data = s.data[:0]
	s.kind = s.kind[:0]
	hasData := false
	var at int64
	for {
		line, complete, err := s.line()
		eof := errors.Is(err, io.EOF)
		if err != nil && !eof {
			return err
		}
		if len(line) > 0 && complete {
			s.field(line, &hasData, &at)
		}
		if (len(line) == 0 && complete) || eof {
			if hasData && len(s.data) > 0 {
				*ev = event{data: s.data, kind: s.kind, at: at}
				return nil
			}
			if eof {
				return io.EOF
			}
			hasData = false
			s.data = s.data[:0]
			s.kind = s.kind[:0]
		}
	}
}

// field applies one non-empty line to the event being assembled.
func (s *sseReader) field(line []byte, hasData *bool, at *int64) {
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
		if *hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		*hasData = true
		*at = s.times.at
	case "event":
		s.kind = append(s.kind[:0], value...)
	}
}

// line returns the next line without its line end, and whether the line
// end was there (false for bytes cut off by the end of the body). The slice
// is valid until the next call.
func (s *sseReader) line() ([]byte, bool, error) {
	b, err := s.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.long = append(s.long[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(s.long) > maxLineBytes {
				return nil, false, errLineTooLong
			}
			b, err = s.br.ReadSlice('\n')
			s.long = append(s.long, b...)
		}
		b = s.long
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	n := len(b)
	if n == 0 || b[n-1] != '\n' {
		return b, false, err
	}
	b = b[:n-1]
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b, true, err
}
