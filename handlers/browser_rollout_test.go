package handlers

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/web/browsertest"
)

// The vendor's approver and the customer's approver, each in their own
// browser, approve a stage in turn; it advances only after the second.
func TestBrowserTwoSidesApproveAStage(t *testing.T) {
	t.Parallel()
	rb := setupRollout(t)
	rb.addStages(t, "lab-acceptance", "pilot-5pct")
	rb.judgedRun(t, "PASS")
	base := rb.ts.URL
	vendor := browsertest.New(t)
	customer := browsertest.New(t)
	signInBrowser(vendor, base, "va@vendor.example")
	signInBrowser(customer, base, "ca@customer.example")

	// The vendor's approver approves first: the stage still waits.
	vendor.Do(chromedp.Navigate(base+rb.url("/rollout")), chromedp.WaitVisible(chromedp.ID("stage-lab-acceptance")))
	require.Equal(t, "awaiting approval", vendor.Text("#stage-state-lab-acceptance"))
	require.Equal(t, "pass", vendor.Text("#gates-lab-acceptance"))
	// The approval is confirmed on a page of its own, with a comment.
	vendor.ClickAndWait("#approve-lab-acceptance")
	vendor.Do(chromedp.WaitVisible(chromedp.ID("confirm-approve")), chromedp.SendKeys(chromedp.ID("decision-comment"), "Lab numbers reviewed."))
	vendor.ClickAndWait("#confirm-approve")
	vendor.Do(chromedp.WaitVisible(chromedp.ID("awaiting-lab-acceptance")))
	require.Contains(t, vendor.Text(".flash.ok"), "Waiting for the customer side")
	require.Equal(t, "awaiting approval", vendor.Text("#stage-state-lab-acceptance"))
	require.Contains(t, vendor.Text("#approvals-lab-acceptance"), "Comment: Lab numbers reviewed.")
	require.Contains(t, vendor.Text("#awaiting-lab-acceptance"), "customer side")
	vendor.Screenshot("rollout-vendor-approved")

	// The customer's approver finds it on their home page and approves.
	customer.Do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("awaiting")))
	require.Contains(t, customer.Text("#awaiting"), "lab-acceptance")
	customer.ClickAndWait("#awaiting a")
	customer.Do(chromedp.WaitVisible(chromedp.ID("confirm-approve")))
	require.Contains(t, customer.Text("#confirm-gates"), "va@vendor.example")
	customer.ClickAndWait("#confirm-approve")
	customer.Do(chromedp.WaitVisible(chromedp.ID("stage-pilot-5pct")))
	require.Contains(t, customer.Text(".flash.ok"), "approved by both sides")
	require.Equal(t, "approved", customer.Text("#stage-state-lab-acceptance"))
	require.Equal(t, "awaiting approval", customer.Text("#stage-state-pilot-5pct"))
	customer.Screenshot("rollout-both-approved")

	// The vendor's page shows the stage advanced too.
	vendor.Do(chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("stage-pilot-5pct")))
	require.Equal(t, "approved", vendor.Text("#stage-state-lab-acceptance"))
	require.Equal(t, "awaiting approval", vendor.Text("#stage-state-pilot-5pct"))
	require.Contains(t, vendor.Text("#approvals-lab-acceptance"), "ca@customer.example")

	// The decision log shows both, verified.
	vendor.Do(chromedp.Navigate(base+rb.url("/decisions")), chromedp.WaitVisible(chromedp.ID("chain-status")))
	require.Equal(t, "verified", vendor.Text("#chain-verdict"))
	require.Contains(t, vendor.Text("#decision-2"), "ca@customer.example")

	for _, br := range []*browsertest.Browser{vendor, customer} {
		require.Empty(t, br.Problems())
		require.Empty(t, br.ForeignRequests(base))
	}
}
