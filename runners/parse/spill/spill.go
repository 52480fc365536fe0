// Package spill keeps an import's samples past stats.InMemoryLimit out of
// memory: each metric's values are taken in segments of
// stats.SegmentSize, grouped by log bucket (stats.GroupSegment) and
// written to one unlinked temporary file, from which the measurement's
// figures read one bucket at a time (stats.NewSegmentedSample) until the
// store copies the segments into the database. Ten million requests' seven
// latencies are 560 MB as float64s; held this way an import needs one
// segment of each (8 MiB) and two more in flight.
package spill

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"sync"

	"github.com/accordlab/accord/acceptance/stats"
)

// File holds the segments of one import's metrics. It is unlinked as soon
// as it is made: the space is the system's again when it is closed (or
// collected). Segments are grouped and written by a goroutine of its own
// while the import reads on.
type File struct {
	dir string

	mu      sync.Mutex
	f       *os.File
	size    int64
	offsets []int64 // byte offset of each segment
	lengths []int64 // values of each segment
	err     error

	// The writer goroutine, its queue and the buffers in flight.
	start   sync.Once
	queue   chan job
	free    chan []float64
	grouped []float64
	idx     []int32
	raw     []byte
}

// inFlight is how many full segments may wait for the writer: the
// importer's next values go to a spare buffer meanwhile.
const inFlight = 2

type job struct {
	values []float64
	done   chan result
}

type result struct {
	seg stats.Segment
	err error
}

// NewFile returns a File that makes its temporary file in dir (the
// system's temporary directory when empty) when the first segment is
// written.
func NewFile(dir string) *File { return &File{dir: dir} }

// Done says that no more segments come: the writer goroutine ends once
// it has written those queued. Reads go on.
func (f *File) Done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queue != nil {
		close(f.queue)
		f.queue = nil
	}
}

// Close removes the file's space and stops its writer; segments read
// afterwards fail.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queue != nil {
		close(f.queue)
		f.queue = nil
	}
	if f.f == nil {
		f.err = fmt.Errorf("spill: the file was closed")
		return nil
	}
	err := f.f.Close()
	f.f = nil
	f.err = fmt.Errorf("spill: the file was closed")
	return err
}

// enqueue hands a full buffer to the writer and returns a spare one (the
// writer gives buffers back once their values are written).
func (f *File) enqueue(values []float64) (chan result, []float64) {
	f.start.Do(func() {
		f.queue = make(chan job, inFlight)
		f.free = make(chan []float64, inFlight+1)
		for range inFlight {
			f.free <- make([]float64, 0, stats.SegmentSize)
		}
		go f.writer(f.queue)
	})
	done := make(chan result, 1)
	f.mu.Lock()
	q := f.queue
	f.mu.Unlock()
	if q == nil {
		done <- result{err: fmt.Errorf("spill: the file was closed")}
		return done, values[:0]
	}
	q <- job{values: values, done: done}
	return done, (<-f.free)[:0]
}

func (f *File) writer(queue chan job) {
	for j := range queue {
		seg, err := f.write(j.values)
		j.done <- result{seg, err}
		f.free <- j.values
	}
}

// write groups values as one segment and appends it to the file.
func (f *File) write(values []float64) (stats.Segment, error) {
	if f.grouped == nil {
		f.grouped = make([]float64, stats.SegmentSize)
		f.idx = make([]int32, stats.SegmentSize)
		f.raw = make([]byte, 256<<10)
	}
	// Grouped outside the lock: readers of earlier segments go on.
	seg, err := stats.GroupSegment(values, f.grouped, f.idx)
	if err != nil {
		return stats.Segment{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return stats.Segment{}, f.err
	}
	if f.f == nil {
		tf, err := os.CreateTemp(f.dir, "accord-samples-*")
		if err != nil {
			f.err = fmt.Errorf("spill: %w", err)
			return stats.Segment{}, f.err
		}
		// Unlinked at once: nothing is left behind if the process dies.
		if err := os.Remove(tf.Name()); err != nil {
			tf.Close()
			f.err = fmt.Errorf("spill: %w", err)
			return stats.Segment{}, f.err
		}
		f.f = tf
	}
	// Encoded and written a piece at a time.
	off := f.size
	for start := 0; start < len(values); start += len(f.raw) / 8 {
		part := f.grouped[start:min(start+len(f.raw)/8, len(values))]
		raw := f.raw[:8*len(part)]
		for i, v := range part {
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(v))
		}
		if _, err := f.f.WriteAt(raw, off+8*int64(start)); err != nil {
			f.err = fmt.Errorf("spill: %w", err)
			return stats.Segment{}, f.err
		}
	}
	seg.Reader, seg.Index = f, len(f.offsets)
	f.offsets = append(f.offsets, off)
	f.lengths = append(f.lengths, int64(len(values)))
	f.size += 8 * int64(len(values))
	return seg, nil
}

// ReadRanges reads ranges of the segments' grouped values (stats.SegmentReader).
func (f *File) ReadRanges(rs []stats.SegmentRange) ([][]float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	out := make([][]float64, len(rs))
	var raw []byte
	for i, r := range rs {
		if r.Segment < 0 || r.Segment >= len(f.offsets) || r.Offset < 0 || r.Count < 0 || r.Offset+r.Count > f.lengths[r.Segment] {
			return nil, fmt.Errorf("spill: range %+v is outside the segments", r)
		}
		if n := int(8 * r.Count); cap(raw) < n {
			raw = make([]byte, n)
		}
		raw = raw[:8*r.Count]
		if err := readFull(f.f, raw, f.offsets[r.Segment]+8*r.Offset); err != nil {
			return nil, err
		}
		v := make([]float64, r.Count)
		for k := range v {
			v[k] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*k:]))
		}
		out[i] = v
	}
	return out, nil
}

// SegmentBytes returns a segment's grouped values as written (float64
// little-endian), for the store to copy.
func (f *File) SegmentBytes(index int) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if index < 0 || index >= len(f.offsets) {
		return nil, fmt.Errorf("spill: no segment %d", index)
	}
	b := make([]byte, 8*f.lengths[index])
	if err := readFull(f.f, b, f.offsets[index]); err != nil {
		return nil, err
	}
	return b, nil
}

func readFull(f *os.File, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("spill: %w", err)
}

// Samples collects one metric's samples: in memory up to
// stats.InMemoryLimit, and past it every one of them in segments in the
// File.
type Samples struct {
	file    *File
	values  []float64
	secs    []int32 // beside values while they are all in memory
	pending []chan result
	n       int64
}

// NewSamples starts a metric's samples, with room for hint of them in
// memory (at most a segment's).
func (f *File) NewSamples(hint int) *Samples {
	n := min(max(hint, 0), stats.SegmentSize)
	return &Samples{file: f, values: make([]float64, 0, n), secs: make([]int32, 0, n)}
}

// Add appends a value and the second its request was sent in (kept only
// while the values are all in memory: segments do not keep them); an
// error writing it comes out of Finish.
func (s *Samples) Add(v float64, sec int32) {
	if len(s.values) == stats.SegmentSize {
		s.spill()
	}
	s.values = append(s.values, v)
	if s.secs != nil {
		s.secs = append(s.secs, sec)
	}
	s.n++
}

func (s *Samples) spill() {
	s.secs = nil
	done, spare := s.file.enqueue(s.values)
	s.pending = append(s.pending, done)
	s.values = spare
}

// Len is the number of samples added.
func (s *Samples) Len() int64 { return s.n }

// Finish returns the values with their seconds (when they all fit in
// memory), or the segments holding them.
func (s *Samples) Finish() ([]float64, []int32, []stats.Segment, error) {
	if len(s.pending) == 0 {
		return s.values, s.secs, nil, nil
	}
	if len(s.values) > 0 {
		s.spill()
	}
	s.values = nil
	segs := make([]stats.Segment, 0, len(s.pending))
	var err error
	for _, p := range s.pending {
		r := <-p
		if err == nil {
			err = r.err
		}
		segs = append(segs, r.seg)
	}
	s.pending = nil
	if err != nil {
		return nil, nil, nil, err
	}
	return nil, nil, segs, nil
}
