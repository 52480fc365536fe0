package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
	"github.com/accordlab/accord/web/htmltest"
)

// Tests of what a vendor and a customer new to Accord meet in their first
// hour (issue 21): pages that say where things stand and offer only what
// opens.

// pageDoc gets a page as the client and parses it.
func (b *testBundle) pageDoc(t *testing.T, c *http.Client, path string) *html.Node {
	t.Helper()
	res, body := b.get(t, c, path)
	require.Equal(t, http.StatusOK, res.StatusCode, path)
	return htmltest.Parse(t, body)
}

// linksTo lists the page's links whose href is path.
func linksTo(doc *html.Node, path string) []*html.Node {
	return htmltest.All(doc, func(n *html.Node) bool { return n.Data == "a" && htmltest.Attr(n, "href") == path })
}

func TestAuditTabOnlyForThoseWhoMayOpenIt(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	audit := pb.url("/audit")
	for _, c := range []*http.Client{pb.engineer, pb.viewer} {
		require.Empty(t, linksTo(pb.pageDoc(t, c, pb.url("/")), audit), "no tab that answers 403")
		res, _ := pb.get(t, c, audit)
		require.Equal(t, http.StatusForbidden, res.StatusCode)
	}
	require.Len(t, linksTo(pb.pageDoc(t, pb.owner, pb.url("/")), audit), 1, "the owner has the tab")
	res, _ := pb.get(t, pb.owner, audit)
	require.Equal(t, http.StatusOK, res.StatusCode)
}

func TestBreadcrumbsReadWithSpacedSeparators(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	doc := pb.pageDoc(t, pb.engineer, pb.url("/gatesets/new"))
	crumbs := htmltest.All(doc, func(n *html.Node) bool { return htmltest.Attr(n, "class") == "crumbs" })
	require.Len(t, crumbs, 1)
	require.Equal(t, "Programs / Program / Gate sets / New gate set", htmltest.Text(crumbs[0]))
}

func TestSignInPageListsDemoAccountsInDevMode(t *testing.T) {
	t.Parallel()
	demo := &web.DemoSignIn{Password: "demo-pass", Accounts: []web.DemoAccount{
		{Email: "vendor.engineer@accord.demo", Name: "Vera", Role: "engineer", Org: "Lumenfold Storage Ltd. (demo)"},
	}}
	b := setup(t, setupOpts{dev: true, demo: demo})
	doc := b.pageDoc(t, b.client(t), "/signin")
	list := htmltest.ByID(doc, "demo-accounts")
	require.NotNil(t, list)
	require.Equal(t, [][]string{{"Account", "Role", "Organisation", ""}, {"vendor.engineer@accord.demo Vera", "engineer", "Lumenfold Storage Ltd. (demo)", "Use"}},
		htmltest.Rows(list))
	require.Equal(t, "demo-pass", htmltest.Text(htmltest.ByID(doc, "demo-password")))

	// Not in production, even when the demo is passed by mistake.
	prod := setup(t, setupOpts{demo: demo})
	require.Nil(t, htmltest.ByID(prod.pageDoc(t, prod.client(t), "/signin"), "demo-accounts"))
}

// "Last check" agrees with the facts: a run that took facts after the last
// check (or with none) reached the host, and the page says so.
func TestHostLastCheckAgreesWithTheFactsTime(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	host, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab-1", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key", PublicKey: "ssh-ed25519 AAAA test"})
	require.NoError(t, err)
	hostURL := pb.url(fmt.Sprintf("/hosts/%d", host))
	require.Equal(t, "never", htmltest.Text(htmltest.ByID(pb.pageDoc(t, pb.viewer, hostURL), "last-check")))

	run := pb.createRunRow(t, host)
	_, err = pb.store.AddHostFacts(ctx, host, &run, json.RawMessage(`{}`), "sha256:x")
	require.NoError(t, err)
	text := htmltest.Text(htmltest.ByID(pb.pageDoc(t, pb.viewer, hostURL), "last-check"))
	require.Regexp(t, fmt.Sprintf(`^ok \d{4}-\d\d-\d\d \d\d:\d\d facts taken by run #%d$`, run), text)
	list := htmltest.Rows(htmltest.ByID(pb.pageDoc(t, pb.viewer, pb.url("/hosts")), "hosts"))
	require.Regexp(t, fmt.Sprintf(`^ok .* facts taken by run #%d$`, run), list[1][4])

	// A check after the run is the newer news.
	require.NoError(t, pb.store.RecordHostCheck(ctx, host, true, "connected; probe amd64 ready; facts taken", nil))
	text = htmltest.Text(htmltest.ByID(pb.pageDoc(t, pb.viewer, hostURL), "last-check"))
	require.Regexp(t, `^ok \S+ \S+ connected; probe amd64 ready; facts taken$`, text)
}

// "Check host" leaves the page polling for the result; it refreshes itself
// once the check is done.
func TestHostPageRefreshesWhenTheCheckIsDone(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	host, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab-1", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key"})
	require.NoError(t, err)
	_, err = pb.pool.Exec(ctx, `UPDATE hosts SET host_key = 'ssh-ed25519 AAAA', host_key_sha256 = 'SHA256:x', host_key_pinned_at = now() WHERE id = $1`, host)
	require.NoError(t, err)
	hostURL := pb.url(fmt.Sprintf("/hosts/%d", host))
	res := pb.postForm(t, pb.engineer, hostURL+"/check", nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	waiting := res.Header.Get("Location")
	require.Regexp(t, `\?checking=\d+$`, waiting)
	queued := htmltest.ByID(pb.pageDoc(t, pb.engineer, waiting), "check-queued")
	require.NotNil(t, queued, "the page says the check is queued")
	poll := htmltest.Attr(queued, "hx-get")
	require.Equal(t, "every 2s", htmltest.Attr(queued, "hx-trigger"))

	res, _ = pb.get(t, pb.viewer, poll)
	require.Equal(t, http.StatusNoContent, res.StatusCode, "not done yet")
	require.Empty(t, res.Header.Get("HX-Refresh"))

	require.NoError(t, pb.store.RecordHostCheck(ctx, host, true, "connected", nil))
	res, _ = pb.get(t, pb.viewer, poll)
	require.Equal(t, 286, res.StatusCode, "polling stops")
	require.Equal(t, "true", res.Header.Get("HX-Refresh"), "the page refreshes")
	require.Nil(t, htmltest.ByID(pb.pageDoc(t, pb.engineer, waiting), "check-queued"), "the refreshed page polls no more")
}

// createRunRow inserts a queued run of a new profile version on the host.
func (pb *programBundle) createRunRow(t *testing.T, host int64) int64 {
	t.Helper()
	id, err := pb.store.CreateRun(context.Background(), store.NewRun{ProgramID: pb.programID, ProfileVersionID: pb.profileVersionID(t), HostID: host})
	require.NoError(t, err)
	return id
}

// The host page's Copy button copies the key line to install; a host
// whose key is not one (none was generated) has no button.
func TestHostCopyButtonOnlyForAKeyLine(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	ctx := context.Background()
	withKey, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab-1", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key", PublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL accord@lab-1"})
	require.NoError(t, err)
	placeholder, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: "lab-2", Address: "127.0.0.1", Port: 22, Username: "root", AuthMethod: "key", PublicKey: "(made elsewhere)"})
	require.NoError(t, err)
	doc := pb.pageDoc(t, pb.viewer, pb.url(fmt.Sprintf("/hosts/%d", withKey)))
	require.Equal(t, "#host-public-key", htmltest.Attr(htmltest.ByID(doc, "copy-public-key"), "data-copy"))
	require.Equal(t, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL accord@lab-1", htmltest.Text(htmltest.ByID(doc, "host-public-key")))
	require.Nil(t, htmltest.ByID(pb.pageDoc(t, pb.viewer, pb.url(fmt.Sprintf("/hosts/%d", placeholder))), "copy-public-key"))
}
