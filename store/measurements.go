package store

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
)

// Summary is a measurement's precomputed statistics, computed once at
// ingest so that pages never recompute them.
type Summary struct {
	N    int64   `json:"n"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
	// ToolFigures lay the tool's own summary figures (for an import) beside
	// Accord's from the same samples under the tool's percentile
	// definition, so that the two can be checked against each other
	// without mixing definitions.
	ToolFigures []acceptance.ToolFigure `json:"tool_figures,omitempty"`
}

// Summarize computes a measurement's statistics with Accord's own
// percentile definition (acceptance/stats).
func Summarize(m acceptance.Measurement) (Summary, error) {
	if !m.HasSamples() {
		return Summary{}, nil
	}
	s, err := m.Sample()
	if err != nil {
		return Summary{}, err
	}
	figs, err := acceptance.ToolFigures(m)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{N: s.N(), Min: s.Min(), P50: s.Quantile(0.5), P90: s.Quantile(0.9), P95: s.Quantile(0.95),
		P99: s.Quantile(0.99), P999: s.Quantile(0.999), Max: s.Max(), Mean: s.Mean(), ToolFigures: figs}
	return sum, s.Err()
}

// MeasurementRow is a stored measurement without its samples.
type MeasurementRow struct {
	ID          int64
	Metric      string
	Step        string
	Level       string
	Repetition  int
	N           int64
	ToolSummary map[string]float64
	Source      acceptance.Source
	Summary     Summary
	// Host is the lab host of a multi-host run's own row (RunHostMeasurementSummaries).
	Host string
}

// SaveMeasurements stores a run's measurements with their summaries.
func (s *Store) SaveMeasurements(ctx context.Context, runID int64, ms []acceptance.Measurement) error {
	// Sent in batches of at most saveBatchBytes of samples: a run of ten
	// million requests has 80 MB of them in each of its measurements, and
	// one batch of all would hold every one encoded at once.
	batch, queued := &pgx.Batch{}, 0
	send := func() error {
		if batch.Len() == 0 {
			return nil
		}
		err := s.db.SendBatch(ctx, batch).Close()
		batch, queued = &pgx.Batch{}, 0
		if err != nil {
			return fmt.Errorf("store: save measurements of run %d: %w", runID, err)
		}
		return nil
	}
	var segmented []acceptance.Measurement
	for _, m := range ms {
		if len(m.Segments) > 0 {
			segmented = append(segmented, m)
			continue
		}
		if size := 8 * (len(m.Values) + len(m.Counts) + len(m.SentIndex)); queued > 0 && queued+size > saveBatchBytes {
			if err := send(); err != nil {
				return err
			}
		}
		queued += 8 * (len(m.Values) + len(m.Counts) + len(m.SentIndex))
		sum, err := Summarize(m)
		if err != nil {
			return fmt.Errorf("store: summarize %s/%s: %w", m.Step, m.Metric, err)
		}
		src, _ := json.Marshal(m.Source)
		tool := m.ToolSummary
		if tool == nil {
			tool = map[string]float64{}
		}
		toolJSON, _ := json.Marshal(tool)
		sumJSON, _ := json.Marshal(sum)
		var counts []byte
		if m.Counts != nil {
			counts = encodeInt64s(m.Counts)
		}
		var trials *int64
		if m.Trials > 0 {
			trials = &m.Trials
		}
		var sent []byte
		if m.SentIndex != nil {
			sent = encodeInt64s(m.SentIndex)
		}
		batch.Queue(upsertMeasurement,
			runID, m.Metric, m.Step, m.Level, m.Repetition, sum.N, encodeFloat64s(m.Values), counts, toolJSON, src, sumJSON, trials, m.Host, 0, sent)
	}
	// A row that had segments before and has its values in values_f64 now
	// keeps none.
	batch.Queue(`DELETE FROM measurement_segments s USING measurements m
		WHERE s.measurement_id = m.id AND m.run_id = $1 AND m.segments = 0`, runID)
	if err := send(); err != nil {
		return err
	}
	for _, m := range segmented {
		if err := s.saveSegmented(ctx, runID, m); err != nil {
			return fmt.Errorf("store: save measurements of run %d: %s/%s: %w", runID, m.Step, m.Metric, err)
		}
	}
	return nil
}

const upsertMeasurement = `INSERT INTO measurements (run_id, metric, step, level, repetition, n, values_f64, counts, tool_summary, source, summary, trials, host, segments, sent_index)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
	ON CONFLICT (run_id, metric, step, level, repetition, host) DO UPDATE SET n = EXCLUDED.n, values_f64 = EXCLUDED.values_f64,
		counts = EXCLUDED.counts, tool_summary = EXCLUDED.tool_summary, source = EXCLUDED.source, summary = EXCLUDED.summary,
		trials = EXCLUDED.trials, segments = EXCLUDED.segments, sent_index = EXCLUDED.sent_index
	`

// saveBatchBytes bounds the samples SaveMeasurements sends at once.
const saveBatchBytes = 16 << 20

// RunMeasurements returns a run's measurements with their samples, for
// evaluation: of a multi-host run, its hosts combined (RunHostMeasurements
// has each host's own).
func (s *Store) RunMeasurements(ctx context.Context, runID int64) ([]acceptance.Measurement, error) {
	return s.loadMeasurements(ctx, runID, false)
}

// RunHostMeasurements returns each host's own measurements of a multi-host
// run (Host set), with their samples; none for a one-host run.
func (s *Store) RunHostMeasurements(ctx context.Context, runID int64) ([]acceptance.Measurement, error) {
	return s.loadMeasurements(ctx, runID, true)
}

func (s *Store) loadMeasurements(ctx context.Context, runID int64, hosts bool) ([]acceptance.Measurement, error) {
	rows, err := s.db.Query(ctx, `SELECT id, segments, metric, step, level, repetition, values_f64, counts, tool_summary, source, coalesce(trials, 0), host, sent_index
		FROM measurements WHERE run_id = $1 AND (host <> '') = $2 ORDER BY host, step, level, metric, repetition`, runID, hosts)
	if err != nil {
		return nil, fmt.Errorf("store: load measurements of run %d: %w", runID, err)
	}
	segmented := map[int64]int{} // id of a row with segments → its index
	row := 0
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (acceptance.Measurement, error) {
		var m acceptance.Measurement
		var tool, src []byte
		var id int64
		var segments int
		// The samples are decoded from the row as received: a copy of the
		// raw bytes first would double what a large one holds.
		if err := r.Scan(&id, &segments, &m.Metric, &m.Step, &m.Level, &m.Repetition, float64sOf{&m.Values}, int64sOf{&m.Counts}, &tool, &src, &m.Trials, &m.Host, int64sOf{&m.SentIndex}); err != nil {
			return m, err
		}
		if segments > 0 {
			segmented[id] = row
		}
		row++
		if m.Values == nil {
			m.Values = []float64{}
		}
		if err := json.Unmarshal(tool, &m.ToolSummary); err != nil {
			return m, err
		}
		if len(m.ToolSummary) == 0 {
			m.ToolSummary = nil
		}
		if segments > 0 {
			m.Values = nil
			m.Segments = make([]stats.Segment, 0, segments)
		}
		return m, json.Unmarshal(src, &m.Source)
	})
	if err != nil {
		return nil, err
	}
	if len(segmented) > 0 {
		if err := s.loadSegments(ctx, ms, segmented); err != nil {
			return nil, err
		}
	}
	// Levels in number order (c=4 before c=16), which SQL's text order
	// is not; sorted once the segments found their rows by position.
	slices.SortStableFunc(ms, func(a, b acceptance.Measurement) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Step, b.Step), acceptance.CompareLevels(a.Level, b.Level),
			cmp.Compare(a.Metric, b.Metric), cmp.Compare(a.Repetition, b.Repetition))
	})
	return ms, nil
}

// RunMeasurementSummaries returns a run's measurements without samples (of a
// multi-host run, its hosts combined).
func (s *Store) RunMeasurementSummaries(ctx context.Context, runID int64) ([]MeasurementRow, error) {
	return s.measurementSummaries(ctx, runID, false)
}

// RunHostMeasurementSummaries returns each host's own measurements of a
// multi-host run without samples, host by host.
func (s *Store) RunHostMeasurementSummaries(ctx context.Context, runID int64) ([]MeasurementRow, error) {
	return s.measurementSummaries(ctx, runID, true)
}

func (s *Store) measurementSummaries(ctx context.Context, runID int64, hosts bool) ([]MeasurementRow, error) {
	rows, err := s.db.Query(ctx, `SELECT id, metric, step, level, repetition, n, tool_summary, source, summary, host
		FROM measurements WHERE run_id = $1 AND (host <> '') = $2`, runID, hosts)
	if err != nil {
		return nil, fmt.Errorf("store: measurement summaries of run %d: %w", runID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (MeasurementRow, error) {
		var m MeasurementRow
		var tool, src, sum []byte
		if err := r.Scan(&m.ID, &m.Metric, &m.Step, &m.Level, &m.Repetition, &m.N, &tool, &src, &sum, &m.Host); err != nil {
			return m, err
		}
		if err := json.Unmarshal(tool, &m.ToolSummary); err != nil {
			return m, err
		}
		if err := json.Unmarshal(src, &m.Source); err != nil {
			return m, err
		}
		return m, json.Unmarshal(sum, &m.Summary)
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b MeasurementRow) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Step, b.Step), acceptance.CompareLevels(a.Level, b.Level),
			cmp.Compare(a.Metric, b.Metric), cmp.Compare(a.Repetition, b.Repetition))
	})
	return out, nil
}

// float64sOf decodes a bytea of little-endian float64s into *v (nil for
// NULL), straight from the received row.
type float64sOf struct{ v *[]float64 }

func (f float64sOf) ScanBytes(b []byte) error {
	if b == nil {
		*f.v = nil
		return nil
	}
	if len(b)%8 != 0 {
		return fmt.Errorf("store: %d bytes of samples is not a whole number of float64s", len(b))
	}
	*f.v = decodeFloat64s(b)
	return nil
}

// int64sOf decodes a bytea of little-endian int64s into *v (nil for NULL).
type int64sOf struct{ v *[]int64 }

func (f int64sOf) ScanBytes(b []byte) error {
	if b == nil {
		*f.v = nil
		return nil
	}
	if len(b)%8 != 0 {
		return fmt.Errorf("store: %d bytes of counts is not a whole number of int64s", len(b))
	}
	*f.v = decodeInt64s(b)
	return nil
}

func encodeFloat64s(v []float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

func decodeFloat64s(b []byte) []float64 {
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

func encodeInt64s(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func decodeInt64s(b []byte) []int64 {
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}
