package acceptance

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	"slices"
	"sort"
	"strconv"
)

// MeasurementsDigest returns "sha256:<hex>" of a canonical binary encoding
// of the measurements, independent of their order in the slice:
//
//	"accord measurements v1\n", uvarint count, then per measurement sorted
//	by (metric, step, level, repetition): metric, step, level (each uvarint
//	length + UTF-8 bytes), varint repetition, uvarint len(values), each
//	value as IEEE-754 float64 bits big-endian, one byte 1 and each count as
//	int64 big-endian when counts are set (0 otherwise), uvarint number of
//	tool summary entries and each (key, float64 bits) in key order, then
//	source tool, tool version, field and percentile method. A measurement
//	whose samples are kept in segments (more than stats.InMemoryLimit)
//	has no values and, in place of the counts' byte, a byte 2, the
//	uvarint number of segments and each segment's uvarint count and the
//	SHA-256 of its values in input order (stats.Segment.Digest), so that
//	the samples are covered without reading them back.
//
// Binary rather than JSON so that a million samples hash in milliseconds;
// the float bits are exact, so any change of any sample changes the digest.
func MeasurementsDigest(ms []Measurement) string {
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareMeasurementKeys(ms[a], ms[b]) })
	w := newDigestWriter("accord measurements v1\n", 64<<10)
	w.uvarint(uint64(len(ms)))
	for _, i := range order {
		m := ms[i]
		w.str(m.Metric)
		w.str(m.Step)
		w.str(m.Level)
		w.varint(int64(m.Repetition))
		w.uvarint(uint64(len(m.Values)))
		for _, v := range m.Values {
			w.u64(math.Float64bits(v))
		}
		if len(m.Segments) > 0 {
			w.byte(2)
			w.uvarint(uint64(len(m.Segments)))
			for _, s := range m.Segments {
				w.uvarint(uint64(s.N))
				w.bytes(s.Digest[:])
			}
		} else if m.Counts != nil {
			w.byte(1)
			w.uvarint(uint64(len(m.Counts)))
			for _, c := range m.Counts {
				w.u64(uint64(c))
			}
		} else {
			w.byte(0)
		}
		keys := make([]string, 0, len(m.ToolSummary))
		for k := range m.ToolSummary {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		w.uvarint(uint64(len(keys)))
		for _, k := range keys {
			w.str(k)
			w.u64(math.Float64bits(m.ToolSummary[k]))
		}
		w.str(m.Source.Tool)
		w.str(m.Source.ToolVersion)
		w.str(m.Source.Field)
		w.str(m.Source.PercentileMethod)
		if m.Source.PercentileDefinition != "" {
			// Like Trials below: only when set, behind a byte no metric
			// name's length can be.
			w.byte(0xfe)
			w.str(string(m.Source.PercentileDefinition))
		}
		if m.Host != "" {
			// Only for one host's values of a multi-host run (gates judge
			// the hosts combined, which carry none).
			w.byte(0xfd)
			w.str(m.Host)
		}
		if m.SentIndex != nil {
			// Only where the send times are known (the probe's request
			// metrics), so that other digests are unchanged.
			w.byte(0xfc)
			w.uvarint(uint64(len(m.SentIndex)))
			for _, i := range m.SentIndex {
				w.u64(uint64(i))
			}
		}
		if m.Trials > 0 {
			// Only when known, so that digests of measurements made before
			// Trials existed are unchanged. 0xff cannot start the next
			// measurement, whose metric name's length (a catalog id, far
			// shorter than 127) comes first.
			w.byte(0xff)
			w.varint(m.Trials)
		}
	}
	return w.sum()
}

// FactsDigest returns "sha256:<hex>" of host facts: "accord facts v1\n",
// then each key and value (uvarint length + bytes) in key order.
func FactsDigest(facts map[string]string) string {
	keys := make([]string, 0, len(facts))
	for k := range facts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w := newDigestWriter("accord facts v1\n", 1<<10)
	w.uvarint(uint64(len(keys)))
	for _, k := range keys {
		w.str(k)
		w.str(facts[k])
	}
	return w.sum()
}

func compareMeasurementKeys(a, b Measurement) int {
	return cmp.Or(cmp.Compare(a.Metric, b.Metric), cmp.Compare(a.Step, b.Step),
		cmp.Compare(a.Level, b.Level), cmp.Compare(a.Repetition, b.Repetition), cmp.Compare(a.Host, b.Host))
}

// digestWriter frames values into a SHA-256 through a buffer.
type digestWriter struct {
	h   hash.Hash
	buf []byte
}

func newDigestWriter(header string, bufSize int) *digestWriter {
	w := &digestWriter{h: sha256.New(), buf: make([]byte, 0, bufSize)}
	w.buf = append(w.buf, header...)
	return w
}

func (w *digestWriter) flushIfFull() {
	if len(w.buf) > 60<<10 {
		w.h.Write(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *digestWriter) byte(b byte) { w.buf = append(w.buf, b); w.flushIfFull() }

func (w *digestWriter) u64(v uint64) {
	w.buf = binary.BigEndian.AppendUint64(w.buf, v)
	w.flushIfFull()
}

func (w *digestWriter) bytes(b []byte) { w.buf = append(w.buf, b...); w.flushIfFull() }

func (w *digestWriter) uvarint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v); w.flushIfFull() }

func (w *digestWriter) varint(v int64) { w.buf = binary.AppendVarint(w.buf, v); w.flushIfFull() }

func (w *digestWriter) str(s string) {
	w.uvarint(uint64(len(s)))
	if len(s) > 32<<10 {
		w.h.Write(w.buf)
		w.buf = w.buf[:0]
		w.h.Write([]byte(s))
		return
	}
	w.buf = append(w.buf, s...)
	w.flushIfFull()
}

func (w *digestWriter) sum() string {
	w.h.Write(w.buf)
	w.buf = w.buf[:0]
	return DigestPrefix + hex.EncodeToString(w.h.Sum(nil))
}

func (w *digestWriter) raw() [32]byte {
	w.h.Write(w.buf)
	w.buf = w.buf[:0]
	var out [32]byte
	copy(out[:], w.h.Sum(nil))
	return out
}

// seriesData is one side's measurements of one metric in one series, by
// repetition.
type seriesIndex map[string]map[SeriesKey][]Measurement

func indexMeasurements(ms []Measurement, side string) (seriesIndex, error) {
	idx := seriesIndex{}
	for _, m := range ms {
		bySeries := idx[m.Metric]
		if bySeries == nil {
			bySeries = map[SeriesKey][]Measurement{}
			idx[m.Metric] = bySeries
		}
		bySeries[m.Key()] = append(bySeries[m.Key()], m)
	}
	for metric, bySeries := range idx {
		for key, reps := range bySeries {
			slices.SortStableFunc(reps, func(a, b Measurement) int { return cmp.Compare(a.Repetition, b.Repetition) })
			for i := 1; i < len(reps); i++ {
				if reps[i].Repetition == reps[i-1].Repetition {
					return nil, fmt.Errorf("%s measurements: %s in %s has repetition %d twice", side, metric, seriesLabel(key), reps[i].Repetition)
				}
			}
		}
	}
	return idx, nil
}

// seriesKeys returns the series of a metric in natural order (numbers in
// levels compare as numbers, so c=2 comes before c=16).
func (idx seriesIndex) seriesKeys(metric string) []SeriesKey {
	keys := make([]SeriesKey, 0, len(idx[metric]))
	for k := range idx[metric] {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b SeriesKey) int {
		return cmp.Or(naturalCompare(a.Step, b.Step), naturalCompare(a.Level, b.Level))
	})
	return keys
}

// naturalCompare compares strings with runs of digits compared as numbers.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, errA := strconv.ParseUint(a[:da], 10, 64)
			nb, errB := strconv.ParseUint(b[:db], 10, 64)
			if errA == nil && errB == nil && na != nb {
				return cmp.Compare(na, nb)
			}
			if c := cmp.Compare(a[:da], b[:db]); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
