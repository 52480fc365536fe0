package acceptance

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// fuzzInput decodes bytes into a small evaluation: a header byte picks the
// statistic, comparator, mode and shape, the rest are samples (16-bit
// values, so that ties and zeros are common) spread over repetitions and
// both sides.
func fuzzInput(data []byte) (EvaluationInput, bool) {
	if len(data) < 4 {
		return EvaluationInput{}, false
	}
	h, limitByte, repsByte := data[0], data[1], data[2]
	data = data[3:]
	stats := []Statistic{StatP50, StatP99, StatP999, StatMean, StatMax}
	st := stats[int(h)%len(stats)]
	cmp := LessOrEqual
	if h&0x08 != 0 {
		cmp = GreaterOrEqual
	}
	relative := h&0x10 != 0
	histogram := h&0x20 != 0
	reps := 1 + int(repsByte)%4
	var vals []float64
	for len(data) >= 2 {
		vals = append(vals, float64(binary.LittleEndian.Uint16(data))/16)
		data = data[2:]
	}
	side := func(offset int) []Measurement {
		var out []Measurement
		for r := range reps {
			m := Measurement{Metric: MetricTTFT, Step: "s", Repetition: r + 1}
			for i := r + offset; i < len(vals); i += 2 * reps {
				m.Values = append(m.Values, vals[i])
				if histogram {
					m.Counts = append(m.Counts, int64(i%3))
				}
			}
			out = append(out, m)
		}
		return out
	}
	limit := float64(limitByte) * 16
	c := absoluteCriterion(MetricTTFT, st, cmp, limit, "ms")
	in := EvaluationInput{Candidate: side(0), Resamples: MinResamples}
	if relative {
		c = relativeCriterion(MetricTTFT, st, cmp, float64(int(limitByte)-128))
		in.Baseline = side(reps)
	}
	in.Gates = gateSet(c)
	return in, true
}

func FuzzEvaluate(f *testing.F) {
	f.Add([]byte{0x01, 100, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte{0x11, 130, 2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x23, 10, 3, 255, 255, 0, 0, 1, 0, 9, 9, 9, 9})
	f.Add([]byte{0x39, 200, 1, 5, 1, 5, 1, 5, 1, 5, 1, 7, 7})
	seq := []byte{0x14, 128, 1}
	for i := range 700 {
		seq = append(seq, byte(i), byte(i>>3))
	}
	f.Add(seq)
	f.Fuzz(func(t *testing.T, data []byte) {
		in, ok := fuzzInput(data)
		if !ok {
			return
		}
		ev, err := Evaluate(in)
		if err != nil {
			return // malformed input is an error, never a panic
		}
		j1, err := ev.CanonicalJSON()
		if err != nil {
			t.Fatalf("canonical JSON: %v", err)
		}
		ev2, err := Evaluate(in)
		if err != nil {
			t.Fatal(err)
		}
		j2, _ := ev2.CanonicalJSON()
		if !bytes.Equal(j1, j2) {
			t.Fatal("re-evaluation differs")
		}
		c := in.Gates.Criteria[0]
		for _, sr := range ev.Criteria[0].Series {
			if !sr.Verdict.Valid() || sr.Explanation == "" || sr.Interval == "" {
				t.Fatalf("incomplete series result %+v", sr)
			}
			le := c.Comparator == LessOrEqual
			limit := ev.Criteria[0].Limit
			// A decision by an interval agrees with its bound.
			if sr.Interval != IntervalNone && sr.Reason == reasonDecided {
				switch {
				case sr.Verdict == Pass && le && (sr.Upper == nil || *sr.Upper > limit):
					t.Fatalf("PASS with upper bound %v over %v", sr.Upper, limit)
				case sr.Verdict == Pass && !le && (sr.Lower == nil || *sr.Lower < limit):
					t.Fatalf("PASS with lower bound %v under %v", sr.Lower, limit)
				case sr.Verdict == Fail && le && (sr.Lower == nil || *sr.Lower <= limit):
					t.Fatalf("FAIL with lower bound %v not over %v", sr.Lower, limit)
				case sr.Verdict == Fail && !le && (sr.Upper == nil || *sr.Upper >= limit):
					t.Fatalf("FAIL with upper bound %v not under %v", sr.Upper, limit)
				}
			}
			for _, p := range []*float64{sr.Estimate, sr.Lower, sr.Upper, sr.PValue, sr.PValueFail} {
				if p != nil && (math.IsNaN(*p) || math.IsInf(*p, 0)) {
					t.Fatal("non-finite number")
				}
			}
		}
	})
}
