package web

import (
	"strconv"

	"github.com/accordlab/accord/acceptance/stats"
)

// PercentileExampleRow is one line of the help page's worked example.
type PercentileExampleRow struct {
	Label, NearestRank, Numpy, Fio string
}

// percentileExample computes the help page's worked example (the samples
// 1..100) with the same code the importers and pages use, so that the page
// cannot drift from what Accord does.
func percentileExample() []PercentileExampleRow {
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(i + 1)
	}
	s, _ := stats.NewSample(v, nil) // finite values
	var rows []PercentileExampleRow
	for _, p := range []float64{50, 90, 99, 99.9} {
		row := PercentileExampleRow{Label: "p" + strconv.FormatFloat(p, 'f', -1, 64)}
		for _, c := range []struct {
			d   stats.Definition
			dst *string
		}{{stats.NearestRank, &row.NearestRank}, {stats.NumpyLinear, &row.Numpy}, {stats.FioBins, &row.Fio}} {
			x, _ := s.Percentile(c.d, p) // p is within [0, 100]
			*c.dst = strconv.FormatFloat(x, 'g', 6, 64)
		}
		rows = append(rows, row)
	}
	return rows
}

// limitText writes one of the self-check's limits for the help page.
func limitText(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
