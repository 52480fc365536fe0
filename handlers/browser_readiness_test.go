package handlers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

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
	require.Contains(t, br.Text(fmt.Sprintf(`[data-fit="%d/%d"]`, b.rdma.spec, b.rdmaHost)), "ready")
	require.Contains(t, br.Text(fmt.Sprintf(`[data-fit="%d/%d"]`, b.local.spec, b.failingHost)), "not ready")
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
