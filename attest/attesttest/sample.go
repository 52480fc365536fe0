package attesttest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/attest"
)

// SampleTime is when the sample run ran (its statement's times).
var SampleTime = time.Date(2026, 11, 30, 9, 26, 53, 0, time.UTC)

// sampleArtifacts are laid out as a probe's run folder is: its own
// MANIFEST.sha256, nested step outputs and an empty stderr file.
func sampleArtifacts() map[string][]byte {
	return map[string][]byte{
		"MANIFEST.sha256":                  []byte("7ece68feca2ee08fe039faf09942035cab5dcd3856d06e6ff6ced270f418a78a  events.jsonl\n"),
		"events.jsonl":                     []byte(`{"seq":1,"type":"step_started"}` + "\n"),
		"out/02-read/rep-1/fio.json":       []byte(`{"fio version":"fio-3.33","jobs":[{"jobname":"read","read":{"iops":412345.6}}]}`),
		"out/02-read/rep-1/fio.stderr.txt": {},
		"status.json":                      []byte(`{"state":"finished"}`),
	}
}

var sampleFacts = []byte(`{"hostname":"lab-gpu-07","kernel":"6.1.0-18-amd64"}`)

// SampleBundle signs a small bundle shaped like a real run's with the
// keyring's active key, with a decision log of two records, and returns
// it with the keyring's keys as a verifier trusts them.
func SampleBundle(t testing.TB, kr *attest.Keyring) ([]byte, *attest.KeySet) {
	t.Helper()
	s, err := kr.Active()
	require.NoError(t, err)
	keys, err := kr.PublicKeys()
	require.NoError(t, err)
	// Signed an hour after the active key was made.
	created := time.Now()
	for _, k := range keys {
		if k.ID == s.KeyID() {
			created = k.Created.Add(time.Hour)
		}
	}
	in := SampleInput(t, s, keys, "7", created)
	var buf bytes.Buffer
	_, err = attest.WriteBundle(context.Background(), &buf, s, in)
	require.NoError(t, err)
	ks, err := kr.KeySet()
	require.NoError(t, err)
	return buf.Bytes(), ks
}

// SampleInput is a complete bundle input for runID signed by s at created.
func SampleInput(t testing.TB, s *attest.Signer, keys []attest.PublicKey, runID string, created time.Time) attest.BundleInput {
	t.Helper()
	profile := []byte(`{"name":"kv-cache-lookups","purpose":"storage-microbenchmark"}`)
	gateSet := []byte(`{"criteria":[{"metric":"fio.read.iops"}],"name":"rollout-gates"}`)
	ev := attest.RunEvidence{
		RunID:         runID,
		Profile:       attest.Ref{Name: "kv-cache-lookups", Version: 3, SHA256: hexSHA256(profile)},
		GateSet:       attest.Ref{Name: "rollout-gates", Version: 2, SHA256: hexSHA256(gateSet)},
		Host:          "lab-gpu-07",
		HostFacts:     sampleFacts,
		Metrics:       json.RawMessage(`{"fio.read.iops":{"mean":412345}}`),
		Verdict:       attest.VerdictPass,
		Verdicts:      []attest.Verdict{{Criterion: "iops", Verdict: attest.VerdictPass, Explanation: "412345 >= 400000"}},
		EngineVersion: "accord-test",
		Started:       SampleTime,
		Finished:      SampleTime.Add(10 * time.Minute),
	}
	in := attest.BundleInput{
		RunID:      runID,
		Title:      "Sample run " + runID,
		Created:    created,
		ReportHTML: []byte("<!doctype html><title>Run " + runID + "</title><p>PASS</p>\n"),
		Summary:    json.RawMessage(`{"run":"` + runID + `","verdict":"PASS"}`),
		Facts:      sampleFacts,
		Evaluation: json.RawMessage(`{"verdict":"PASS"}`),
		Decisions:  SampleDecisionLog(t, s, 2, created),
		Keys:       keys,
		Profile:    profile,
		GateSet:    gateSet,
	}
	for name, data := range sampleArtifacts() {
		ev.Artifacts = append(ev.Artifacts, attest.ArtifactDigest{Name: name, SHA256: hexSHA256(data), Size: int64(len(data))})
		in.Artifacts = append(in.Artifacts, attest.Artifact{Name: name, Data: data, SHA256: hexSHA256(data)})
	}
	atts, err := attest.SignRun(s, ev)
	require.NoError(t, err)
	in.Attestations = atts
	return in
}

// SampleDecisionLog is an exported decision log of n approvals signed by
// s, the last one and its checkpoint at `at`.
func SampleDecisionLog(t testing.TB, s *attest.Signer, n int, at time.Time) []byte {
	t.Helper()
	var head *attest.SignedDecision
	var records []attest.SignedDecision
	for i := range n {
		d, err := attest.NextDecision(head, attest.Decision{Chain: "program:1", Kind: attest.DecisionApprove, Actor: "user:1",
			Organisation: "customer:BigCloud", Time: at.Add(time.Duration(i-n+1) * time.Minute), Stage: "lab"})
		require.NoError(t, err)
		sd, err := attest.SignDecision(s, d)
		require.NoError(t, err)
		records = append(records, sd)
		head = &records[len(records)-1]
	}
	cp, err := attest.SignCheckpoint(s, "program:1", head, at)
	require.NoError(t, err)
	out, err := attest.NewDecisionLog("program:1", records, cp).Marshal()
	require.NoError(t, err)
	return out
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
