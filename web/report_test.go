package web

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/htmltest"
)

// renderReport renders the standalone report and parses it as a browser would.
func renderReport(t *testing.T, d ReportData) *html.Node {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, Report(d).Render(context.Background(), &b))
	return htmltest.Parse(t, b.String())
}

// Every header field of the report shows its own value: each one is given
// a value no other field has, so a field printing another's is caught.
func TestReportHeaderFieldsByValue(t *testing.T) {
	t.Parallel()
	started := time.Date(2026, 12, 1, 17, 2, 3, 0, time.UTC)
	finished := started.Add(71 * time.Minute)
	baseline := int64(4141)
	d := ReportData{
		Run: store.Run{ID: 4242, Label: "label-L", ProfileName: "profile-P", ProfileVersion: 7, GateSetName: "gates-G", GateSetVersion: 3,
			HostName: "host-H", BaselineRunID: &baseline, State: "done", Reason: "reason-R", Emulated: true,
			StartedAt: &started, FinishedAt: &finished},
		Program:    "program-X",
		Vendor:     "vendor-V",
		Customer:   "customer-C",
		KeyID:      "SHA256:key-K",
		SignedAt:   "2026-12-01 18:13 UTC",
		StopLoss:   "stop-loss-S",
		Evaluation: &acceptance.Evaluation{Verdict: acceptance.Fail, Explanation: "explanation-E"},
	}
	doc := renderReport(t, d)
	for id, want := range map[string]string{
		"report-title":     "Run #4242 label-L",
		"report-program":   "program-X",
		"report-vendor":    "vendor-V",
		"report-customer":  "customer-C",
		"report-signed-at": "2026-12-01 18:13 UTC",
		"report-key":       "SHA256:key-K",
		"report-parties":   "program-X: vendor-V (vendor) × customer-C (customer). Signed 2026-12-01 18:13 UTC by key SHA256:key-K.",
		"report-profile":   "profile-P v7",
		"report-gate-set":  "gates-G v3",
		"report-host":      "host-H",
		"report-baseline":  "run #4141",
		"report-started":   "2026-12-01 17:02:03 UTC",
		"report-finished":  "2026-12-01 18:13:03 UTC",
		"report-state":     "done reason-R",
		"report-stop-loss": "Stop-loss: stop-loss-S",
		"report-verdict":   "FAIL",
		"report-emulated":  "Emulated: measured against Accord's inference emulator, not a GPU inference server.",
	} {
		n := htmltest.ByID(doc, id)
		require.NotNil(t, n, "the report has no #%s", id)
		require.Equal(t, want, htmltest.Text(n), "#%s", id)
	}
	title := htmltest.All(doc, func(n *html.Node) bool { return n.Data == "title" })
	require.NotEmpty(t, title)
	require.Equal(t, "Accord report: run #4242", htmltest.Text(title[0]))

	// Without a baseline, start or end, those fields are left out, not blank.
	d.Run.BaselineRunID, d.Run.StartedAt, d.Run.FinishedAt, d.Run.Emulated = nil, nil, nil, false
	doc = renderReport(t, d)
	for _, id := range []string{"report-baseline", "report-started", "report-finished", "report-emulated"} {
		require.Nil(t, htmltest.ByID(doc, id), "#%s shown without a value", id)
	}
}
