package stats

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"sync"
)

// InMemoryLimit is the most samples a measurement keeps in memory. A
// measurement with more (a run of ten million requests has ten million of
// each latency) keeps them in segments outside memory (Segment): every
// figure is still computed from the exact samples, reading only the log
// bucket that holds the rank or value asked about, and the bootstrap works
// on the bucket counts as it does for any raw sample. At or below the limit
// nothing differs.
const InMemoryLimit = 1 << 20

// SegmentSize is the most samples of one segment.
const SegmentSize = 1 << 20

// Segment is up to SegmentSize consecutive samples of a measurement, kept
// outside memory (a temporary file while a run is imported, the database
// once it is stored) and grouped by log bucket (HistogramRelativeError):
// the values of the segment's dense bucket j are positions
// [Σ Counts[:j], Σ Counts[:j+1]) of its grouped values, in their input
// order. Counts are dense: Counts[0] holds values ≤ 0, Counts[j] for j ≥ 1
// the log bucket Lo + j − 1.
type Segment struct {
	N      int64
	Lo     int
	Counts []int64
	// Sum is the values' sum, Kahan-compensated in input order (as
	// Sample.Mean adds them); M2 is Σ (v − Sum/N)², for the variance.
	Sum, M2 float64
	// Digest is the SHA-256 of the values in input order, each as its
	// IEEE-754 bits big-endian: what an inputs digest covers in place of
	// the values themselves.
	Digest [32]byte
	// Reader reads the grouped values, which it knows as segment Index.
	Reader SegmentReader
	Index  int
}

// SegmentReader reads ranges of segments' grouped values.
type SegmentReader interface {
	// ReadRanges returns, for each range, its Count values from position
	// Offset of segment Segment's grouped values.
	ReadRanges(ranges []SegmentRange) ([][]float64, error)
}

// SegmentRange is a range of one segment's grouped values.
type SegmentRange struct {
	Segment       int // Segment.Index
	Offset, Count int64
}

// GroupSegment groups at most SegmentSize finite values by log bucket. It
// returns the segment (without Reader and Index) and writes the grouped
// values to grouped, which must hold len(values). idx is scratch of at
// least len(values) int32s, reused between calls (nil to allocate).
func GroupSegment(values, grouped []float64, idx []int32) (Segment, error) {
	if len(values) > SegmentSize {
		return Segment{}, fmt.Errorf("stats: %d values is more than a segment (%d)", len(values), SegmentSize)
	}
	if len(grouped) < len(values) {
		return Segment{}, fmt.Errorf("stats: grouped holds %d values, not %d", len(grouped), len(values))
	}
	if len(idx) < len(values) {
		idx = make([]int32, len(values))
	}
	for i, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Segment{}, fmt.Errorf("stats: value %d is %v", i, v)
		}
	}
	lo, size := bucketSpan(values, idx)
	seg := Segment{N: int64(len(values)), Lo: lo, Counts: make([]int64, size)}
	for i, v := range values {
		j := int32(0)
		if v > 0 {
			j = idx[i] - int32(lo) + 1
		}
		idx[i] = j
		seg.Counts[j]++
	}
	pos := make([]int64, size)
	for j := 1; j < size; j++ {
		pos[j] = pos[j-1] + seg.Counts[j-1]
	}
	for i, v := range values {
		j := idx[i]
		grouped[pos[j]] = v
		pos[j]++
	}
	// Moments and digest, in input order.
	var sum, comp float64
	for _, v := range values {
		x := v - comp
		t := sum + x
		comp = (t - sum) - x
		sum = t
	}
	seg.Sum = sum
	if len(values) > 0 {
		m := sum / float64(len(values))
		for _, v := range values {
			d := v - m
			seg.M2 += d * d
		}
	}
	seg.Digest = valuesDigest(values)
	return seg, nil
}

// valuesDigest is the SHA-256 of the values' IEEE-754 bits, big-endian.
func valuesDigest(values []float64) [32]byte {
	h := sha256.New()
	buf := make([]byte, 0, 64<<10)
	for _, v := range values {
		buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(v))
		if len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// segPart is a segment of a sample, with the cumulative counts of its
// dense buckets.
type segPart struct {
	seg Segment
	cum []int64
}

func newSegPart(s Segment) (segPart, error) {
	if len(s.Counts) == 0 {
		return segPart{}, fmt.Errorf("stats: segment %d has no buckets", s.Index)
	}
	if s.Reader == nil {
		return segPart{}, fmt.Errorf("stats: segment %d has no reader", s.Index)
	}
	p := segPart{seg: s, cum: make([]int64, len(s.Counts)+1)}
	for j, c := range s.Counts {
		if c < 0 {
			return segPart{}, fmt.Errorf("stats: segment %d: count %d is negative", s.Index, j)
		}
		p.cum[j+1] = p.cum[j] + c
	}
	if p.cum[len(s.Counts)] != s.N {
		return segPart{}, fmt.Errorf("stats: segment %d counts %d values, says %d", s.Index, p.cum[len(s.Counts)], s.N)
	}
	return p, nil
}

// rangeOf is the range of the segment's grouped values in absolute log
// bucket b (math.MinInt for values ≤ 0).
func (p segPart) rangeOf(b int) (off, count int64) {
	j := 0
	if b != math.MinInt {
		j = b - p.seg.Lo + 1
		if j < 1 || j >= len(p.seg.Counts) {
			return 0, 0
		}
	}
	return p.cum[j], p.seg.Counts[j]
}

// extState is what a sample with segments reads and keeps: each dense
// bucket's values once read, sorted, and the first read error.
type extState struct {
	mu     sync.Mutex
	sorted map[int32][]float64
	held   int64 // values in sorted
	err    error
}

// maxHeldValues bounds what a sample keeps of the buckets it read (8 MiB):
// past it the kept buckets are dropped and read again when needed.
const maxHeldValues = 1 << 20

// NewSegmentedSample builds a raw sample from segments kept outside
// memory. Nothing is read until a query needs a bucket's values.
func NewSegmentedSample(segs []Segment) (Sample, error) {
	parts := make([]segPart, len(segs))
	for i, s := range segs {
		p, err := newSegPart(s)
		if err != nil {
			return Sample{}, err
		}
		parts[i] = p
	}
	return buildRaw(nil, parts), nil
}

// buildRaw puts the in-memory values of raw samples and segments on one
// grid.
func buildRaw(mem []Sample, parts []segPart) Sample {
	lo, hi := math.MaxInt, math.MinInt
	for _, s := range mem {
		if len(s.grid.counts) > 1 {
			lo = min(lo, s.grid.lo)
			hi = max(hi, s.grid.lo+len(s.grid.counts)-2)
		}
	}
	for _, p := range parts {
		if len(p.seg.Counts) > 1 {
			lo = min(lo, p.seg.Lo)
			hi = max(hi, p.seg.Lo+len(p.seg.Counts)-2)
		}
	}
	size := 1
	if lo <= hi {
		size += hi - lo + 1
	} else {
		lo = 0
	}
	g := &grid{lo: lo, counts: make([]int64, size)}
	out := Sample{grid: g}
	for _, s := range mem {
		shift := s.grid.lo - lo
		if len(s.segs) == 0 {
			out.n += s.n
			g.counts[0] += s.grid.counts[0]
			for j := 1; j < len(s.grid.counts); j++ {
				g.counts[j+shift] += s.grid.counts[j]
			}
		} else {
			// The grid counts the segments too: count the in-memory values
			// alone (the segments are among parts).
			for _, idx := range s.idx {
				out.n += int64(len(idx))
				for _, j := range idx {
					if j > 0 {
						j += int32(shift)
					}
					g.counts[j]++
				}
			}
		}
		if shift == 0 {
			out.chunks = append(out.chunks, s.chunks...)
			out.idx = append(out.idx, s.idx...)
			continue
		}
		for c, chunk := range s.chunks {
			re := make([]int32, len(s.idx[c]))
			for i, j := range s.idx[c] {
				if j > 0 {
					j += int32(shift)
				}
				re[i] = j
			}
			out.chunks = append(out.chunks, chunk)
			out.idx = append(out.idx, re)
		}
	}
	for _, p := range parts {
		out.n += p.seg.N
		g.counts[0] += p.seg.Counts[0]
		shift := p.seg.Lo - lo
		for j := 1; j < len(p.seg.Counts); j++ {
			g.counts[j+shift] += p.seg.Counts[j]
		}
	}
	g.buildCum()
	if len(parts) > 0 {
		out.segs = parts
		out.ext = &extState{sorted: map[int32][]float64{}}
	}
	return out
}

// Segmented reports whether some of the sample's values are kept outside
// memory.
func (s Sample) Segmented() bool { return len(s.segs) > 0 }

// Err is the first error reading a segment's values; a query that needed
// them returned NaN (or a count without them).
func (s Sample) Err() error {
	if s.ext == nil {
		return nil
	}
	s.ext.mu.Lock()
	defer s.ext.mu.Unlock()
	return s.ext.err
}

// sortedBucket returns the values of dense bucket j, sorted: read once
// from the segments (with the in-memory ones) and kept.
func (s Sample) sortedBucket(j int32) []float64 {
	s.ext.mu.Lock()
	defer s.ext.mu.Unlock()
	if v, ok := s.ext.sorted[j]; ok {
		return v
	}
	in := s.memBucketValues(j, make([]float64, 0, s.grid.counts[j]))
	b := math.MinInt
	if j > 0 {
		b = s.grid.lo + int(j) - 1
	}
	byReader := map[SegmentReader][]SegmentRange{}
	var readers []SegmentReader
	for _, p := range s.segs {
		off, count := p.rangeOf(b)
		if count == 0 {
			continue
		}
		r := p.seg.Reader
		if _, ok := byReader[r]; !ok {
			readers = append(readers, r)
		}
		byReader[r] = append(byReader[r], SegmentRange{Segment: p.seg.Index, Offset: off, Count: count})
	}
	for _, r := range readers {
		got, err := r.ReadRanges(byReader[r])
		if err == nil && len(got) != len(byReader[r]) {
			err = fmt.Errorf("stats: %d ranges read, %d asked", len(got), len(byReader[r]))
		}
		if err != nil {
			if s.ext.err == nil {
				s.ext.err = err
			}
			return nil
		}
		for _, v := range got {
			in = append(in, v...)
		}
	}
	if int64(len(in)) != s.grid.counts[j] {
		if s.ext.err == nil {
			s.ext.err = fmt.Errorf("stats: bucket %d has %d values, %d were read", j, s.grid.counts[j], len(in))
		}
		return nil
	}
	sortFloats(in)
	if s.ext.held+int64(len(in)) > maxHeldValues {
		clear(s.ext.sorted)
		s.ext.held = 0
	}
	s.ext.sorted[j] = in
	s.ext.held += int64(len(in))
	return in
}

func sortFloats(v []float64) { sort.Float64s(v) }

// segmentedMoments are the pooled sum and M2 of a sample with segments:
// the in-memory values and each segment, combined.
func (s Sample) segmentedMoments() (sum, m2 float64) {
	type part struct{ n, sum, m2 float64 }
	var parts []part
	var memN int64
	var msum, comp float64
	for _, chunk := range s.chunks {
		memN += int64(len(chunk))
		for _, v := range chunk {
			x := v - comp
			t := msum + x
			comp = (t - msum) - x
			msum = t
		}
	}
	if memN > 0 {
		m := msum / float64(memN)
		var mm2 float64
		for _, chunk := range s.chunks {
			for _, v := range chunk {
				d := v - m
				mm2 += d * d
			}
		}
		parts = append(parts, part{float64(memN), msum, mm2})
	}
	for _, p := range s.segs {
		parts = append(parts, part{float64(p.seg.N), p.seg.Sum, p.seg.M2})
	}
	comp = 0
	for _, p := range parts {
		x := p.sum - comp
		t := sum + x
		comp = (t - sum) - x
		sum = t
	}
	mean := sum / float64(s.n)
	for _, p := range parts {
		d := p.sum/p.n - mean
		m2 += p.m2 + p.n*d*d
	}
	return sum, m2
}

// drawSegment returns position u of the segments' grouped values, taken
// in segment order (u below their total).
func (s Sample) drawSegment(u uint64) float64 {
	for _, p := range s.segs {
		if u < uint64(p.seg.N) {
			got, err := p.seg.Reader.ReadRanges([]SegmentRange{{Segment: p.seg.Index, Offset: int64(u), Count: 1}})
			if err != nil || len(got) != 1 || len(got[0]) != 1 {
				s.ext.mu.Lock()
				if s.ext.err == nil {
					s.ext.err = fmt.Errorf("stats: read value %d of segment %d: %v", u, p.seg.Index, err)
				}
				s.ext.mu.Unlock()
				return math.NaN()
			}
			return got[0][0]
		}
		u -= uint64(p.seg.N)
	}
	panic("stats: draw beyond the sample")
}

// Segments returns the sample's segments (nil when every value is in
// memory).
func (s Sample) Segments() []Segment {
	if len(s.segs) == 0 {
		return nil
	}
	out := make([]Segment, len(s.segs))
	for i, p := range s.segs {
		out[i] = p.seg
	}
	return out
}

// Buckets returns the sample's log-bucket counts: lo is the absolute log
// bucket of counts[1], counts[0] the values ≤ 0 (false for a weighted
// sample).
func (s Sample) Buckets() (lo int, counts []int64, ok bool) {
	if !s.raw() {
		return 0, nil, false
	}
	return s.grid.lo, s.grid.counts, true
}

// MemorySegments groups values held in memory into segments read from
// memory: for pooling them with segments kept elsewhere.
func MemorySegments(values []float64) ([]Segment, error) {
	r := &memoryReader{}
	var segs []Segment
	for i := 0; i < len(values); i += SegmentSize {
		part := values[i:min(i+SegmentSize, len(values))]
		grouped := make([]float64, len(part))
		seg, err := GroupSegment(part, grouped, nil)
		if err != nil {
			return nil, err
		}
		seg.Reader, seg.Index = r, len(r.grouped)
		r.grouped = append(r.grouped, grouped)
		segs = append(segs, seg)
	}
	return segs, nil
}

type memoryReader struct{ grouped [][]float64 }

func (m *memoryReader) ReadRanges(rs []SegmentRange) ([][]float64, error) {
	out := make([][]float64, len(rs))
	for i, r := range rs {
		if r.Segment < 0 || r.Segment >= len(m.grouped) || r.Offset < 0 || r.Count < 0 || r.Offset+r.Count > int64(len(m.grouped[r.Segment])) {
			return nil, fmt.Errorf("stats: range %+v is outside the segments", r)
		}
		out[i] = m.grouped[r.Segment][r.Offset : r.Offset+r.Count]
	}
	return out, nil
}
