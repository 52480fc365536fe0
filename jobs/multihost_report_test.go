package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/runners/probe/wire"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/htmltest"
)

// requireMultiHostBundle checks a judged multi-host run's signed report:
// the bundle verifies; its facts.json holds every host's facts, each the
// exact facts its probe took (the digest of the host's facts file among
// the artifacts, which the bundle carries too); the attested metrics and
// summary.json carry each host's own figures beside the combined ones;
// and the human report names every host, with its facts and figures.
func requireMultiHostBundle(t *testing.T, b *testBundle, runID int64) {
	t.Helper()
	ctx := context.Background()
	var rep store.RunReport
	require.Eventually(t, func() bool {
		var err error
		rep, err = b.store.RunLatestReport(ctx, runID)
		return err == nil
	}, 90*time.Second, 200*time.Millisecond, "the run gets a signed report")
	rc, err := b.store.Artifacts().Open(ctx, rep.BundleSHA256)
	require.NoError(t, err)
	bundle, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	keys, err := b.deps.Keyring.KeySet()
	require.NoError(t, err)
	verified, err := attest.VerifyBundle(ctx, bytes.NewReader(bundle), keys)
	require.NoError(t, err)
	require.True(t, verified.Manifest.Trusted)
	artifacts := map[string][]byte{}
	imp, err := attest.ImportBundle(ctx, bytes.NewReader(bundle), keys, func(_ context.Context, name string, _ int64, r io.Reader) error {
		data, err := io.ReadAll(r)
		artifacts[name] = data
		return err
	})
	require.NoError(t, err)

	hosts, err := b.store.RunHosts(ctx, runID)
	require.NoError(t, err)
	stored, err := b.store.RunHostFacts(ctx, runID)
	require.NoError(t, err)

	// facts.json: every host, its facts those its probe took.
	var doc report.HostFactsDocument
	require.NoError(t, json.Unmarshal(imp.Facts, &doc))
	require.Len(t, doc.Hosts, len(hosts))
	for i, h := range hosts {
		e := doc.Hosts[i]
		require.Equal(t, h.HostName, e.Host)
		require.Equal(t, h.Role, e.Role)
		require.Equal(t, h.Ordinal, e.Ordinal)
		require.True(t, strings.HasPrefix(e.Artifact, "hosts/") && strings.HasSuffix(e.Artifact, "/"+wire.FactsFile), e.Artifact)
		raw, ok := artifacts[e.Artifact]
		require.True(t, ok, "the host's facts file %s is in the bundle", e.Artifact)
		sum := sha256.Sum256(raw)
		require.Equal(t, hex.EncodeToString(sum[:]), e.SHA256, "facts.json names the digest of the file the host's facts were read from")
		require.Equal(t, "sha256:"+e.SHA256, stored[h.HostID].Digest)
		require.JSONEq(t, string(raw), string(e.Facts), "the host's facts as its probe took them")
	}
	// The statement attests this facts.json.
	var stmt struct{ Predicate attest.Benchmark }
	for _, s := range imp.Statements {
		if s.PredicateType == attest.BenchmarkPredicateType {
			require.NoError(t, json.Unmarshal(s.Predicate, &stmt.Predicate))
		}
	}
	require.NotEmpty(t, stmt.Predicate.RunID, "the benchmark statement")
	sum := sha256.Sum256(imp.Facts)
	require.Equal(t, hex.EncodeToString(sum[:]), stmt.Predicate.HostFacts)
	for _, h := range hosts {
		require.Contains(t, stmt.Predicate.Host, h.HostName+" ("+h.Role+")")
	}

	// The signed figures: the hosts combined, then each host's own.
	own, err := b.store.RunHostMeasurementSummaries(ctx, runID)
	require.NoError(t, err)
	combined, err := b.store.RunMeasurementSummaries(ctx, runID)
	require.NoError(t, err)
	rows, err := json.Marshal(stmt.Predicate.Metrics)
	require.NoError(t, err)
	var metrics []struct {
		Metric     string        `json:"metric"`
		Step       string        `json:"step"`
		Repetition int           `json:"repetition"`
		Host       string        `json:"host"`
		Summary    store.Summary `json:"summary"`
	}
	require.NoError(t, json.Unmarshal(rows, &metrics))
	require.Len(t, metrics, len(combined)+len(own))
	perHost := map[string]int{}
	for _, m := range metrics {
		perHost[m.Host]++
	}
	require.Equal(t, len(combined), perHost[""])
	for _, h := range hosts {
		require.Positive(t, perHost[h.HostName], "host %s's own figures are signed", h.HostName)
	}
	for _, m := range own {
		found := false
		for _, s := range metrics {
			found = found || (s.Host == m.Host && s.Metric == m.Metric && s.Step == m.Step && s.Repetition == m.Repetition && s.Summary.P99 == m.Summary.P99 && s.Summary.N == m.Summary.N)
		}
		require.True(t, found, "host %s's %s of step %s is in the signed metrics", m.Host, m.Metric, m.Step)
	}
	var summary struct {
		Hosts []struct {
			Host, Role    string
			FactsArtifact string `json:"facts_artifact"`
		} `json:"hosts"`
		Metrics []json.RawMessage `json:"metrics"`
	}
	require.NoError(t, json.Unmarshal(imp.Summary, &summary))
	require.Len(t, summary.Hosts, len(hosts))
	require.Len(t, summary.Metrics, len(metrics))

	// The human report: every host's section with its facts and figures.
	page := htmltest.Parse(t, string(imp.ReportHTML))
	require.Contains(t, htmltest.Text(htmltest.ByID(page, "report-host")), "3 hosts: ")
	facts := htmltest.ByID(page, "report-host-facts")
	require.NotNil(t, facts)
	head := htmltest.All(facts, func(n *html.Node) bool { return n.Data == "th" })
	require.Len(t, head, 1+len(hosts), "a column per host")
	require.Contains(t, htmltest.Text(facts), "Kernel")
	for _, h := range hosts {
		table := htmltest.ByID(page, "report-host-measurements-"+strconv.Itoa(h.Ordinal))
		require.NotNil(t, table, "host %s's figures", h.HostName)
		require.Len(t, htmltest.All(table, func(n *html.Node) bool { return n.Data == "tr" && n.Parent != nil && n.Parent.Data == "tbody" }), perHost[h.HostName])
	}
	require.Nil(t, htmltest.ByID(page, "report-facts"), "no one host's facts stand for the run")
}
