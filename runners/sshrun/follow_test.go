package sshrun

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLineWriterKeepsOffsetOfCompleteLines(t *testing.T) {
	t.Parallel()
	var lines []string
	w := &lineWriter{offset: 100, onLine: func(b []byte) error {
		lines = append(lines, string(b))
		return nil
	}, cancel: func() {}}

	// Lines split anywhere across writes, as they come off the wire.
	for _, chunk := range []string{`{"a":1}`, "\n{\"b\"", ":2}\n\n{\"c\":3}\n{\"d\":"} {
		n, err := w.Write([]byte(chunk))
		require.NoError(t, err)
		require.Equal(t, len(chunk), n)
	}
	require.Equal(t, []string{`{"a":1}`, `{"b":2}`, ``, `{"c":3}`}, lines)
	// The cut line is not counted: next time tail starts where it began.
	require.Equal(t, int64(100+len("{\"a\":1}\n{\"b\":2}\n\n{\"c\":3}\n")), w.offset)
	require.Equal(t, int64(4), w.lines)
	require.Equal(t, `{"d":`, string(w.partial))
}

func TestLineWriterStopsOnCallbackError(t *testing.T) {
	t.Parallel()
	cancelled := false
	boom := errors.New("boom")
	w := &lineWriter{onLine: func(b []byte) error {
		if string(b) == "2" {
			return boom
		}
		return nil
	}, cancel: func() { cancelled = true }}
	_, err := w.Write([]byte("1\n2\n3\n"))
	require.NoError(t, err, "the writer drains; Follow reports the error")
	require.ErrorIs(t, w.err, boom)
	require.True(t, cancelled)
	require.Equal(t, int64(2), w.offset, "offset stays after the last line handled")
}

func TestLineWriterRefusesHugeLines(t *testing.T) {
	t.Parallel()
	w := &lineWriter{onLine: func([]byte) error { return nil }, cancel: func() {}}
	chunk := []byte(strings.Repeat("x", 1<<20))
	for range 5 {
		_, _ = w.Write(chunk)
	}
	require.ErrorContains(t, w.err, "longer than")
}
