package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
)

// A measurement of more than stats.InMemoryLimit samples keeps them in
// measurement_segments (migration 0070), one row per stats.Segment, the
// values grouped by log bucket in data: the figures read one bucket's
// range of it (a substring, which PostgreSQL fetches without reading the
// rest: the column is stored uncompressed out of line).

// saveSegmented stores one measurement with segments: its row, then each
// segment's, in one transaction.
func (s *Store) saveSegmented(ctx context.Context, runID int64, m acceptance.Measurement) error {
	sum, err := Summarize(m)
	if err != nil {
		return fmt.Errorf("summarize: %w", err)
	}
	src, _ := json.Marshal(m.Source)
	tool := m.ToolSummary
	if tool == nil {
		tool = map[string]float64{}
	}
	toolJSON, _ := json.Marshal(tool)
	sumJSON, _ := json.Marshal(sum)
	var trials *int64
	if m.Trials > 0 {
		trials = &m.Trials
	}
	return s.InTx(ctx, func(tx *Store) error {
		var id int64
		if err := tx.db.QueryRow(ctx, upsertMeasurement+` RETURNING id`,
			runID, m.Metric, m.Step, m.Level, m.Repetition, sum.N, []byte{}, nil, toolJSON, src, sumJSON, trials, m.Host, len(m.Segments), nil).Scan(&id); err != nil {
			return err
		}
		if _, err := tx.db.Exec(ctx, `DELETE FROM measurement_segments WHERE measurement_id = $1`, id); err != nil {
			return err
		}
		for i, seg := range m.Segments {
			data, err := segmentBytes(seg)
			if err != nil {
				return fmt.Errorf("segment %d: %w", i, err)
			}
			if _, err := tx.db.Exec(ctx, `INSERT INTO measurement_segments (measurement_id, segment, n, lo, counts, sum, m2, digest, data)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
				id, i, seg.N, seg.Lo, encodeInt64s(seg.Counts), seg.Sum, seg.M2, seg.Digest[:], data); err != nil {
				return fmt.Errorf("segment %d: %w", i, err)
			}
		}
		return nil
	})
}

// SegmentBytesReader is a stats.SegmentReader that can give a whole
// segment's grouped values as stored (float64 little-endian) without
// decoding them (runners/parse/spill's file).
type SegmentBytesReader interface {
	SegmentBytes(index int) ([]byte, error)
}

func segmentBytes(seg stats.Segment) ([]byte, error) {
	if r, ok := seg.Reader.(SegmentBytesReader); ok {
		b, err := r.SegmentBytes(seg.Index)
		if err == nil && int64(len(b)) != 8*seg.N {
			err = fmt.Errorf("%d bytes for %d values", len(b), seg.N)
		}
		return b, err
	}
	got, err := seg.Reader.ReadRanges([]stats.SegmentRange{{Segment: seg.Index, Offset: 0, Count: seg.N}})
	if err != nil {
		return nil, err
	}
	return encodeFloat64s(got[0]), nil
}

// loadSegments fills the Segments of the measurements whose rows have
// them (row id → index in ms), each read from the database when a figure
// needs it.
func (s *Store) loadSegments(ctx context.Context, ms []acceptance.Measurement, rows map[int64]int) error {
	ids := make([]int64, 0, len(rows))
	for id := range rows {
		ids = append(ids, id)
	}
	r, err := s.db.Query(ctx, `SELECT measurement_id, segment, n, lo, counts, sum, m2, digest
		FROM measurement_segments WHERE measurement_id = ANY($1) ORDER BY measurement_id, segment`, ids)
	if err != nil {
		return fmt.Errorf("store: load measurement segments: %w", err)
	}
	readers := map[int64]*segmentReader{}
	var id int64
	var seg stats.Segment
	var digest []byte
	_, err = pgx.ForEachRow(r, []any{&id, &seg.Index, &seg.N, &seg.Lo, int64sOf{&seg.Counts}, &seg.Sum, &seg.M2, &digest}, func() error {
		i := rows[id]
		if seg.Index != len(ms[i].Segments) || len(digest) != len(seg.Digest) {
			return fmt.Errorf("store: measurement %d: segment %d is out of order or malformed", id, seg.Index)
		}
		copy(seg.Digest[:], digest)
		if readers[id] == nil {
			readers[id] = &segmentReader{ctx: ctx, db: s.db, measurementID: id}
		}
		seg.Reader = readers[id]
		ms[i].Segments = append(ms[i].Segments, seg)
		seg = stats.Segment{}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: load measurement segments: %w", err)
	}
	for id, i := range rows {
		if cap(ms[i].Segments) != len(ms[i].Segments) {
			return fmt.Errorf("store: measurement %d has %d of its %d segments", id, len(ms[i].Segments), cap(ms[i].Segments))
		}
	}
	return nil
}

// segmentReader reads a stored measurement's segments (stats.SegmentReader).
type segmentReader struct {
	ctx           context.Context
	db            DBTX
	measurementID int64
}

func (r *segmentReader) ReadRanges(rs []stats.SegmentRange) ([][]float64, error) {
	segs := make([]int32, len(rs))
	offs := make([]int32, len(rs))
	lens := make([]int32, len(rs))
	for i, x := range rs {
		if x.Offset < 0 || x.Count < 0 || 8*(x.Offset+x.Count) > math.MaxInt32 {
			return nil, fmt.Errorf("store: segment range %+v is out of bounds", x)
		}
		segs[i], offs[i], lens[i] = int32(x.Segment), int32(8*x.Offset+1), int32(8*x.Count)
	}
	rows, err := r.db.Query(r.ctx, `SELECT r.ord, substring(s.data FROM r.off FOR r.len)
		FROM unnest($2::int[], $3::int[], $4::int[]) WITH ORDINALITY AS r(segment, off, len, ord)
		JOIN measurement_segments s ON s.measurement_id = $1 AND s.segment = r.segment`, r.measurementID, segs, offs, lens)
	if err != nil {
		return nil, fmt.Errorf("store: read samples of measurement %d: %w", r.measurementID, err)
	}
	out := make([][]float64, len(rs))
	var ord int64
	var v []float64
	_, err = pgx.ForEachRow(rows, []any{&ord, float64sOf{&v}}, func() error {
		i := int(ord) - 1
		if i < 0 || i >= len(rs) || int64(len(v)) != rs[i].Count {
			return fmt.Errorf("segment %d: %d values where %d were asked", rs[max(min(i, len(rs)-1), 0)].Segment, len(v), rs[max(min(i, len(rs)-1), 0)].Count)
		}
		out[i] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: read samples of measurement %d: %w", r.measurementID, err)
	}
	for i, v := range out {
		if v == nil && rs[i].Count > 0 {
			return nil, fmt.Errorf("store: read samples of measurement %d: segment %d is missing", r.measurementID, rs[i].Segment)
		}
	}
	return out, nil
}
