package probe

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/accordlab/accord/runners/probe/wire"
)

// segmentWriter writes a records file (JSON lines) as a run of segments
// (wire.SegmentName) of about limit bytes each: once a segment reaches
// the limit, the next line goes to a new one. A soak's records are thus
// files of bounded size, every one of them kept and collected; none is
// ever cut short or dropped.
type segmentWriter struct {
	dir, file string
	limit     int64
	n         int // the current segment
	f         *os.File
	size      int64
	lineEnd   bool // the last byte written ended a line
}

// openSegments opens the records file in dir for appending: at its last
// segment, where a step that samples into the same folder again goes on.
func openSegments(dir, file string, limit int64) (*segmentWriter, error) {
	if limit <= 0 {
		limit = wire.DefaultRecordSegmentBytes
	}
	w := &segmentWriter{dir: dir, file: file, limit: limit, lineEnd: true}
	for {
		if _, err := os.Stat(filepath.Join(dir, wire.SegmentName(file, w.n+1))); err != nil {
			break
		}
		w.n++
	}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *segmentWriter) open() error {
	f, err := os.OpenFile(filepath.Join(w.dir, wire.SegmentName(w.file, w.n)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return err
	}
	w.f, w.size = f, st.Size()
	return nil
}

// Write writes p, starting a new segment at the first line end after the
// current one reached the limit.
func (w *segmentWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if w.size >= w.limit && w.lineEnd {
			if err := w.f.Close(); err != nil {
				return written, err
			}
			w.n++
			if err := w.open(); err != nil {
				return written, fmt.Errorf("records segment %d: %w", w.n, err)
			}
		}
		chunk := p
		if w.size < w.limit {
			chunk = p[:min(int64(len(p)), w.limit-w.size)]
		} else if i := bytes.IndexByte(p, '\n'); i >= 0 {
			chunk = p[:i+1]
		}
		n, err := w.f.Write(chunk)
		written += n
		w.size += int64(n)
		if n > 0 {
			w.lineEnd = chunk[n-1] == '\n'
		}
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// Close closes the current segment.
func (w *segmentWriter) Close() error { return w.f.Close() }
