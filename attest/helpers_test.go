package attest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var testTime = time.Date(2026, 3, 14, 9, 26, 53, 589793000, time.UTC)

// testArtifacts are a run's raw outputs as the artifact store holds them.
func testArtifacts() map[string][]byte {
	return map[string][]byte{
		"fio/kv-cache-4k.json":   []byte(`{"fio version":"fio-3.33","jobs":[{"jobname":"kv","read":{"iops":412345.6}}]}`),
		"inference/requests.csv": []byte("id,intended_ns,ttft_ms,e2e_ms\n1,0,180.2,912.7\n2,100000000,175.9,899.1\n"),
		"probe/events.jsonl":     []byte(`{"seq":1,"type":"step_started"}` + "\n" + `{"seq":2,"type":"step_finished"}` + "\n"),
		"status.json":            []byte(`{"state":"finished"}`),
	}
}

// testProfileName has what JSON escapes and what ends a JSON object, which
// VERIFY.md's shell extraction of the digest must get past.
const testProfileName = `kv-cache "lookups" {4 KiB} \ à`

// testProfile and testGateSet stand for the canonical JSON of the run's
// profile and gate set versions.
var (
	testProfile = []byte(`{"name":"kv-cache-lookups","steps":[]}`)
	testGateSet = []byte(`{"criteria":[],"name":"rollout-gates"}`)
)

var testFacts = []byte(`{"hostname":"lab-gpu-07","kernel":"6.1.0-18-amd64","nvme":[{"model":"Array X"}]}`)

func testEvidence(runID string) RunEvidence {
	var arts []ArtifactDigest
	for name, data := range testArtifacts() {
		arts = append(arts, ArtifactDigest{Name: name, SHA256: sha256Hex(data), Size: int64(len(data))})
	}
	return RunEvidence{
		RunID:         runID,
		URL:           "https://accord.example/runs/" + runID,
		Artifacts:     arts,
		Profile:       Ref{Name: testProfileName, Version: 3, SHA256: sha256Hex(testProfile)},
		GateSet:       Ref{Name: "rollout-gates", Version: 2, SHA256: sha256Hex(testGateSet)},
		BaselineRunID: "41",
		Host:          "lab-gpu-07",
		HostFacts:     testFacts,
		Metrics:       json.RawMessage(`{"ttft":{"p99":{"value":1843.2,"unit":"ms","n":4000}}}`),
		Verdict:       VerdictFail,
		Verdicts: []Verdict{
			{Criterion: "ttft-p99", Verdict: VerdictPass, Explanation: "p99 TTFT 1843 ms <= 2000 ms (upper 95% bound 1911 ms, n=4000)"},
			{Criterion: "throughput-uplift", Verdict: VerdictFail, Explanation: "uplift +12% [+9%, +15%], needs >= +25%"},
			{Criterion: "itl-p99", Step: "concurrency-64", Verdict: VerdictInconclusive, Explanation: "n=12 < 30"},
		},
		EngineVersion: "accord-test",
		Started:       testTime,
		Finished:      testTime.Add(42 * time.Minute),
	}
}

// testInput is a complete bundle input for runID signed by s; decisions
// nil stands for a program without decisions (an empty log).
func testInput(t testing.TB, s *Signer, keys []PublicKey, runID string, decisions []byte) BundleInput {
	t.Helper()
	atts, err := SignRun(s, testEvidence(runID))
	require.NoError(t, err)
	if decisions == nil {
		decisions = emptyLog(t, s, testTime.Add(time.Hour))
	}
	in := BundleInput{
		RunID:        runID,
		Title:        "KV-cache lookups on Array X <vs> local NVMe",
		Created:      testTime.Add(time.Hour),
		ReportHTML:   []byte("<!doctype html><title>Run " + runID + "</title><p>FAIL</p>\n"),
		Summary:      json.RawMessage(`{"run":"` + runID + `","verdict":"FAIL"}`),
		Facts:        testFacts,
		Evaluation:   json.RawMessage(`{"criteria":3,"verdict":"FAIL"}`),
		Decisions:    decisions,
		Attestations: atts,
		Keys:         keys,
		Profile:      testProfile,
		GateSet:      testGateSet,
	}
	first := true
	for name, data := range testArtifacts() {
		a := Artifact{Name: name, SHA256: sha256Hex(data)}
		if first { // one streamed through Open, the others as bytes
			d := data
			a.Size = int64(len(d))
			a.Open = func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(d)), nil }
			first = false
		} else {
			a.Data = data
		}
		in.Artifacts = append(in.Artifacts, a)
	}
	return in
}

// emptyLog is the decision log of a program without decisions, its
// checkpoint signed at `at`.
func emptyLog(t testing.TB, s *Signer, at time.Time) []byte {
	t.Helper()
	cp, err := SignCheckpoint(s, "program:17", nil, at)
	require.NoError(t, err)
	log, err := NewDecisionLog("program:17", nil, cp).Marshal()
	require.NoError(t, err)
	return log
}

func writeBundle(t testing.TB, s *Signer, in BundleInput) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := WriteBundle(context.Background(), &buf, s, in)
	require.NoError(t, err)
	return buf.Bytes()
}

// tarEntry is one file of a bundle, by its path under the top directory.
type tarEntry struct {
	Name string
	Data []byte
}

func readEntries(t *testing.T, bundle []byte) (string, []tarEntry) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(bundle))
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	var (
		top     string
		entries []tarEntry
	)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if hdr.Typeflag == tar.TypeDir {
			continue
		}
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		dir, rel, _ := strings.Cut(hdr.Name, "/")
		top = dir
		entries = append(entries, tarEntry{Name: rel, Data: data})
	}
	return top, entries
}

func packEntries(t *testing.T, top string, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: top + "/" + e.Name, Size: int64(len(e.Data)), Mode: 0o644, ModTime: testTime}))
		_, err := tw.Write(e.Data)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

// rewrite returns the bundle with change applied to its entries.
func rewrite(t *testing.T, bundle []byte, change func([]tarEntry) []tarEntry) []byte {
	t.Helper()
	top, entries := readEntries(t, bundle)
	return packEntries(t, top, change(entries))
}

// extract unpacks a bundle with the real tar into a new directory and
// returns the bundle's top directory.
func extract(t *testing.T, bundle []byte) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("tar", "xzf", "-", "-C", dir)
	cmd.Stdin = bytes.NewReader(bundle)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	tops, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, tops, 1)
	return filepath.Join(dir, tops[0].Name())
}

// pack packs an extracted bundle directory with the real tar.
func pack(t *testing.T, dir string) []byte {
	t.Helper()
	out, err := exec.Command("tar", "czf", "-", "-C", filepath.Dir(dir), filepath.Base(dir)).Output()
	require.NoError(t, err)
	return out
}

var fence = regexp.MustCompile("(?ms)^```([a-z-]+)\n(.*?)^```$")

// verifyBlocks returns VERIFY.md's fenced blocks of the given language.
func verifyBlocks(t *testing.T, dir, lang string) []string {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(dir, FileVerifyMD))
	require.NoError(t, err)
	var blocks []string
	for _, m := range fence.FindAllStringSubmatch(string(md), -1) {
		if m[1] == lang {
			blocks = append(blocks, m[2])
		}
	}
	require.NotEmpty(t, blocks, "VERIFY.md has no %s blocks", lang)
	return blocks
}

// runBlock runs one block of VERIFY.md verbatim with bash in dir.
func runBlock(dir, block string, env ...string) (string, error) {
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", block)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, out)
	}
	return string(out), nil
}

func requireTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Fatalf("%s is required for this test: %v", n, err)
		}
	}
}

// keyClock is the keyring's clock in tests: its keys are made a month
// before testTime, when the test runs and decisions happen.
func keyClock() time.Time { return testTime.Add(-30 * 24 * time.Hour) }
