package handlers

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
)

// An imported fio json+ run shows fio's own percentiles with Accord's from
// the same bins by fio's rule, labelled, beside Accord's nearest-rank
// columns.
func TestImportedRunShowsToolFiguresByToolDefinition(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	pv := strconv.FormatInt(pb.profileVersionID(t), 10)
	data, err := os.ReadFile("../runners/parse/testdata/fio-3.33-jsonplus-randrw.json")
	require.NoError(t, err)
	res, _ := pb.postMultipart(t, pb.engineer, pb.url("/runs/import/result"), map[string]string{"profile_version": pv, "step": "kv"},
		map[string][]byte{"file": data})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	var runID int64
	require.NoError(t, pb.pool.QueryRow(context.Background(), `SELECT id FROM runs WHERE kind = 'imported'`).Scan(&runID))
	rows, err := pb.store.MeasurementSummaries(context.Background(), runID)
	require.NoError(t, err)
	var clat *acceptance.ToolFigure
	for _, r := range rows {
		if r.Metric != acceptance.MetricReadCLat {
			continue
		}
		for i, f := range r.Summary.ToolFigures {
			if f.Statistic == "p99" {
				clat = &r.Summary.ToolFigures[i]
			}
		}
	}
	require.NotNil(t, clat, "the stored summary keeps fio's p99 beside Accord's")
	require.Equal(t, stats.FioBins, clat.Definition)
	require.Equal(t, clat.Tool, *clat.Accord, "fio's rule on fio's bins gives fio's number")
	_, page := pb.get(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(runID, 10))
	require.Contains(t, page, "· Accord ")
	require.Contains(t, page, "(fio&#39;s bin rule)")
	require.Contains(t, page, `href="/help#percentiles"`)
}
