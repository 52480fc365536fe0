package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The generator speaks HTTP/1.1 itself rather than through net/http: one
// connection per in-flight request, owned by its worker, the request
// written with one write and the response read on the same goroutine.
// net/http's transport hands every request and response between three
// goroutines and reads ahead on idle connections; here that doubled the
// client's CPU per request, which a load generator cannot afford (see
// BenchmarkCapacity). What is left is small: status line, headers,
// Content-Length or chunked bodies, keep-alive, TLS.

// idleTimeout is how long a connection may sit unused before it is closed
// instead of reused: below uvicorn's 5 s keep-alive (vLLM, SGLang), so that
// the client never sends on a connection the server is closing.
const idleTimeout = 4 * time.Second

// maxHeaderBytes bounds a response's status line and headers.
const maxHeaderBytes = 1 << 20

// endpoint is where requests go and the fixed part of every request head.
type endpoint struct {
	addr   string // host:port to dial
	tls    *tls.Config
	dialer net.Dialer
	head   []byte // request line and fixed headers, each ending in CRLF
}

func newEndpoint(u *url.URL, extra http.Header) (*endpoint, error) {
	e := &endpoint{dialer: net.Dialer{KeepAlive: 30 * time.Second}}
	host := u.Hostname()
	port := u.Port()
	switch u.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		if port == "" {
			port = "443"
		}
		e.tls = &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}}
	default:
		return nil, fmt.Errorf("endpoint scheme %q is not http or https", u.Scheme)
	}
	e.addr = net.JoinHostPort(host, port)
	b := []byte("POST " + u.EscapedPath() + " HTTP/1.1\r\nHost: " + u.Host + "\r\n")
	b = append(b, "User-Agent: accord-probe\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"...)
	for name, values := range extra {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("header name %q is not valid", name)
		}
		switch strings.ToLower(name) {
		case "host", "content-length", "transfer-encoding", "connection", "x-request-id":
			return nil, fmt.Errorf("header %s is set by the load generator", name)
		}
		for _, v := range values {
			if strings.ContainsAny(v, "\r\n\x00") {
				return nil, fmt.Errorf("header %s has a line break in its value", name)
			}
			b = append(b, http.CanonicalHeaderKey(name)...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	e.head = b
	return e, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return true
}

// conn is one keep-alive connection, used by one request at a time.
type conn struct {
	nc       net.Conn
	tr       timedReader
	br       *connReader
	lastUsed time.Time
	reused   bool // a request was answered on it before
}

// receiveBuffer is each connection's SO_RCVBUF. A fixed buffer twice the
// default holds a stream's many small segments (each taking far more
// buffer than its bytes) without shrinking the window, so the kernel
// acknowledges them as they arrive rather than in the client's reads, and
// leaves autotuning off: BenchmarkCapacity measured about a fifth less
// CPU per request than with the default.
const receiveBuffer = 256 << 10

func (e *endpoint) dial(ctx context.Context, c clock) (*conn, error) {
	nc, err := e.dialer.DialContext(ctx, "tcp", e.addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
		_ = tc.SetReadBuffer(receiveBuffer) // best effort: a lower limit only costs CPU
	}
	if e.tls != nil {
		tc := tls.Client(nc, e.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
	}
	cn := &conn{nc: nc, tr: timedReader{r: nc, clock: c}}
	cn.br = newConnReader(&cn.tr, 16<<10)
	return cn, nil
}

// conns tracks the open connections of a level, so that ending the level
// can interrupt every blocked read at once.
type conns struct {
	mu      sync.Mutex
	open    map[*conn]struct{}
	stopped bool
}

func (cs *conns) add(c *conn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.stopped {
		return false
	}
	if cs.open == nil {
		cs.open = make(map[*conn]struct{})
	}
	cs.open[c] = struct{}{}
	return true
}

func (cs *conns) close(c *conn) {
	cs.mu.Lock()
	delete(cs.open, c)
	cs.mu.Unlock()
	_ = c.nc.Close()
}

// interrupt makes every blocked read or write return at once.
func (cs *conns) interrupt() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.stopped = true
	for c := range cs.open {
		_ = c.nc.SetDeadline(time.Unix(1, 0))
	}
}

func (cs *conns) closeAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.stopped = true
	for c := range cs.open {
		_ = c.nc.Close()
	}
	cs.open = nil
}

// response is a parsed status line and the headers that matter here.
type response struct {
	status      int
	chunked     bool
	length      int64 // -1: unknown (read to EOF) unless chunked
	close       bool  // the connection cannot be reused afterwards
	contentType string
}

var errMalformed = errors.New("malformed HTTP response")

// readResponse reads a response head, skipping 1xx interim responses.
func readResponse(br *connReader, r *response) error {
	for {
		if err := readHead(br, r); err != nil {
			return err
		}
		if r.status >= 200 || r.status == 101 {
			return nil
		}
	}
}

func readHead(br *connReader, r *response) error {
	*r = response{length: -1}
	total := 0
	line, err := headLine(br, &total)
	if err != nil {
		return err
	}
	// HTTP/1.x SSS reason
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return fmt.Errorf("%w: status line %q", errMalformed, truncate(line, 64))
	}
	switch line[7] {
	case '1':
	case '0':
		r.close = true // HTTP/1.0 keeps alive only on request; we never ask
	default:
		return fmt.Errorf("%w: status line %q", errMalformed, truncate(line, 64))
	}
	status := 0
	for _, c := range line[9:12] {
		if !isDigit(c) {
			return fmt.Errorf("%w: status %q", errMalformed, line[9:12])
		}
		status = status*10 + int(c-'0')
	}
	if status < 100 {
		return fmt.Errorf("%w: status %d", errMalformed, status)
	}
	r.status = status
	sawLength := false
	for {
		line, err := headLine(br, &total)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return fmt.Errorf("%w: header line %q", errMalformed, truncate(line, 64))
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 || (sawLength && n != r.length) {
				return fmt.Errorf("%w: Content-Length %q", errMalformed, truncate(value, 32))
			}
			r.length, sawLength = n, true
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			codings := bytes.Split(value, []byte(","))
			last := bytes.TrimSpace(codings[len(codings)-1])
			if !bytes.EqualFold(last, []byte("chunked")) || len(codings) > 1 {
				return fmt.Errorf("%w: unsupported Transfer-Encoding %q", errMalformed, truncate(value, 32))
			}
			r.chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			for _, tok := range bytes.Split(value, []byte(",")) {
				if bytes.EqualFold(bytes.TrimSpace(tok), []byte("close")) {
					r.close = true
				}
			}
		case bytes.EqualFold(name, []byte("Content-Type")):
			r.contentType = string(value)
		}
	}
	if r.chunked {
		r.length = -1
	}
	if !r.chunked && r.length < 0 && r.status >= 200 && r.status != 204 && r.status != 304 {
		r.close = true // the body ends with the connection
	}
	if r.status == 204 || r.status == 304 || (r.status >= 100 && r.status < 200) {
		r.length, r.chunked = 0, false
	}
	return nil
}

// headLine reads one line of a response head, without its CRLF (or LF).
func headLine(br *connReader, total *int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	*total += len(line)
	if errors.Is(err, bufio.ErrBufferFull) || *total > maxHeaderBytes {
		return nil, fmt.Errorf("%w: header line too long", errMalformed)
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// body reads a response body: chunked, of a known length, or up to EOF.
// view hands out the body's bytes where they lie in the connection's
// buffer, so that the event stream is parsed without copying it; Read
// copies them, for the rest. The CRLF after a chunk is consumed by the
// next call, so that neither ever blocks once it has data to return.
type body struct {
	br       *connReader
	chunked  bool
	left     int64 // bytes left in this chunk, or of the Content-Length; -1: to EOF
	needCRLF bool
	done     bool
}

func (b *body) reset(br *connReader, r *response) {
	*b = body{br: br, chunked: r.chunked, left: r.length}
	if r.chunked {
		b.left = 0
	}
	if !r.chunked && r.length == 0 {
		b.done = true
	}
}

var errChunk = errors.New("malformed chunked encoding")

func (b *body) Read(p []byte) (int, error) {
	v, err := b.view(len(p))
	return copy(p, v), err
}

// view returns the next bytes of the body, at most max, and consumes them.
// They are the connection buffer's own: valid until the next call on b or
// on its reader. It reads from the connection (once) only when nothing is
// buffered. At the end it returns io.EOF.
func (b *body) view(max int) ([]byte, error) {
	if b.done {
		return nil, io.EOF
	}
	if max <= 0 {
		return nil, nil
	}
	if b.chunked && b.left == 0 {
		if b.needCRLF {
			if err := b.crlf(); err != nil {
				return nil, err
			}
			b.needCRLF = false
		}
		size, err := b.chunkSize()
		if err != nil {
			return nil, err
		}
		if size == 0 {
			if err := b.trailer(); err != nil {
				return nil, err
			}
			b.done = true
			return nil, io.EOF
		}
		b.left = size
	}
	if b.br.Buffered() == 0 {
		if err := b.br.fill(); err != nil { // one read from the connection
			if !errors.Is(err, io.EOF) {
				return nil, err
			}
			if !b.chunked && b.left < 0 {
				b.done = true // the body ends with the connection
				return nil, io.EOF
			}
			return nil, io.ErrUnexpectedEOF
		}
	}
	v := b.br.unread()
	v = v[:min(len(v), max)]
	if b.left >= 0 && int64(len(v)) > b.left {
		v = v[:b.left]
	}
	b.br.discard(len(v))
	n := len(v)
	if b.left > 0 {
		if b.left -= int64(n); b.left == 0 {
			b.needCRLF = b.chunked
			b.done = !b.chunked
		}
	}
	return v, nil
}

func (b *body) crlf() error {
	if p := b.br.unread(); len(p) >= 2 && p[0] == '\r' && p[1] == '\n' {
		b.br.discard(2) // the usual case, without a read
		return nil
	}
	c, err := b.br.ReadByte()
	if err == nil && c == '\r' {
		c, err = b.br.ReadByte()
	}
	if err != nil {
		return eofIsUnexpected(err)
	}
	if c != '\n' {
		return fmt.Errorf("%w: no CRLF after chunk data", errChunk)
	}
	return nil
}

// chunkSize reads a chunk-size line: hex digits, optional extensions.
func (b *body) chunkSize() (int64, error) {
	// The usual line, hex digits and CRLF, read where it lies.
	if p := b.br.unread(); len(p) >= 3 {
		var n int64
		i := 0
		for ; i < len(p) && i < 15; i++ {
			d := unhex(p[i])
			if d < 0 {
				break
			}
			n = n<<4 | int64(d)
		}
		if i > 0 && i+1 < len(p) && p[i] == '\r' && p[i+1] == '\n' {
			b.br.discard(i + 2)
			return n, nil
		}
	}
	line, err := b.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return 0, fmt.Errorf("%w: chunk size line too long", errChunk)
	}
	if err != nil {
		return 0, eofIsUnexpected(err)
	}
	line = bytes.TrimRight(line, "\r\n")
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimRight(line, " \t")
	if len(line) == 0 || len(line) > 15 {
		return 0, fmt.Errorf("%w: chunk size %q", errChunk, truncate(line, 20))
	}
	var n int64
	for _, c := range line {
		var d byte
		switch {
		case isDigit(c):
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, fmt.Errorf("%w: chunk size %q", errChunk, truncate(line, 20))
		}
		n = n<<4 | int64(d)
	}
	return n, nil
}

// trailer skips trailer fields up to the blank line that ends the body.
func (b *body) trailer() error {
	total := 0
	for {
		line, err := headLine(b.br, &total)
		if err != nil {
			return eofIsUnexpected(err)
		}
		if len(line) == 0 {
			return nil
		}
	}
}

// unhex is the value of a hex digit, or -1.
func unhex(c byte) int {
	switch {
	case isDigit(c):
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func eofIsUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
