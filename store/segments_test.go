package store_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
	"github.com/accordlab/accord/store"
)

// Samples of more than stats.InMemoryLimit are kept in segments
// (store/segments.go): one row per segment, read back one bucket's range
// at a time.
func TestSegments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st     *store.Store
		run    int64
		values []float64
		in     []acceptance.Measurement // one TTFT measurement in 5 segments of 1,000
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		f := newRunFixture(t, st)
		b := &testBundle{st: st, run: f.run(t, st)}
		r := rand.New(rand.NewPCG(8, 9))
		b.values = make([]float64, 5000)
		for i := range b.values {
			b.values[i] = math.Exp(4 + r.NormFloat64())
		}
		var segs []stats.Segment
		mem := &memSegments{}
		for i := 0; i < len(b.values); i += 1000 {
			grouped := make([]float64, 1000)
			seg, err := stats.GroupSegment(b.values[i:i+1000], grouped, nil)
			require.NoError(t, err)
			seg.Reader, seg.Index = mem, len(mem.grouped)
			mem.grouped = append(mem.grouped, grouped)
			segs = append(segs, seg)
		}
		b.in = []acceptance.Measurement{{Metric: acceptance.MetricTTFT, Step: "chat", Repetition: 1, Segments: segs,
			Source: acceptance.Source{Tool: "accord-probe", Field: "requests.jsonl"}}}
		return b
	}

	// Every figure is the same as the values' in memory, and the digest is
	// the same as before saving. Saved again with its values in memory,
	// the row keeps no segments.
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.st.SaveMeasurements(ctx, b.run, b.in))
		out, err := b.st.RunMeasurements(ctx, b.run)
		require.NoError(t, err)
		require.Len(t, out, 1)
		require.Len(t, out[0].Segments, 5)
		require.Nil(t, out[0].Values)
		require.Equal(t, acceptance.MeasurementsDigest(b.in), acceptance.MeasurementsDigest(out))

		want, err := stats.NewSample(b.values, nil)
		require.NoError(t, err)
		got, err := out[0].Sample()
		require.NoError(t, err)
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
			require.Equal(t, want.Quantile(q), got.Quantile(q), "q %v", q)
		}
		x := want.Quantile(0.7)
		require.Equal(t, want.CountAtMost(x), got.CountAtMost(x))
		require.Equal(t, want.CountBelow(x), got.CountBelow(x))
		require.InEpsilon(t, want.Mean(), got.Mean(), 1e-12)
		require.NoError(t, got.Err())

		rows, err := b.st.RunMeasurementSummaries(ctx, b.run)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		sum := rows[0].Summary
		require.Equal(t, []float64{want.Min(), want.Quantile(0.5), want.Quantile(0.99), want.Quantile(0.999), want.Max()},
			[]float64{sum.Min, sum.P50, sum.P99, sum.P999, sum.Max})
		require.EqualValues(t, 5000, sum.N)

		require.NoError(t, b.st.SaveMeasurements(ctx, b.run, []acceptance.Measurement{{Metric: acceptance.MetricTTFT, Step: "chat", Repetition: 1,
			Values: b.values, Source: acceptance.Source{Tool: "accord-probe"}}}))
		out, err = b.st.RunMeasurements(ctx, b.run)
		require.NoError(t, err)
		require.Nil(t, out[0].Segments)
		require.Len(t, out[0].Values, 5000)
		require.Zero(t, countSegmentRows(t, b.st))
	})

	// A reader reads exactly the ranges asked, in the order asked, and
	// refuses a range outside a segment rather than give fewer values.
	t.Run("ReaderReadsRangesAndRefusesOutOfBounds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.st.SaveMeasurements(ctx, b.run, b.in))
		out, err := b.st.RunMeasurements(ctx, b.run)
		require.NoError(t, err)
		reader := out[0].Segments[0].Reader
		mem := b.in[0].Segments[0].Reader
		ranges := []stats.SegmentRange{{Segment: 3, Offset: 10, Count: 5}, {Segment: 0, Offset: 0, Count: 2}, {Segment: 4, Offset: 999, Count: 1}}
		got, err := reader.ReadRanges(ranges)
		require.NoError(t, err)
		want, err := mem.ReadRanges(ranges)
		require.NoError(t, err)
		require.Equal(t, want, got)

		for _, bad := range []stats.SegmentRange{
			{Segment: 1, Offset: -1, Count: 1},
			{Segment: 1, Offset: 995, Count: 10}, // past the segment's end
			{Segment: 5, Offset: 0, Count: 1},    // no such segment
		} {
			_, err := reader.ReadRanges([]stats.SegmentRange{bad})
			require.Error(t, err, "%+v", bad)
		}
	})

	// A measurement whose segment rows are not all there, or not in
	// order, is an error when loaded, never a shorter sample.
	t.Run("MissingOrMisnumberedSegmentIsAnError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.st.SaveMeasurements(ctx, b.run, b.in))
		_, err := b.st.Tx().Exec(ctx, `UPDATE measurement_segments SET segment = 7 WHERE segment = 2`)
		require.NoError(t, err)
		_, err = b.st.RunMeasurements(ctx, b.run)
		require.ErrorContains(t, err, "out of order")

		_, err = b.st.Tx().Exec(ctx, `DELETE FROM measurement_segments WHERE segment >= 2`)
		require.NoError(t, err)
		_, err = b.st.RunMeasurements(ctx, b.run)
		require.ErrorContains(t, err, "has 2 of its 5 segments")
	})

	// A segment whose reader gives bytes that do not match its count is
	// refused at saving, and nothing of the measurement is stored.
	t.Run("SegmentOfTheWrongLengthIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mem := b.in[0].Segments[3].Reader.(*memSegments)
		for i := range b.in[0].Segments {
			b.in[0].Segments[i].Reader = &shortBytes{mem}
		}
		err := b.st.SaveMeasurements(ctx, b.run, b.in)
		require.ErrorContains(t, err, "7992 bytes for 1000 values")
		require.Zero(t, countSegmentRows(t, b.st))
		out, err := b.st.RunMeasurements(ctx, b.run)
		require.NoError(t, err)
		require.Empty(t, out)
	})
}

func countSegmentRows(t *testing.T, st *store.Store) int {
	t.Helper()
	var n int
	require.NoError(t, st.Tx().QueryRow(context.Background(), `SELECT count(*) FROM measurement_segments`).Scan(&n))
	return n
}

// memSegments keeps grouped segments in memory (stats.SegmentReader).
type memSegments struct{ grouped [][]float64 }

func (m *memSegments) ReadRanges(rs []stats.SegmentRange) ([][]float64, error) {
	out := make([][]float64, len(rs))
	for i, r := range rs {
		out[i] = slices.Clone(m.grouped[r.Segment][r.Offset : r.Offset+r.Count])
	}
	return out, nil
}

// shortBytes reads ranges as memSegments does but gives every segment's
// stored bytes (store.SegmentBytesReader) one value short.
type shortBytes struct{ *memSegments }

func (s *shortBytes) SegmentBytes(index int) ([]byte, error) {
	return make([]byte, 8*(len(s.grouped[index])-1)), nil
}
