package handlers

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/web/browsertest"
)

// signInBrowser signs in through the real form.
func signInBrowser(br *browsertest.Browser, base, email string) {
	br.Do(
		chromedp.Navigate(base+"/signin"),
		chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), testPassword),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.CSS("form[action='/signout']")),
	)
}

// An engineer creates a profile from a template, edits it, and sees
// version 2 and the difference.
func TestBrowserProfileFromTemplateEditAndDiff(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	br := browsertest.New(t)
	signInBrowser(br, pb.ts.URL, "eng@vendor.example")

	br.Do(chromedp.Navigate(pb.ts.URL+pb.url("/profiles")), chromedp.WaitVisible(chromedp.ID("no-specs")))
	br.ClickAndWait("#template-kv-cache-lookup")
	br.ClickAndWait("#save-spec")
	br.Do(chromedp.WaitVisible(chromedp.ID("spec-version")))
	require.Equal(t, "v1", br.Text("#spec-version"))
	br.Screenshot("profile-v1")

	br.ClickAndWait("#edit-spec")
	br.Do(
		chromedp.WaitVisible(chromedp.ID("spec-form")),
		chromedp.SetValue(chromedp.CSS(`input[name="steps[0].fio.iodepth"]`), "64"),
		chromedp.SetValue(chromedp.ID("note"), "deeper queue"),
	)
	br.ClickAndWait("#save-spec")
	br.Do(chromedp.WaitVisible(chromedp.ID("spec-version")))
	require.Equal(t, "v2", br.Text("#spec-version"))
	br.ClickAndWait("#show-diff")
	br.Do(chromedp.WaitVisible(chromedp.ID("diff-changes")))
	changes := br.Text("#diff-changes")
	require.Contains(t, changes, "steps[0].fio.iodepth")
	require.Contains(t, changes, "32")
	require.Contains(t, changes, "64")
	require.Regexp(t, `(?m)^\+\s+iodepth: 64$`, br.Text("#diff-unified"))
	require.Regexp(t, `(?m)^-\s+iodepth: 32$`, br.Text("#diff-unified"))
	br.Screenshot("profile-diff")

	// The YAML tab switches without a reload.
	br.Do(chromedp.Navigate(pb.ts.URL+pb.url("/profiles")), chromedp.WaitVisible(chromedp.ID("spec-list")))
	time.Sleep(200 * time.Millisecond)
	require.Empty(t, br.Problems())
	require.Empty(t, br.ForeignRequests(pb.ts.URL))
}
