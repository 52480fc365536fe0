package attest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTestResultMapping(t *testing.T) {
	t.Parallel()
	for verdict, want := range map[string]string{
		VerdictPass: ResultPassed, VerdictFail: ResultFailed,
		VerdictInconclusive: ResultWarned, VerdictIncomparable: ResultWarned,
	} {
		got, err := TestResultOf(verdict)
		require.NoError(t, err)
		require.Equal(t, want, got, verdict)
	}
	_, err := TestResultOf("pass")
	require.Error(t, err)
}

// The statements use the spec's JSON key names exactly (the reason we do
// not use the attestation library's generated structs).
func TestRunStatementsJSON(t *testing.T) {
	t.Parallel()
	tr, bm, err := RunStatements(testEvidence("42"))
	require.NoError(t, err)

	var st map[string]any
	raw, err := json.Marshal(tr)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &st))
	require.Equal(t, "https://in-toto.io/Statement/v1", st["_type"])
	require.Equal(t, "https://in-toto.io/attestation/test-result/v0.1", st["predicateType"])
	subjects := st["subject"].([]any)
	require.Len(t, subjects, 4)
	first := subjects[0].(map[string]any)
	require.Equal(t, "fio/kv-cache-4k.json", first["name"], "subjects sorted by name")
	require.Equal(t, sha256Hex(testArtifacts()["fio/kv-cache-4k.json"]), first["digest"].(map[string]any)["sha256"])

	pred := st["predicate"].(map[string]any)
	require.Equal(t, "FAILED", pred["result"])
	require.Equal(t, []any{"ttft-p99"}, pred["passedTests"])
	require.Equal(t, []any{"itl-p99 @ concurrency-64"}, pred["warnedTests"])
	require.Equal(t, []any{"throughput-uplift"}, pred["failedTests"])
	require.Equal(t, "https://accord.example/runs/42", pred["url"])
	conf := pred["configuration"].([]any)
	require.Len(t, conf, 3)
	require.Equal(t, "profile/"+testProfileName, conf[0].(map[string]any)["name"])
	require.Equal(t, map[string]any{"sha256": sha256Hex(testFacts)}, conf[2].(map[string]any)["digest"])

	raw, err = json.Marshal(bm)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &st))
	require.Equal(t, BenchmarkPredicateType, st["predicateType"])
	pred = st["predicate"].(map[string]any)
	require.Equal(t, "42", pred["runId"])
	require.Equal(t, sha256Hex(testFacts), pred["hostFactsSha256"])
	require.Equal(t, "FAIL", pred["verdict"])
	require.Equal(t, map[string]any{"name": testProfileName, "version": float64(3), "sha256": sha256Hex(testProfile)}, pred["profile"])
	require.Equal(t, 1843.2, pred["metrics"].(map[string]any)["ttft"].(map[string]any)["p99"].(map[string]any)["value"])
	require.Len(t, pred["verdicts"], 3)
	require.Equal(t, "2026-03-14T09:26:53.589793Z", pred["startedOn"])

	// Signed, the statement parses back strictly.
	kr, err := OpenKeyring(t.TempDir(), KeyringOptions{Now: keyClock})
	require.NoError(t, err)
	s, err := kr.Active()
	require.NoError(t, err)
	env, err := SignStatement(s, tr)
	require.NoError(t, err)
	require.Equal(t, PayloadTypeInToto, env.PayloadType)
	got, err := statementOf(env)
	require.NoError(t, err)
	require.Equal(t, tr.Subject, got.Subject)
}

func TestRunStatementsRejectsBadInput(t *testing.T) {
	t.Parallel()
	ev := testEvidence("42")
	ev.Verdict = "MAYBE"
	_, _, err := RunStatements(ev)
	require.Error(t, err)

	ev = testEvidence("42")
	ev.Artifacts[0].SHA256 = "abc"
	_, _, err = RunStatements(ev)
	require.ErrorContains(t, err, "not a hex digest")

	ev = testEvidence("42")
	ev.Artifacts = append(ev.Artifacts, ev.Artifacts[0])
	_, _, err = RunStatements(ev)
	require.ErrorContains(t, err, "twice")

	ev = testEvidence("42")
	ev.HostFacts = []byte("not json")
	_, _, err = RunStatements(ev)
	require.ErrorContains(t, err, "host facts")
}

// A run without a gate set has the benchmark statement alone: no gateSet,
// no verdict, and no test-result statement (nothing judged it); a verdict
// without a gate set is refused.
func TestUngatedRunStatements(t *testing.T) {
	t.Parallel()
	ev := testEvidence("42")
	ev.GateSet, ev.Verdict, ev.Verdicts = Ref{}, "", nil
	tr, bm, err := RunStatements(ev)
	require.NoError(t, err)
	require.Zero(t, tr)
	require.Equal(t, BenchmarkPredicateType, bm.PredicateType)
	var predicate map[string]any
	require.NoError(t, json.Unmarshal(bm.Predicate, &predicate))
	require.NotContains(t, predicate, "gateSet")
	require.NotContains(t, predicate, "verdict")
	require.Contains(t, predicate, "profile")

	kr, err := OpenKeyring(t.TempDir(), KeyringOptions{})
	require.NoError(t, err)
	s, err := kr.Active()
	require.NoError(t, err)
	atts, err := SignRun(s, ev)
	require.NoError(t, err)
	require.Len(t, atts, 1)
	require.Equal(t, AttestationBenchmark, atts[0].Name)

	ev.Verdict = VerdictPass
	_, _, err = RunStatements(ev)
	require.ErrorContains(t, err, "a verdict without a gate set")
}
