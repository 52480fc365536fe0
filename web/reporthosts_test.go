package web

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/htmltest"
)

// A multi-host run's report names every host on its host line, lays the
// hosts' facts side by side with the ones that differ highlighted (and
// says which host kept none), and shows each host's own figures; no one
// host's facts stand for the run. (The facts here are hand-made: only
// the kernel, the fact that differs.)
func TestReportOfAMultiHostRun(t *testing.T) {
	t.Parallel()
	facts := func(kernel string) *store.HostFacts {
		return &store.HostFacts{Facts: []byte(`{"kernel":{"release":{"value":"` + kernel + `"},"machine":{"value":"x86_64"}}}`), Digest: "sha256:" + kernel}
	}
	rows := func(p99 float64) []store.MeasurementRow {
		return []store.MeasurementRow{{Metric: acceptance.MetricReadCLat, Step: "read", Repetition: 1, Summary: store.Summary{N: 100, P50: p99 / 2, P99: p99}}}
	}
	c := report.Contents{Run: store.Run{ID: 9, HostName: "lab-a"}, Program: "P", Vendor: "V", Customer: "C",
		HostFacts: facts("6.1.0"), // ignored: a multi-host run's facts are its hosts'
		Hosts: []report.HostContents{
			{Ordinal: 0, Role: "readers", Name: "lab-a", Facts: facts("6.1.0"), FactsArtifact: "hosts/00-lab-a/facts.json", Measurements: rows(80)},
			{Ordinal: 1, Role: "readers", Name: "lab-b", Facts: facts("6.8.0"), FactsArtifact: "hosts/01-lab-b/facts.json", Measurements: rows(95)},
			{Ordinal: 2, Role: "writer", Name: "lab-c"},
		}}
	var out bytes.Buffer
	require.NoError(t, RenderReport(context.Background(), &out, c))
	page := htmltest.Parse(t, out.String())
	require.Equal(t, "3 hosts: lab-a (readers), lab-b (readers), lab-c (writer)", htmltest.Text(htmltest.ByID(page, "report-host")))
	require.Nil(t, htmltest.ByID(page, "report-facts"))
	table := htmltest.ByID(page, "report-host-facts")
	require.NotNil(t, table)
	var kernel *html.Node
	for _, tr := range htmltest.All(table, func(n *html.Node) bool { return n.Data == "tr" }) {
		if cells := htmltest.All(tr, func(n *html.Node) bool { return n.Data == "td" }); len(cells) > 0 && htmltest.Text(cells[0]) == "Kernel" {
			kernel = tr
		}
	}
	require.NotNil(t, kernel)
	require.Equal(t, "differs", htmltest.Attr(kernel, "class"))
	require.Contains(t, htmltest.Text(kernel), "6.8.0 x86_64")
	require.Contains(t, htmltest.Text(table), "hosts/01-lab-b/facts.json sha256:6.8.0")
	require.Contains(t, htmltest.Text(table), "not kept")
	b := htmltest.ByID(page, "report-host-measurements-1")
	require.Contains(t, htmltest.Text(b), "95")
	require.NotNil(t, htmltest.ByID(page, "report-host-2"))
	require.Nil(t, htmltest.ByID(page, "report-host-measurements-2"))
	require.Equal(t, 1, strings.Count(out.String(), "No figures of its own were kept."), "lab-c's section says it has none")
}
