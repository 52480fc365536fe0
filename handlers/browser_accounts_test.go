package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/browsertest"
)

// A user signs in, sees only their own programs, signs out, and the back
// button shows nothing private.
func TestBrowserSignInOwnProgramsSignOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	vendor := b.createOrg(t, "Vendor", "vendor")
	customer := b.createOrg(t, "Customer", "customer")
	mine, err := b.store.CreateProgram(ctx, "Our joint program", "", vendor, customer, nil)
	require.NoError(t, err)
	_, err = b.store.CreateProgram(ctx, "Somebody else's program", "", vendor, customer, nil)
	require.NoError(t, err)
	uid := b.createUser(t, "eve@vendor.example", &vendor, false)
	_, err = b.store.SetMember(ctx, mine, uid, store.RoleEngineer)
	require.NoError(t, err)

	br := browsertest.New(t)
	signInBrowser(br, b.ts.URL, "eve@vendor.example")
	br.Do(chromedp.Navigate(b.ts.URL+"/programs"), chromedp.WaitVisible(chromedp.ID("programs")))
	list := br.Text("#programs")
	require.Contains(t, list, "Our joint program")
	require.NotContains(t, list, "Somebody else's program")
	br.Screenshot("programs-signed-in")

	br.Do(chromedp.Click(chromedp.CSS("form[action='/signout'] button")), chromedp.WaitVisible(chromedp.ID("signin-submit")))
	// Back: the private page is not shown from the cache; it asks to sign in.
	br.Do(chromedp.NavigateBack())
	time.Sleep(500 * time.Millisecond)
	br.Do(chromedp.WaitReady(chromedp.CSS("body")))
	body := br.Text("body")
	require.NotContains(t, body, "Our joint program", "nothing private after signing out and going back")
	require.True(t, strings.Contains(body, "Sign in"), body)
	time.Sleep(200 * time.Millisecond)
	require.Empty(t, br.Problems())
	require.Empty(t, br.ForeignRequests(b.ts.URL))
}
