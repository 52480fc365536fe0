package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/store"
)

// Files are a run folder's files by path (relative to the folder), read
// as streams: for the importers (ReadFolder) and for the aggregates that
// need raw records (the send time of every request, the telemetry
// samples).
type Files interface {
	Names() []string
	// Size is the file's size in bytes; false when the folder has no such
	// file.
	Size(name string) (int64, bool)
	Open(name string) (io.ReadCloser, error)
}

type collectionFiles struct{ c *sshrun.Collection }

// CollectionFiles reads a collected run folder: files stay where the
// collection keeps them (in memory or in a temporary file) and are
// streamed.
func CollectionFiles(c *sshrun.Collection) Files { return collectionFiles{c} }

func (f collectionFiles) Names() []string {
	names := make([]string, len(f.c.Files))
	for i, x := range f.c.Files {
		names[i] = x.Name
	}
	return names
}

func (f collectionFiles) Size(name string) (int64, bool) {
	x, ok := f.c.File(name)
	return x.Size, ok
}

func (f collectionFiles) Open(name string) (io.ReadCloser, error) {
	x, ok := f.c.File(name)
	if !ok {
		return nil, fmt.Errorf("%s is not in the run folder", name)
	}
	return x.Open()
}

// storedFiles are a stored run's artifacts.
type storedFiles struct {
	ctx    context.Context
	st     *store.Store
	byPath map[string]store.RunArtifact
	names  []string
}

// StoredFiles reads the run folder a run's artifacts keep, each file
// streamed from the artifact store (store.Artifacts) as it is read; ctx
// bounds the reads.
func StoredFiles(ctx context.Context, st *store.Store, runID int64) (Files, error) {
	as, err := st.RunArtifacts(ctx, runID)
	if err != nil {
		return nil, err
	}
	f := &storedFiles{ctx: ctx, st: st, byPath: make(map[string]store.RunArtifact, len(as))}
	for _, a := range as {
		f.byPath[a.Path] = a
		f.names = append(f.names, a.Path)
	}
	return f, nil
}

func (f *storedFiles) Names() []string { return f.names }

func (f *storedFiles) Size(name string) (int64, bool) {
	a, ok := f.byPath[name]
	return a.Size, ok
}

func (f *storedFiles) Open(name string) (io.ReadCloser, error) {
	a, ok := f.byPath[name]
	if !ok {
		return nil, fmt.Errorf("%s is not among the run's artifacts", name)
	}
	r, err := f.st.Artifacts().Open(f.ctx, a.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

// openRecords opens a records file of the folder (requests.jsonl,
// telemetry.jsonl) as one stream over all of its segments in order
// (wire.Segments: the probe continues a long step's records in numbered
// segments), with their total size and how many segments there are.
func openRecords(files Files, name string) (io.ReadCloser, int64, int, error) {
	names := wire.Segments(name, func(n string) bool { _, ok := files.Size(n); return ok })
	if len(names) == 0 {
		return nil, 0, 0, fmt.Errorf("%s is missing from the run folder", name)
	}
	var size int64
	for _, n := range names {
		s, _ := files.Size(n)
		size += s
	}
	return &segmentsReader{files: files, names: names}, size, len(names), nil
}

// segmentsReader reads segments one after another, each opened when the
// one before it is done.
type segmentsReader struct {
	files Files
	names []string
	cur   io.ReadCloser
}

func (r *segmentsReader) Read(p []byte) (int, error) {
	for {
		if r.cur == nil {
			if len(r.names) == 0 {
				return 0, io.EOF
			}
			f, err := r.files.Open(r.names[0])
			if err != nil {
				return 0, err
			}
			r.cur, r.names = f, r.names[1:]
		}
		n, err := r.cur.Read(p)
		if errors.Is(err, io.EOF) {
			cerr := r.cur.Close()
			r.cur = nil
			if cerr != nil {
				return n, cerr
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (r *segmentsReader) Close() error {
	if r.cur == nil {
		return nil
	}
	err := r.cur.Close()
	r.cur = nil
	return err
}

// Release frees what measurements keep outside memory while their run is
// imported: the temporary file of a metric's samples past
// stats.InMemoryLimit (runners/parse/spill), unlinked when it was made
// and otherwise freed only when collected. Their segments cannot be read
// afterwards; stored ones are read from the database.
func Release(ms []acceptance.Measurement) {
	seen := map[io.Closer]bool{}
	for _, m := range ms {
		for _, s := range m.Segments {
			if c, ok := s.Reader.(io.Closer); ok && !seen[c] {
				seen[c] = true
				c.Close()
			}
		}
	}
}
