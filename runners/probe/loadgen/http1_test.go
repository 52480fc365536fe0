package loadgen

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// parseResponse reads a whole response with the generator's HTTP code.
func parseResponse(in, sizes []byte) (response, []byte, error) {
	tr := &timedReader{r: &pieces{data: in, sizes: sizes}, clock: clock{t0: time.Now()}}
	br := newConnReader(tr, 4096)
	var r response
	if err := readResponse(br, &r); err != nil {
		return r, nil, err
	}
	var b body
	b.reset(br, &r)
	out, err := io.ReadAll(&b)
	return r, out, err
}

var responseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n7\r\ndata: x\r\n3;ext=1\r\n\n\n\n\r\n0\r\nTrailer: t\r\n\r\n",
	"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\nConnection: close\r\n\r\nerror",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.0 200 OK\r\n\r\nuntil the end",
	"HTTP/1.1 200\nContent-Length: 2\n\nhi",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
	"HTTP/2 200\r\n\r\n",
	"HTTP/1.1 2000 OK\r\n\r\n",
	"HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc",
}

func TestReadResponse(t *testing.T) {
	t.Parallel()
	r, out, err := parseResponse([]byte(responseSeeds[0]), nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.status)
	require.True(t, r.chunked)
	require.False(t, r.close)
	require.Equal(t, "text/event-stream", r.contentType)
	require.Equal(t, "data: x\n\n\n", string(out))

	r, out, err = parseResponse([]byte(responseSeeds[1]), []byte{2})
	require.NoError(t, err)
	require.Equal(t, 500, r.status)
	require.True(t, r.close)
	require.Equal(t, "error", string(out))

	r, out, err = parseResponse([]byte(responseSeeds[2]), nil)
	require.NoError(t, err)
	require.Equal(t, 204, r.status, "1xx skipped")
	require.Empty(t, out)

	r, out, err = parseResponse([]byte(responseSeeds[3]), nil)
	require.NoError(t, err)
	require.True(t, r.close, "HTTP/1.0 and a body to EOF")
	require.Equal(t, "until the end", string(out))

	_, out, err = parseResponse([]byte(responseSeeds[4]), nil)
	require.NoError(t, err)
	require.Equal(t, "hi", string(out))

	for _, bad := range responseSeeds[5:10] {
		_, _, err := parseResponse([]byte(bad), nil)
		require.ErrorIs(t, err, errMalformed, "%q", bad)
	}
	_, _, err = parseResponse([]byte(responseSeeds[10]), nil)
	require.ErrorIs(t, err, errChunk)
	_, out, err = parseResponse([]byte(responseSeeds[11]), nil)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, "abc", string(out))
	_, _, err = parseResponse(nil, nil)
	require.ErrorIs(t, err, io.EOF, "closed before any byte: a stale connection")
}

func TestEndpointHead(t *testing.T) {
	t.Parallel()
	u, err := url.Parse("https://example.test/v1/chat/completions")
	require.NoError(t, err)
	e, err := newEndpoint(u, http.Header{"authorization": {"Bearer x"}})
	require.NoError(t, err)
	require.Equal(t, "example.test:443", e.addr)
	require.NotNil(t, e.tls)
	head := string(e.head)
	require.True(t, strings.HasPrefix(head, "POST /v1/chat/completions HTTP/1.1\r\nHost: example.test\r\n"))
	require.Contains(t, head, "Authorization: Bearer x\r\n")
	for _, h := range []http.Header{{"X-Bad": {"a\r\nInjected: 1"}}, {"Bad Name": {"x"}}, {"Content-Length": {"3"}}} {
		_, err := newEndpoint(u, h)
		require.Error(t, err, "%v", h)
	}
}

// FuzzResponse checks the response reader against net/http's: where both
// read a response through, they agree on its status and body; whatever the
// input, the body never holds bytes net/http's would not.
func FuzzResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s), []byte{5, 1})
	}
	f.Fuzz(func(t *testing.T, in, sizes []byte) {
		within := func(name string, fn func()) {
			done := make(chan struct{})
			go func() { defer close(done); fn() }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				t.Fatalf("%s hangs on %q %q", name, in, sizes)
			}
		}
		within("parseResponse", func() { parseResponse(in, sizes) })
		within("net/http", func() {
			obr := bufio.NewReader(bytes.NewReader(in))
			resp, oerr := http.ReadResponse(obr, &http.Request{Method: http.MethodPost})
			for oerr == nil && resp.StatusCode < 200 && resp.StatusCode != 101 {
				resp, oerr = http.ReadResponse(obr, &http.Request{Method: http.MethodPost})
			}
			if oerr == nil {
				_, _ = io.ReadAll(resp.Body)
			}
		})
		r, out, err := parseResponse(in, sizes)
		obr := bufio.NewReader(bytes.NewReader(in))
		resp, oerr := http.ReadResponse(obr, &http.Request{Method: http.MethodPost})
		for oerr == nil && resp.StatusCode < 200 && resp.StatusCode != 101 {
			resp, oerr = http.ReadResponse(obr, &http.Request{Method: http.MethodPost}) // as the transport skips 1xx
		}
		if oerr != nil {
			return
		}
		want, werr := io.ReadAll(resp.Body)
		if err == nil && werr == nil {
			require.Equal(t, resp.StatusCode, r.status)
			require.Equal(t, want, out)
		}
		if r.chunked && resp.TransferEncoding != nil {
			require.True(t, bytes.HasPrefix(want, out) || bytes.HasPrefix(out, want), "chunked bodies diverge: %q vs %q", out, want)
		}
	})
}

// FuzzChunked checks the chunked decoder against net/http's: the bytes
// decoded never diverge, and agree in full where both reach the end.
func FuzzChunked(f *testing.F) {
	for _, s := range []string{"3\r\nabc\r\n0\r\n\r\n", "1;a=b\r\nx\r\n0\r\nT: v\r\n\r\n", "A\r\n0123456789\r\n0\r\n\r\n", "2\r\nab\n0\n\n", "fffffffffffffffff\r\n"} {
		f.Add([]byte(s), []byte{3})
	}
	f.Fuzz(func(t *testing.T, in, sizes []byte) {
		br := newConnReader(&pieces{data: in, sizes: sizes}, 4096)
		var b body
		b.reset(br, &response{status: 200, chunked: true, length: -1})
		out, err := io.ReadAll(&b)
		want, werr := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(in)))
		require.True(t, bytes.HasPrefix(want, out) || bytes.HasPrefix(out, want), "%q vs %q", out, want)
		if err == nil && werr == nil {
			require.Equal(t, want, out)
		}
	})
}
