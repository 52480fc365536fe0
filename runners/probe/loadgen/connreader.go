package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// connReader buffers a connection's bytes, as bufio.Reader does, with its
// buffer open to the body's framing (body.view), which reads the chunk
// headers and hands out data in place: a stream has a chunk per token, and
// a call per access was a visible share of the client's CPU.
type connReader struct {
	rd   io.Reader
	buf  []byte
	r, w int // unread bytes: buf[r:w]
	err  error
}

func newConnReader(rd io.Reader, size int) *connReader {
	return &connReader{rd: rd, buf: make([]byte, size)}
}

// unread is the buffered bytes; valid until the next fill.
func (b *connReader) unread() []byte { return b.buf[b.r:b.w] }

// Buffered is how many bytes can be read without reading the connection.
func (b *connReader) Buffered() int { return b.w - b.r }

// discard consumes n buffered bytes.
func (b *connReader) discard(n int) { b.r += n }

// fill reads once from the connection, after moving the unread bytes to
// the front. It reports an error (kept for the next calls) only when it
// got no bytes.
func (b *connReader) fill() error {
	if b.err != nil {
		if b.r == b.w {
			return b.readErr()
		}
		return nil
	}
	if b.r > 0 {
		copy(b.buf, b.buf[b.r:b.w])
		b.w -= b.r
		b.r = 0
	}
	if b.w == len(b.buf) {
		return bufio.ErrBufferFull
	}
	for range 100 { // as bufio: a reader returning nothing forever is broken
		n, err := b.rd.Read(b.buf[b.w:])
		if n < 0 {
			panic(errors.New("loadgen: reader returned a negative count"))
		}
		b.w += n
		if err != nil {
			b.err = err
			if n == 0 {
				return b.readErr()
			}
			return nil
		}
		if n > 0 {
			return nil
		}
	}
	b.err = io.ErrNoProgress
	return b.readErr()
}

func (b *connReader) readErr() error {
	err := b.err
	if !errors.Is(err, io.EOF) {
		b.err = nil // a deadline may be moved, and the read tried again
	}
	return err
}

// ReadSlice reads up to and including delim, as bufio.Reader's: the bytes
// are the buffer's, bufio.ErrBufferFull when they fill it without delim.
func (b *connReader) ReadSlice(delim byte) ([]byte, error) {
	for start := b.r; ; {
		if i := bytes.IndexByte(b.buf[start:b.w], delim); i >= 0 {
			line := b.buf[b.r : start+i+1]
			b.r = start + i + 1
			return line, nil
		}
		if b.err != nil || b.w-b.r == len(b.buf) {
			line := b.buf[b.r:b.w]
			b.r = b.w
			if b.err == nil {
				return line, bufio.ErrBufferFull
			}
			return line, b.readErr()
		}
		start = b.w - b.r // where to search from once the bytes moved
		if err := b.fill(); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			line := b.buf[b.r:b.w]
			b.r = b.w
			return line, err
		}
		start += b.r
	}
}

// ReadByte reads one byte.
func (b *connReader) ReadByte() (byte, error) {
	for b.r == b.w {
		if err := b.fill(); err != nil {
			return 0, err
		}
	}
	c := b.buf[b.r]
	b.r++
	return c, nil
}
