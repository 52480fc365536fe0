package handlers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/browsertest"
)

// A viewer opens the readiness matrix, sees the hosts' statuses in words,
// follows a failing cell to the host's checks with their evidence and fix,
// and opens the integration plan.
func TestBrowserReadinessMatrix(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	br := browsertest.New(t)
	signInBrowser(br, b.ts.URL, "view@customer.example")

	br.Do(chromedp.Navigate(b.ts.URL+b.url("/readiness")), chromedp.WaitVisible(chromedp.ID("readiness-matrix")))
	cell := func(host int64, check string) string {
		return strings.TrimSpace(br.Text(fmt.Sprintf(`[data-cell="%d/%s"]`, host, check)))
	}
	require.Equal(t, "FAIL", cell(b.failingHost, "storage.health"))
	require.Equal(t, "PASS", cell(b.rdmaHost, "network.rdma"))
	require.Equal(t, "WARN", cell(b.tcpHost, "network.mtu"))
	require.Equal(t, "n/a", cell(b.tcpHost, "network.rdma"))
	require.Contains(t, br.Text(fmt.Sprintf("#host-%d", b.freshHost)), "check the host first")
	require.Contains(t, br.Text(fmt.Sprintf(`[data-fit="%d/%d"]`, b.rdma.spec, b.rdmaHost)), "GO")
	require.Contains(t, br.Text(fmt.Sprintf(`[data-fit="%d/%d"]`, b.local.spec, b.failingHost)), "NO-GO")
	br.Screenshot("readiness-matrix")

	br.ClickAndWait(fmt.Sprintf(`[data-cell="%d/storage.health"] a`, b.failingHost))
	br.Do(chromedp.WaitVisible(chromedp.CSS(`[id="check-storage.health"]`)))
	health := br.Text(`[id="check-storage.health"]`)
	require.Contains(t, health, "FAIL")
	require.Contains(t, health, "How to fix:")
	require.Contains(t, health, "nvme smart-log /dev/nvme1 -o json")
	require.Contains(t, br.Text("#expectation"), "KV on local NVMe")
	require.Contains(t, br.Text("#blocking-failures"), "Controller health (SMART)")
	br.Screenshot("readiness-host")

	br.ClickAndWait("#matrix-link")
	br.ClickAndWait("#plan-link")
	br.Do(chromedp.WaitVisible(chromedp.ID("plan")))
	require.Contains(t, br.Text("#step-baseline"), "Baseline measurements")
	require.Contains(t, br.Text("#step-storage"), "FAIL")
	br.Screenshot("readiness-plan")

	time.Sleep(300 * time.Millisecond) // late console events
	require.Empty(t, br.Problems())
	require.Empty(t, br.ForeignRequests(b.ts.URL))
}

// The matrix's 19 columns are all in view at 1400 px (the page takes the
// window's width rather than main's 1240 px), with the emulated host's
// n/a cells; on a narrower window the matrix scrolls sideways and keeps
// the host column in view.
func TestBrowserReadinessMatrixIsNotClipped(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	emu := b.addEmulatedHost(t, "demo-lab", "failing-ssd")
	b.finishedRun(t, b.local, emu, store.RunDone)
	br := browsertest.New(t)
	signInBrowser(br, b.ts.URL, "view@customer.example")

	// clipped lists what lies outside the matrix's box or the window, or
	// overflows its own cell: "" when nothing is clipped.
	const clipped = `(() => {
		const t = document.querySelector('#readiness-matrix'), w = t.parentElement, box = w.getBoundingClientRect();
		const out = [];
		if (w.scrollWidth > w.clientWidth) out.push('matrix ' + w.scrollWidth + ' px wide in ' + w.clientWidth + ' px');
		if (box.right > window.innerWidth) out.push('matrix box ends at ' + box.right + ' px of ' + window.innerWidth);
		for (const c of t.querySelectorAll('th, td')) {
			const r = c.getBoundingClientRect();
			if (r.right > box.right + 0.5 || r.left < box.left - 0.5) out.push((c.dataset.cell || c.textContent.trim().slice(0, 20)) + ' outside the matrix');
			if (c.scrollWidth > c.clientWidth + 1) out.push((c.dataset.cell || c.textContent.trim().slice(0, 20)) + ' overflows its cell');
		}
		return out.slice(0, 5).join('; ');
	})()`
	br.Do(chromedp.EmulateViewport(1400, 900), chromedp.Navigate(b.ts.URL+b.url("/readiness")), chromedp.WaitVisible(chromedp.ID("readiness-matrix")))
	require.Empty(t, browsertest.Eval[string](br, clipped))
	require.Equal(t, 19, browsertest.Eval[int](br, `document.querySelectorAll('#readiness-matrix thead tr:nth-child(2) th').length`), "every check has its column")
	last := fmt.Sprintf(`[data-cell="%d/tools.nvme-cli"]`, emu)
	require.Equal(t, "n/a emulated", strings.Join(strings.Fields(br.Text(last)), " "))
	require.True(t, browsertest.Eval[bool](br, `(() => { const r = document.querySelector('`+last+`').getBoundingClientRect(); return r.width > 0 && r.right <= window.innerWidth; })()`),
		"the last column is on screen")
	require.Contains(t, br.Text("#go-no-go"), "GO on 2 of 5 hosts")
	br.Screenshot("readiness-matrix-1400")

	// 1024 px: the matrix scrolls inside its box; scrolled to its end, the
	// host names are still in view.
	br.Do(chromedp.EmulateViewport(1024, 900), chromedp.Navigate(b.ts.URL+b.url("/readiness")), chromedp.WaitVisible(chromedp.ID("readiness-matrix")))
	require.True(t, browsertest.Eval[bool](br, `(() => { const w = document.querySelector('#readiness-matrix').parentElement; return w.scrollWidth > w.clientWidth && w.getBoundingClientRect().right <= window.innerWidth; })()`),
		"narrower: the matrix scrolls within the page")
	require.True(t, browsertest.Eval[bool](br, `(() => {
		const w = document.querySelector('#readiness-matrix').parentElement;
		w.scrollLeft = w.scrollWidth;
		const host = document.querySelector('#host-`+fmt.Sprint(emu)+` th').getBoundingClientRect();
		return w.scrollLeft > 0 && Math.abs(host.left - w.getBoundingClientRect().left) < 2;
	})()`), "the host column stays in view")
	br.Screenshot("readiness-matrix-1024-scrolled")
	time.Sleep(300 * time.Millisecond) // late console events
	require.Empty(t, br.Problems())
}
