package web

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/browsertest"
)

// The report opened from disk in Chromium: it fetches nothing and runs no
// script, draws its five charts, and printed on A4 (print media, the
// printable width) nothing is wider than the page, charts and table rows
// are kept whole, and Chromium makes a PDF of it.
func TestReportOpensOfflineAndPrints(t *testing.T) {
	t.Parallel()
	sr := newSampleRuns()
	baselineID, candMs, baseMs, cand, base := sr.baselineID, sr.candMs, sr.baseMs, sr.cand, sr.base
	var out bytes.Buffer
	require.NoError(t, RenderReport(context.Background(), &out, report.Contents{
		Run: store.Run{ID: 42, BaselineRunID: &baselineID, ProfileName: "kv", GateSetName: "gates"}, Program: "P", Vendor: "V", Customer: "C",
		Measurements: rowsOf(t, candMs), Charts: &cand, ProfileYAML: "name: kv\n",
		Limits:   []report.Limit{{Metric: acceptance.MetricTTFT, Statistic: "p99", Comparator: acceptance.LessOrEqual, Value: 2000, Label: "p99 TTFT ≤ 2000 ms"}},
		Baseline: &report.BaselineContents{RunID: baselineID, Measurements: rowsOf(t, baseMs), Charts: &base},
	}))
	path := filepath.Join(t.TempDir(), "report.html")
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o644))

	b := browsertest.New(t)
	b.Do(chromedp.Navigate("file://" + path))
	require.Equal(t, []string{"file://" + path}, b.Requests(), "the report fetches nothing")
	require.Empty(t, b.Problems())
	require.Equal(t, 5, browsertest.Eval[int](b, `document.querySelectorAll("figure svg").length`))
	require.Equal(t, 0, browsertest.Eval[int](b, `document.scripts.length`))

	// A4 less the @page margins is 186 mm wide, 703 CSS pixels.
	_, err := chromedp.Call(b.Ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: "print"})
	require.NoError(t, err)
	_, err = chromedp.Call(b.Ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 703, Height: 1000, DeviceScaleFactor: 1})
	require.NoError(t, err)
	require.True(t, browsertest.Eval[bool](b, `matchMedia("print").matches`))
	require.LessOrEqual(t, browsertest.Eval[int](b, `document.documentElement.scrollWidth`), 703, "nothing is wider than the printed page")
	require.Equal(t, 0, browsertest.Eval[int](b, `[...document.querySelectorAll("figure svg")].filter(s => s.getBoundingClientRect().right > 703).length`))
	require.Equal(t, "avoid", browsertest.Eval[string](b, `getComputedStyle(document.querySelector("figure")).breakInside`))
	require.Equal(t, "avoid", browsertest.Eval[string](b, `getComputedStyle(document.querySelector("tbody tr")).breakInside`))

	preferCSS := true
	pdf, err := chromedp.Call(b.Ctx, page.PrintToPDF, page.PrintToPDFParams{PreferCSSPageSize: &preferCSS})
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(pdf.Data, []byte("%PDF-")), "a PDF")
	require.Greater(t, len(pdf.Data), 20_000)
	dir := browsertest.ArtifactsDir()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "report-print.pdf"), pdf.Data, 0o644), "kept for a look")
}
