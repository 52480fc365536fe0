package handlers

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// A criterion the gate set opts into point-estimate judgement says so
// wherever its verdict is shown: on the run page and in the signed
// report. The run's measurements are a real fio 3.33 json output (no
// bins: fio's own p99 only), judged by the engine.
func TestPointEstimateOptInShownOnRunPageAndReport(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	_, pnv, errs, err := prepareSpec(profileOps, kvTemplate(t))
	require.NoError(t, err)
	require.Empty(t, errs)
	_, pv, err := pb.store.CreateSpec(ctx, store.KindProfile, pb.programID, pnv)
	require.NoError(t, err)
	gates := acceptance.GateSetSpec{SchemaVersion: acceptance.GateSchemaVersion, Name: "fio summary", Criteria: []acceptance.Criterion{
		{Name: "clat-p99", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
			Comparator: acceptance.LessOrEqual, Threshold: 10000, Unit: "us", Severity: acceptance.Blocking, PointEstimate: true},
		{Name: "clat-p99-no-opt-in", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
			Comparator: acceptance.LessOrEqual, Threshold: 10000, Unit: "us", Severity: acceptance.Advisory},
	}}
	_, gnv, errs, err := prepareSpec(gateSetOps, gates)
	require.NoError(t, err)
	require.Empty(t, errs)
	_, gv, err := pb.store.CreateSpec(ctx, store.KindGateSet, pb.programID, gnv)
	require.NoError(t, err)
	host, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	requester, err := pb.store.UserByEmail(ctx, "eng@vendor.example")
	require.NoError(t, err)
	run, err := pb.store.CreateRun(ctx, store.NewRun{ProgramID: pb.programID, ProfileVersionID: pv.ID, HostID: host, GateSetVersionID: &gv.ID, CreatedBy: requester.ID})
	require.NoError(t, err)

	data, err := os.ReadFile(filepath.Join("..", "runners", "parse", "testdata", "fio-3.33-json-group-reporting.json"))
	require.NoError(t, err)
	imported, err := parse.ImportWithReport(parse.FormatFio, data, parse.Options{Name: "fio.json", Step: "randread-4k-qd32", Repetition: 1})
	require.NoError(t, err)
	require.NoError(t, pb.store.SaveMeasurements(ctx, run, imported.Measurements))
	addRunFile(t, pb.store, run, "imported/fio.json", string(data))

	// The engine's own evaluation, stored as the evaluate_run job stores it.
	var stored acceptance.GateSetSpec
	require.NoError(t, json.Unmarshal(gnv.Spec, &stored))
	ev, err := acceptance.Evaluate(acceptance.EvaluationInput{Gates: stored, Candidate: imported.Measurements, ProfileDigest: pnv.Digest, GateDigest: gnv.Digest})
	require.NoError(t, err)
	require.True(t, ev.Criteria[0].PointEstimate)
	require.Equal(t, acceptance.Pass, ev.Criteria[0].Verdict, "judged on fio's own p99")
	require.Equal(t, acceptance.Inconclusive, ev.Criteria[1].Verdict, "without the opt-in, a summary is not judged")
	canon, err := ev.CanonicalJSON()
	require.NoError(t, err)
	_, err = pb.store.SaveEvaluation(ctx, store.StoredEvaluation{RunID: run, GateSetVersionID: gv.ID, Overall: string(ev.Verdict),
		Result: canon, Canonical: canon, Digest: ev.Inputs.Digest, EngineVersion: ev.EngineVersion})
	require.NoError(t, err)
	require.NoError(t, pb.store.SetRunState(ctx, run, store.RunDone, "imported"))
	require.NoError(t, pb.store.SetRunVerdict(ctx, run, string(ev.Verdict)))

	const rule = "may be judged on a tool&#39;s point estimate (point_estimate: true)"
	const because = "as the gate set allows for this criterion (point_estimate: true)"
	_, page := pb.get(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(run, 10))
	require.Contains(t, page, rule, "the rule says the criterion may rest on a point estimate")
	require.Contains(t, page, because, "the verdict's explanation says it does, and why")
	require.Equal(t, 1, strings.Count(page, rule), "only the criterion that opted in")

	_, err = report.Signer{Store: pb.store, Keyring: pb.keyring, Render: web.RenderReport}.Sign(ctx, run)
	require.NoError(t, err)
	bundle := pb.download(t, pb.viewer, pb.url("/runs/")+strconv.FormatInt(run, 10)+"/report.tar.gz")
	html := string(fileOf(t, bundle, "/"+attest.FileReportHTML))
	require.Contains(t, html, rule)
	require.Contains(t, html, because)
	require.Equal(t, 1, strings.Count(html, rule))
}
