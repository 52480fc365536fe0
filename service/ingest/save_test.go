package ingest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// Two runs storing the same two contents, listed in opposite orders, at
// the same time: each has stored its first file (and holds its digest)
// when it starts on its second. Storing in name order, that was a
// deadlock, one run's results lost to "deadlock detected"; in digest order
// both are kept. Each run's second file is a named pipe, so the moment
// each reaches it is fixed by construction, not by timing.
func TestRunsStoringTheSameFilesInOppositeOrdersBothLand(t *testing.T) {
	t.Parallel()
	st := store.New(storetest.NewPool(t))
	ctx := context.Background()
	program, profile := newProgram(t, st)
	salt := fmt.Sprint(time.Now().UnixNano())
	x, y := []byte("facts of host "+salt), []byte("profile "+salt)
	dir := t.TempDir()
	pipe := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, syscall.Mkfifo(p, 0o600))
		return p
	}
	pipeA, pipeB := pipe("a"), pipe("b")
	file := func(name string, data []byte, path string) sshrun.File {
		f := sshrun.File{Name: name, Size: int64(len(data)), SHA256: sha256Hex(data)}
		if path != "" {
			f.Path = path
		} else {
			f.Data = data
		}
		return f
	}
	runs := []*sshrun.Collection{
		{Files: []sshrun.File{file("1.json", x, ""), file("2.json", y, pipeA)}},
		{Files: []sshrun.File{file("1.json", y, ""), file("2.json", x, pipeB)}},
	}
	done := make(chan error, len(runs))
	for _, c := range runs {
		runID, err := st.CreateRun(ctx, store.NewRun{ProgramID: program, Kind: "imported", ProfileVersionID: profile})
		require.NoError(t, err)
		go func() {
			done <- st.InTx(ctx, func(tx *store.Store) error { return storeFiles(ctx, tx, runID, c) })
		}()
	}
	// Opening a pipe to write waits until its run opens it to read: each
	// run has then stored what comes before it.
	for _, w := range []struct {
		path string
		data []byte
	}{{pipeA, y}, {pipeB, x}} {
		go func() {
			f, err := os.OpenFile(w.path, os.O_WRONLY, 0)
			if err != nil {
				done <- err
				return
			}
			_, _ = f.Write(w.data)
			_ = f.Close()
		}()
	}
	for range runs {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("a run's files were not stored within a minute")
		}
	}
}
