package probe

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/wire"
)

// A long step's records go to segments of bounded size, each ending at a
// line's end, which read in order are exactly what was written; opened
// again, the writer goes on in the last segment.
func TestRecordSegmentsAreBoundedAndComplete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const limit = 4096
	w, err := openSegments(dir, wire.RequestsFile, limit)
	require.NoError(t, err)
	var all bytes.Buffer
	r := rand.New(rand.NewPCG(1, 2))
	maxLine := 0
	for i := range 5000 {
		line := fmt.Sprintf(`{"id":%d,"t_sent":%d,"pad":"%s"}`+"\n", i, r.Int64N(1e12), bytes.Repeat([]byte("x"), r.IntN(200)))
		maxLine = max(maxLine, len(line))
		all.WriteString(line)
	}
	// Written in chunks that cut lines anywhere, as a buffered writer's
	// flushes do.
	data := all.Bytes()
	for len(data) > 0 {
		n := min(len(data), 1+r.IntN(3000))
		_, err := w.Write(data[:n])
		require.NoError(t, err)
		data = data[n:]
	}
	require.NoError(t, w.Close())

	exists := func(name string) bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	segs := wire.Segments(wire.RequestsFile, exists)
	require.Greater(t, len(segs), 100)
	require.Equal(t, "requests.0001.jsonl", segs[1])
	var back bytes.Buffer
	for _, s := range segs {
		b, err := os.ReadFile(filepath.Join(dir, s))
		require.NoError(t, err)
		require.LessOrEqual(t, len(b), limit+maxLine, s)
		require.Equal(t, byte('\n'), b[len(b)-1], "%s ends at a line's end", s)
		back.Write(b)
	}
	require.Equal(t, all.String(), back.String())

	w, err = openSegments(dir, wire.RequestsFile, limit)
	require.NoError(t, err)
	_, err = w.Write([]byte("{\"id\":-1}\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Len(t, wire.Segments(wire.RequestsFile, exists), len(segs), "appended to the last segment")
	last, err := os.ReadFile(filepath.Join(dir, segs[len(segs)-1]))
	require.NoError(t, err)
	require.True(t, bytes.HasSuffix(last, []byte("{\"id\":-1}\n")))
}
