package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// inferenceFolder is a run folder of one inference level: its step result
// and request records.
func inferenceFolder(t testing.TB, records []byte) map[string][]byte {
	t.Helper()
	res, err := json.Marshal(wire.StepResult{Step: "chat", Kind: acceptance.StepInference, Repetition: 1, Level: "c=1", Format: "probe-requests",
		Inference: &wire.InferenceSummary{Requests: 3, Succeeded: 3, WindowSec: 1, Concurrency: 1}})
	require.NoError(t, err)
	return map[string][]byte{
		wire.OutputDir + "/01-chat/rep-1/c=1/" + wire.StepResultFile: res,
		wire.OutputDir + "/01-chat/rep-1/c=1/" + wire.RequestsFile:   records,
	}
}

func requestLines(t testing.TB, recs ...wire.RequestRecord) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, r := range recs {
		require.NoError(t, json.NewEncoder(&b).Encode(r))
	}
	return b.Bytes()
}

// newProgram makes a program with a profile version for runs.
func newProgram(t testing.TB, st *store.Store) (program, profile int64) {
	t.Helper()
	ctx := context.Background()
	vendor, err := st.CreateOrganization(ctx, "Vendor", "vendor")
	require.NoError(t, err)
	customer, err := st.CreateOrganization(ctx, "Customer", "customer")
	require.NoError(t, err)
	program, err = st.CreateProgram(ctx, "P", "", vendor, customer, nil)
	require.NoError(t, err)
	_, v, err := st.CreateSpec(ctx, store.KindProfile, program, store.NewSpecVersion{Name: "p", Spec: []byte(`{}`), Digest: "sha256:p"})
	require.NoError(t, err)
	return program, v.ID
}

// storedRun keeps files as the artifacts of a new run of the program.
func storedRun(t testing.TB, st *store.Store, program, profile int64, files map[string][]byte) int64 {
	t.Helper()
	ctx := context.Background()
	runID, err := st.CreateRun(ctx, store.NewRun{ProgramID: program, Kind: "imported", ProfileVersionID: profile})
	require.NoError(t, err)
	c := &sshrun.Collection{}
	for name, data := range files {
		c.Files = append(c.Files, sshrun.File{Name: name, Size: int64(len(data)), SHA256: sha256Hex(data), Data: data})
	}
	require.NoError(t, storeFiles(ctx, st, runID, c))
	return runID
}

// A stored run folder is read back from the artifact store as the
// collected one is, each file streamed, and a message about a file names
// it by its path in the run's folder.
func TestStoredFolderReadsAsCollected(t *testing.T) {
	t.Parallel()
	st := store.New(storetest.NewPool(t))
	ctx := context.Background()
	good := inferenceFolder(t, requestLines(t,
		wire.RequestRecord{ID: 1, Sent: 1e6, FirstToken: 5e6, Done: 9e6, OutputTokens: 3},
		wire.RequestRecord{ID: 2, Sent: 2e6, FirstToken: 8e6, Done: 12e6, OutputTokens: 3},
		wire.RequestRecord{ID: 3, Sent: 3e6, FirstToken: 7e6, Done: 15e6, OutputTokens: 3}))
	program, profile := newProgram(t, st)
	runID := storedRun(t, st, program, profile, good)
	stored, err := StoredFiles(ctx, st, runID)
	require.NoError(t, err)
	fromStore, warnings, err := ReadFolder(stored, acceptance.ProfileSpec{}, "test")
	require.NoError(t, err)
	collected, collectedWarnings, err := ReadFolder(memFiles(good), acceptance.ProfileSpec{}, "test")
	require.NoError(t, err)
	require.Equal(t, collected, fromStore)
	require.Equal(t, collectedWarnings, warnings)
	var ttft []float64
	for _, m := range fromStore {
		if m.Metric == acceptance.MetricTTFT {
			ttft = m.Values
			require.Contains(t, m.Source.Field, wire.OutputDir+"/01-chat/rep-1/c=1/requests.jsonl")
		}
	}
	require.Equal(t, []float64{4, 6, 4}, ttft)

	bad := inferenceFolder(t, append(requestLines(t, wire.RequestRecord{ID: 1, Sent: 1e6, FirstToken: 5e6, Done: 9e6, OutputTokens: 3}), `{"t_sent":-1}`+"\n"...))
	stored, err = StoredFiles(ctx, st, storedRun(t, st, program, profile, bad))
	require.NoError(t, err)
	_, _, err = ReadFolder(stored, acceptance.ProfileSpec{}, "test")
	require.EqualError(t, err, "step chat: parse out/01-chat/rep-1/c=1/requests.jsonl: line 2: t_sent: negative time -1 ns")
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// A level whose records the probe continued in segments reads as the one
// file it would otherwise have been, the segments in order, for the
// measurements and the charts alike.
func TestSegmentedRecordsReadAsOne(t *testing.T) {
	t.Parallel()
	var recs []wire.RequestRecord
	for i := range 30 {
		sent := int64(i+1) * 100_000_000
		recs = append(recs, wire.RequestRecord{ID: int64(i + 1), Sent: sent, FirstToken: sent + int64(i+1)*1e6, Done: sent + 50e6, OutputTokens: 3})
	}
	whole := inferenceFolder(t, requestLines(t, recs...))
	split := inferenceFolder(t, requestLines(t, recs[:10]...))
	dir := wire.OutputDir + "/01-chat/rep-1/c=1/"
	split[dir+"requests.0001.jsonl"] = requestLines(t, recs[10:25]...)
	split[dir+"requests.0002.jsonl"] = requestLines(t, recs[25:]...)
	split[dir+"requests.0004.jsonl"] = requestLines(t, recs[:1]...) // after a gap: not a segment of this file

	a, _, err := ReadFolder(memFiles(whole), acceptance.ProfileSpec{}, "test")
	require.NoError(t, err)
	b, _, err := ReadFolder(memFiles(split), acceptance.ProfileSpec{}, "test")
	require.NoError(t, err)
	require.Len(t, b, len(a))
	for i := range a {
		require.Equal(t, a[i].Values, b[i].Values, a[i].Metric)
		require.Equal(t, a[i].SentIndex, b[i].SentIndex, a[i].Metric)
		if len(b[i].Values) > 1 {
			require.Contains(t, b[i].Source.Field, "requests.jsonl (and its 2 further segments)")
		}
	}

	steps, _ := readStepResults(memFiles(split))
	rec := readRecords(context.Background(), memFiles(split), steps)
	require.Equal(t, int64(30), rec.Requests())
}
