package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var chunkSeeds = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" Hello"},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"Let me think"}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":"hmm","content":null}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[]}}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
	`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":32,"total_tokens":40,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":16}}}`,
	`{"id":"c","object":"text_completion","choices":[{"index":0,"text":" word","logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":1.0e0}}`,
	`{"error":{"message":"boom","type":"InternalServerError","code":500}}`,
	`{"error":"plain text error"}`,
	`{"error":null,"choices":[{"delta":{"content":"x"}}]}`,
	`{"object":"error","message":"bad \"thing\"","type":"BadRequestError","code":400}`,
	`{"object":"\u0065rror","message":"escaped"}`,
	`{"\u0063hoices":[{"delta":{"content":"k"}}]}`,
	`{"choices":[{"delta":{"content":"a"}}],"choices":[{"delta":{"content":""}}]}`,
	`{"choices":[{"delta":{"Content":"case matters"}}]}`,
	`{"usage":{"completion_tokens":-3,"prompt_tokens":1e20}}`,
	`{"choices":[1,"x",null,{"text":""},{"text":"y"}]}`,
	`[{"choices":[]}]`,
	`"[DONE]"`,
	`{"choices":[{"delta":{"content":"\ud83d\ude00"}}]}`,
	`{"a":[[[[[[]]]]]],"b":{"c":{"d":true,"e":false}},"f":-0.5e+10}`,
	`{"choices":[{"delta":{"content":"x"}}] `,
	`{"choices":"nope","usage":[1,2]}`,
	`{} trailing`,
	`{"x":01}`,
	`{"x":"\q"}`,
	"{\"x\":\"\x01\"}",
	`{"x":1.}`,
	`{"x":tru}`,
	`{"":1e700}`,
	`{"usage":{"prompt_tokens":1e700,"completion_tokens":2}}`,
}

// oracleChunk decodes with encoding/json and applies decodeChunk's rules
// the slow, obvious way.
func oracleChunk(data []byte) (chunk, error) {
	// Numbers as json.Number: a number beyond float64 (1e700) is valid
	// JSON, which only a float64 refuses.
	var v any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return chunk{}, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return chunk{}, fmt.Errorf("trailing data after the value (%v)", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return chunk{}, errNotObject
	}
	var c chunk
	nonEmpty := func(x any) bool { s, ok := x.(string); return ok && s != "" }
	if choices, ok := m["choices"].([]any); ok {
		for _, ch := range choices {
			cm, ok := ch.(map[string]any)
			if !ok {
				continue
			}
			if nonEmpty(cm["text"]) {
				c.tokens, c.content = true, true
			}
			d, ok := cm["delta"].(map[string]any)
			if !ok {
				continue
			}
			calls, _ := d["tool_calls"].([]any)
			if nonEmpty(d["content"]) {
				c.tokens, c.content = true, true
			}
			if nonEmpty(d["reasoning_content"]) || nonEmpty(d["reasoning"]) || len(calls) > 0 {
				c.tokens = true
			}
		}
	}
	count := func(x any) int64 {
		n, ok := x.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || f < 0 || f > 1e15 {
			return 0
		}
		return int64(f)
	}
	if u, ok := m["usage"].(map[string]any); ok {
		c.usage = true
		c.promptTokens, c.completionTokens = count(u["prompt_tokens"]), count(u["completion_tokens"])
	}
	if e, ok := m["error"]; ok && e != nil {
		c.failed = true
		switch ev := e.(type) {
		case string:
			c.errMsg = ev
		case map[string]any:
			if msg, ok := ev["message"].(string); ok {
				c.errMsg = msg
			}
		}
	} else if m["object"] == "error" {
		c.failed = true
		c.errMsg = "error object in stream"
		if msg, ok := m["message"].(string); ok {
			c.errMsg = msg
		}
	}
	return c, nil
}

func checkChunk(t *testing.T, data []byte) {
	var got chunk
	err := decodeChunk(data, &got)
	want, werr := oracleChunk(data)
	if werr != nil {
		require.Error(t, err, "encoding/json rejects %q: %v", data, werr)
		if errors.Is(werr, errNotObject) {
			require.ErrorIs(t, err, errNotObject)
		}
		return
	}
	require.NoError(t, err, "%q", data)
	if want.failed && want.errMsg == "" {
		want.errMsg = got.errMsg // raw JSON of an odd error value: only its presence matters
	}
	require.Equal(t, want, got, "%q", data)
}

func TestDecodeChunk(t *testing.T) {
	t.Parallel()
	for _, s := range chunkSeeds {
		checkChunk(t, []byte(s))
	}
	var c chunk
	require.NoError(t, decodeChunk([]byte(chunkSeeds[1]), &c))
	require.True(t, c.tokens && c.content)
	require.NoError(t, decodeChunk([]byte(chunkSeeds[0]), &c))
	require.False(t, c.tokens, "role-only chunk")
	require.NoError(t, decodeChunk([]byte(chunkSeeds[2]), &c))
	require.True(t, c.tokens)
	require.False(t, c.content, "reasoning is not visible content")
	require.NoError(t, decodeChunk([]byte(chunkSeeds[7]), &c))
	require.Equal(t, chunk{usage: true, promptTokens: 32, completionTokens: 8}, c)
	require.NoError(t, decodeChunk([]byte(chunkSeeds[9]), &c))
	require.Equal(t, chunk{failed: true, errMsg: "boom"}, c)
}

// A stream's memo decodes every chunk as decodeChunk does, whatever came
// before it.
func FuzzChunkMemo(f *testing.F) {
	for i, a := range chunkSeeds {
		f.Add([]byte(a), []byte(chunkSeeds[(i+1)%len(chunkSeeds)]))
		f.Add([]byte(a), []byte(a))
	}
	tok := `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}`
	for _, pair := range [][2]string{{"a", "bb"}, {"a", ""}, {"a", `\"`}, {"a", `x\`}, {"a", `\u00e9`}, {"a", `\u00`}, {"a", `","x":"`}, {"a", "\x01"}} {
		f.Add([]byte(fmt.Sprintf(tok, pair[0])), []byte(fmt.Sprintf(tok, pair[1])))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var m chunkMemo
		for _, data := range [][]byte{a, b, a} {
			var got, want chunk
			err := m.decode(data, &got)
			werr := decodeChunk(data, &want)
			require.Equal(t, werr == nil, err == nil, "%q after %q: %v vs %v", data, a, err, werr)
			require.Equal(t, want, got, "%q after %q", data, a)
		}
	})
}

func FuzzDecodeChunk(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkChunk(t, data)
	})
}

// refEvents is a plain restatement of sseReader's rules over the whole
// input at once: lines end at LF (a CR before it is dropped); a blank line
// dispatches the data lines gathered; at the end, complete lines still
// dispatch and a cut-off last line is dropped.
func refEvents(in []byte) []string {
	var out []string
	var data []string
	has := false
	lines := bytes.SplitAfter(in, []byte("\n"))
	for _, l := range lines {
		if len(l) == 0 || l[len(l)-1] != '\n' {
			break // cut off by the end
		}
		l = bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r"))
		if len(l) == 0 {
			if has && len(strings.Join(data, "\n")) > 0 {
				out = append(out, strings.Join(data, "\n"))
			}
			data, has = nil, false
			continue
		}
		if l[0] == ':' {
			continue
		}
		name, value, found := bytes.Cut(l, []byte(":"))
		if !found {
			value = nil
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(name) == "data" {
			data = append(data, string(value))
			has = true
		}
	}
	if has && len(strings.Join(data, "\n")) > 0 {
		out = append(out, strings.Join(data, "\n"))
	}
	return out
}

// pieces delivers its input in reads of the given sizes, in turn.
type pieces struct {
	data  []byte
	sizes []byte
	i     int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	n := len(p.data)
	if len(p.sizes) > 0 {
		n = int(p.sizes[p.i%len(p.sizes)]%32) + 1
		p.i++
	}
	n = min(n, len(b), len(p.data))
	copy(b, p.data[:n])
	p.data = p.data[n:]
	return n, nil
}

// sseOver is an sseReader over r as a body read to its end, through a
// buffer of bufSize bytes (the connection's).
func sseOver(r io.Reader, bufSize int) *sseReader {
	tr := &timedReader{r: r, clock: clock{t0: time.Now()}}
	var b body
	b.reset(newConnReader(tr, bufSize), &response{status: 200, length: -1})
	s := newSSEReader()
	s.reset(&b, tr)
	return s
}

func readEvents(t *testing.T, in, sizes []byte, bufSize int) []string {
	s := sseOver(&pieces{data: in, sizes: sizes}, bufSize)
	var out []string
	var ev event
	for {
		err := s.next(&ev)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		require.NotEmpty(t, ev.data)
		require.Positive(t, ev.at)
		out = append(out, string(ev.data))
	}
}

var sseSeeds = []string{
	"data: {\"a\":1}\n\ndata: [DONE]\n\n",
	"data: x\r\n\r\ndata: y\r\n\r\n",
	": ping\n\nevent: error\ndata: {\"error\":\"e\"}\n\n",
	"data: one\ndata: two\n\ndata:three\n\n",
	"data: [DONE]\n",
	"data: cut off",
	"data\n\ndata:\n\nid: 5\nretry: 10\ndata:  two spaces\n\n",
	"data: " + strings.Repeat("long", 100) + "\n\n",
}

func TestSSEReader(t *testing.T) {
	t.Parallel()
	for _, s := range sseSeeds {
		require.Equal(t, refEvents([]byte(s)), readEvents(t, []byte(s), nil, 64), "%q", s)
	}
	require.Equal(t, []string{`{"a":1}`, "[DONE]"}, readEvents(t, []byte(sseSeeds[0]), []byte{3}, 16))
	require.Equal(t, []string{"one\ntwo", "three"}, readEvents(t, []byte(sseSeeds[3]), nil, 16))
	require.Equal(t, []string{"[DONE]"}, readEvents(t, []byte(sseSeeds[4]), nil, 16), "complete line at EOF")
	require.Empty(t, readEvents(t, []byte(sseSeeds[5]), nil, 16), "a line cut off by EOF is dropped")
}

func TestSSETimestampsArrival(t *testing.T) {
	t.Parallel()
	// Two events in one read share its time; an event completed by a later
	// read gets that read's time.
	r, w := io.Pipe()
	s := sseOver(r, 4096)
	go func() {
		_, _ = w.Write([]byte("data: a\n\ndata: b\n\ndata: c"))
		time.Sleep(20 * time.Millisecond)
		_, _ = w.Write([]byte("\n\n"))
		_ = w.Close()
	}()
	var a, b, c event
	require.NoError(t, s.next(&a))
	at := a.at
	require.NoError(t, s.next(&b))
	require.Equal(t, at, b.at)
	require.NoError(t, s.next(&c))
	require.Equal(t, "c", string(c.data))
	require.GreaterOrEqual(t, c.at-at, int64(15*time.Millisecond))
}

func FuzzSSEReader(f *testing.F) {
	for _, s := range sseSeeds {
		f.Add([]byte(s), []byte{1, 7, 30})
	}
	f.Fuzz(func(t *testing.T, in, sizes []byte) {
		want := refEvents(in)
		require.Equal(t, want, readEvents(t, in, nil, 4096))
		require.Equal(t, want, readEvents(t, in, sizes, 16), "split into reads %v, small buffer", sizes)
		for _, ev := range want {
			var c chunk
			_ = decodeChunk([]byte(ev), &c) // must not panic on anything a stream carries
		}
	})
}
