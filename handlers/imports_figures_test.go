package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/stats"
	"github.com/accordlab/accord/runners/parse"
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
	runID := pb.importedRunID(t)
	rows, err := pb.store.RunMeasurementSummaries(context.Background(), runID)
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

// The import says what it read and what it ignored, and why: on the run
// page, in the run's artifacts, and in the API's answer.
func TestImportReportOnPageArtifactAndAPI(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	pv := strconv.FormatInt(pb.profileVersionID(t), 10)
	data, err := os.ReadFile("../runners/parse/testdata/fio-3.33-jsonplus-client-server-two.json")
	require.NoError(t, err)
	res, _ := pb.postMultipart(t, pb.engineer, pb.url("/runs/import/result"), map[string]string{"profile_version": pv, "step": "kv"},
		map[string][]byte{"file": data})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	runID := pb.importedRunID(t)

	// The artifact.
	arts, err := pb.store.RunArtifacts(ctx, runID)
	require.NoError(t, err)
	var stored *parse.Report
	for _, a := range arts {
		if a.Path == ImportReportArtifact {
			f, err := pb.store.Artifacts().Open(ctx, a.SHA256)
			require.NoError(t, err)
			var rep parse.Report
			require.NoError(t, json.NewDecoder(f).Decode(&rep))
			f.Close()
			stored = &rep
		}
	}
	require.NotNil(t, stored, "the report is kept beside the file")
	require.Equal(t, parse.FormatFio, stored.Format)
	require.Len(t, stored.Jobs, 3, "each client and fio's sum")
	var bwMin bool
	for _, ig := range stored.Ignored {
		bwMin = bwMin || ig.Field == "client_stats[].read.bw_min"
	}
	require.True(t, bwMin, "an ignored field is listed")

	// The page.
	_, page := pb.get(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(runID, 10))
	require.Contains(t, page, `id="import-report"`)
	require.Contains(t, page, "client_stats[].read.bw_min")
	require.Contains(t, page, "per-interval bandwidth samples: Accord imports the whole-run rate")
	require.Contains(t, page, `id="import-jobs"`)
	require.Contains(t, page, "127.0.0.1:8918")

	// The API answers with the run and the same report.
	token := pb.createTokenViaUI(t, pb.engineer, "read", "run")
	post := func(fields map[string]string, file []byte) (int, map[string]any) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for k, v := range fields {
			require.NoError(t, mw.WriteField(k, v))
		}
		fw, err := mw.CreateFormFile("file", "llmd_base_10qps.json")
		require.NoError(t, err)
		_, _ = fw.Write(file)
		require.NoError(t, mw.Close())
		req, _ := http.NewRequest(http.MethodPost, pb.ts.URL+fmt.Sprintf("/api/v1/programs/%d/runs/import", pb.programID), &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
		return res.StatusCode, out
	}
	vllm, err := os.ReadFile("../runners/parse/testdata/vllm-benchmark_serving-llmd-10qps.json")
	require.NoError(t, err)
	code, out := post(map[string]string{"profile_version": pv, "step": "serve"}, vllm)
	require.Equal(t, http.StatusCreated, code, "%v", out)
	rep := out["report"].(map[string]any)
	require.Equal(t, "vllm-bench-json", rep["format"])
	require.NotEmpty(t, rep["read"])
	require.Contains(t, fmt.Sprint(rep["ignored"]), "without --goodput")
	require.Equal(t, "imported", out["run"].(map[string]any)["kind"])

	before := pb.countRuns(t)
	code, out = post(map[string]string{"profile_version": pv}, []byte(`{"not": "a result"}`))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, out["error"], "not recognised")
	require.Equal(t, before, pb.countRuns(t), "nothing is kept")
}
