package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/store"
)

// The attacks of issue 16, each reproduced against the real server and
// PostgreSQL and refused. (The bundle bomb runs the server as a process of
// its own: attack_bundle_bomb_test.go in package main.)

// An admin disabled an account; its API token stopped answering, and came
// back when the account was enabled again. Disabling now revokes it.
func TestAttackReEnabledAccountBringsItsAPITokenBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	vendor := b.createOrg(t, "V", "vendor")
	uid := b.createUser(t, "eng@v.example", &vendor, false)
	b.createUser(t, "admin@v.example", nil, true)
	token := b.createTokenViaUI(t, b.signIn(t, "eng@v.example"), "read", "run")
	status, _ := b.apiGet(t, token, "/api/v1/programs")
	require.Equal(t, http.StatusOK, status)

	adm := b.signIn(t, "admin@v.example")
	res := b.postForm(t, adm, fmt.Sprintf("/admin/users/%d/disable", uid), nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	status, _ = b.apiGet(t, token, "/api/v1/programs")
	require.Equal(t, http.StatusUnauthorized, status, "disabled")

	res = b.postForm(t, adm, fmt.Sprintf("/admin/users/%d/enable", uid), nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	status, _ = b.apiGet(t, token, "/api/v1/programs")
	require.Equal(t, http.StatusUnauthorized, status, "enabled again: the old token stays revoked")

	var revoked bool
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT revoked_at IS NOT NULL FROM api_tokens WHERE user_id = $1`, uid).Scan(&revoked))
	require.True(t, revoked, "the token's row says revoked (the tokens page shows it)")
	// The account itself works again, and a new token does.
	fresh := b.createTokenViaUI(t, b.signIn(t, "eng@v.example"), "read")
	status, _ = b.apiGet(t, fresh, "/api/v1/programs")
	require.Equal(t, http.StatusOK, status)
}

// The requests of the report, one by one: each answered 500 before.
func TestAttackNULBytesOfTheReportAre400(t *testing.T) {
	t.Parallel()
	f := newMatrixFixture(t)
	send := func(c caller, method, path, contentType, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, f.b.ts.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		client := f.clients[c]
		if strings.HasPrefix(path, "/api/v1/") {
			client = f.b.client(t)
			req.Header.Set("Authorization", "Bearer "+f.tokens[c])
		}
		res, err := client.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		page, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		var apiErr apiError
		if json.Unmarshal(page, &apiErr) == nil {
			return res.StatusCode, apiErr.Error
		}
		return res.StatusCode, html.UnescapeString(string(page))
	}
	form := "application/x-www-form-urlencoded"
	program := "/programs/" + f.ids["programID"]
	for _, a := range []struct {
		c                   caller
		method, path, ctype string
		body, where         string
	}{
		{anon, "POST", "/signin", form, "email=a%00b@x.test&password=x", `the form field "email"`},
		{engineer, "POST", "/tokens", form, "name=a%00b&scope=read&expires_days=30", `the form field "name"`},
		{engineer, "POST", "/tokens/a%00b/revoke", form, "", "the path"},
		{engineer, "GET", program + "/runs?state=a%00b", "", "", `the query parameter "state"`},
		{engineer, "GET", program + "/runs/" + f.ids["runID"] + "/artifacts/facts.json%00.txt", "", "", "the path"},
		{engineer, "GET", program + "/runs?state=a%ffb", "", "", `the query parameter "state"`},
		{engineer, "GET", "/api/v1" + program + "/runs?state=a%00b", "", "", `the query parameter "state"`},
	} {
		status, page := send(a.c, a.method, a.path, a.ctype, a.body)
		require.Equal(t, http.StatusBadRequest, status, "%s %s %s: %s", a.method, a.path, a.body, page)
		require.Contains(t, page, "bytes that are not text (a NUL byte or invalid UTF-8) in "+a.where, "%s %s", a.method, a.path)
	}
}

// Bytes a handler decodes itself (multipart, JSON) and passes on reach
// PostgreSQL, which refuses them as not text: that is the client's 400,
// never a 500.
func TestDatabaseRefusingBytesAsNotTextIsTheClients400(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, q := range []struct{ sql, arg string }{
		{"SELECT $1::text", "a\x00b"},
		{"SELECT $1::text", "a\xffb"},
		{"SELECT $1::jsonb", `{"a":"\u0000"}`},
	} {
		_, err := b.pool.Exec(context.Background(), q.sql, q.arg)
		require.Error(t, err, q.sql)
		require.True(t, isNotTextError(fmt.Errorf("store: wrapped: %w", err)), "%s %q: %v", q.sql, q.arg, err)
		for _, path := range []string{"/programs", "/api/v1/programs"} {
			w := httptest.NewRecorder()
			b.server.serverError(w, httptest.NewRequest(http.MethodPost, path, nil), fmt.Errorf("wrapped: %w", err))
			require.Equal(t, http.StatusBadRequest, w.Code)
			require.Contains(t, w.Body.String(), "bytes that are not text")
			require.NotContains(t, w.Body.String(), "SQLSTATE", "no database text")
		}
	}
	_, err := b.pool.Exec(context.Background(), "SELECT 1/0")
	require.False(t, isNotTextError(err), "other database errors stay 500s")
}

// tableResolver is DNS the test controls.
type tableResolver map[string][]netip.Addr

func (r tableResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Webhook registration accepted the cloud metadata address, private,
// CGNAT and unique-local ranges, decimal and hex IP forms and
// metadata.google.internal. Each is refused now with the reason and the
// variable that would allow it; a public name is accepted. (The dial-time
// check is jobs' TestAttackWebhookDeliveryReachesTheServersOwnNetwork.)
func TestAttackWebhookRegistrationTargetsTheServersOwnNetwork(t *testing.T) {
	t.Parallel()
	resolver := tableResolver{
		"argo.example.test":     {netip.MustParseAddr("203.0.113.7")},
		"intranet.example.test": {netip.MustParseAddr("192.168.7.7")},
	}
	b := setup(t, setupOpts{egress: egress.NewPolicy(nil, resolver)})
	ctx := context.Background()
	vendor := b.createOrg(t, "V", "vendor")
	customer := b.createOrg(t, "C", "customer")
	pid, err := b.store.CreateProgram(ctx, "P", "", vendor, customer, nil)
	require.NoError(t, err)
	uid := b.createUser(t, "own@v.example", &vendor, false)
	_, err = b.store.SetMember(ctx, pid, uid, store.RoleOwner)
	require.NoError(t, err)
	owner := b.signIn(t, "own@v.example")
	register := func(target string) (int, string) {
		res, page := (&rolloutBundle{testBundle: b}).post(t, owner, fmt.Sprintf("/programs/%d/webhooks", pid), url.Values{"url": {target}, "event": {"stop_loss"}})
		return res.StatusCode, html.UnescapeString(page)
	}
	for _, target := range []string{
		"http://169.254.169.254/latest/meta-data/iam/", "http://10.0.0.5/", "http://192.168.1.1/", "http://100.64.0.1/",
		"http://[fd00::1]/", "http://127.0.0.1:5432/", "http://2130706433/", "http://0x7f000001/", "http://0xa9fea9fe/",
		"http://metadata.google.internal/computeMetadata/v1/", "http://intranet.example.test/",
	} {
		status, page := register(target)
		require.Equal(t, http.StatusUnprocessableEntity, status, target)
		require.Contains(t, page, "Refused: ", target)
		if !strings.Contains(target, "169.254.169.254") && !strings.Contains(target, "0xa9fea9fe") && !strings.Contains(target, "metadata") {
			require.Contains(t, page, "ACCORD_EGRESS_ALLOW_CIDRS", target)
		}
	}
	hooks, err := b.store.ListWebhooks(ctx, pid)
	require.NoError(t, err)
	require.Empty(t, hooks, "none was registered")
	status, _ := register("https://argo.example.test/api/v1/events")
	require.Equal(t, http.StatusOK, status)
}

// A production watch's endpoint was accepted whatever it pointed at (its
// checks refused only link-local addresses). It is checked by the egress
// policy when it is set now, as a webhook's URL is: the server's own
// networks are refused with the reason and the variable that opens them;
// cloud metadata is refused even when the operator's allow-list is as
// wide as all of link-local; an allowed private Prometheus (the usual
// case) and one behind basic authentication are accepted. (The dial-time
// check is jobs' TestAttackWatchQueryReachesTheServersOwnNetwork.)
func TestAttackWatchEndpointTargetsTheServersOwnNetwork(t *testing.T) {
	t.Parallel()
	resolver := tableResolver{
		"prom.example.test":       {netip.MustParseAddr("203.0.113.9")},
		"prom.intranet.test":      {netip.MustParseAddr("10.20.4.5")},
		"elsewhere.intranet.test": {netip.MustParseAddr("10.99.0.1")},
		"imds.example.test":       {netip.MustParseAddr("169.254.169.254")},
	}
	allow, err := egress.ParseCIDRs("10.20.0.0/16, 169.254.0.0/16")
	require.NoError(t, err)
	rb := setupRollout(t, setupOpts{egress: egress.NewPolicy(allow, resolver)})
	rb.addStages(t, "lab-acceptance")
	lab := rb.stageID(t, "lab-acceptance")
	set := func(endpoint string) (int, string) {
		res, page := rb.post(t, rb.owner, rb.url(fmt.Sprintf("/rollout/stages/%d/watch", lab)), url.Values{"name": {"p99 TTFT"}, "endpoint": {endpoint},
			"query": {"up"}, "comparator": {"<="}, "line": {"2"}, "unit": {"s"}, "consecutive": {"3"}, "interval": {"30"}})
		return res.StatusCode, html.UnescapeString(page)
	}
	for _, endpoint := range []string{"http://127.0.0.1:9090", "http://10.99.0.1:9090", "http://elsewhere.intranet.test:9090", "http://[fd00::1]:9090",
		"http://192.168.1.1:9090", "http://2130706433:9090", "http://localhost:9090"} {
		status, page := set(endpoint)
		require.Equal(t, http.StatusUnprocessableEntity, status, endpoint)
		require.Contains(t, page, "Production watches may not reach the server's own networks", endpoint)
		require.Contains(t, page, "ACCORD_EGRESS_ALLOW_CIDRS", endpoint)
	}
	for _, endpoint := range []string{"http://169.254.169.254/latest/meta-data/", "http://imds.example.test/", "http://[fd00:ec2::254]/", "http://metadata.google.internal/"} {
		status, page := set(endpoint)
		require.Equal(t, http.StatusUnprocessableEntity, status, endpoint)
		require.Contains(t, page, "Refused: ", endpoint)
	}
	ws, err := rb.store.ListWatches(context.Background(), rb.programID)
	require.NoError(t, err)
	require.Empty(t, ws, "none was set")
	for _, endpoint := range []string{"http://prom.intranet.test:9090/", "http://10.20.0.7:9090", "https://watch:s3cret@prom.example.test/", "http://169.254.1.2:9090"} {
		status, page := set(endpoint)
		require.Equal(t, http.StatusSeeOther, status, endpoint+": "+page)
	}
}

// A viewer could halt a stage in the browser while the API asked for the
// approve capability. One rule now (decisionNeeds): any member halts, in
// the browser and through the API (a token with the approve scope, as for
// every decision); approving stays with approvers, in both.
func TestAttackHaltNeedsTheSameCapabilityInBrowserAndAPI(t *testing.T) {
	t.Parallel()
	browser := setupRollout(t)
	browser.addStages(t, "pilot-5pct")
	browser.judgedRun(t, "PASS")
	api := setupRollout(t)
	api.addStages(t, "pilot-5pct")
	api.judgedRun(t, "PASS")
	viewerToken := api.createTokenViaUI(t, api.viewer, "read", "approve")
	readOnly := api.createTokenViaUI(t, api.viewer, "read")

	// Approving: refused to the viewer in both.
	code, _ := browser.decide(t, browser.viewer, "pilot-5pct", "approve", "")
	require.Equal(t, http.StatusForbidden, code)
	status, out := api.apiPost(t, viewerToken, api.url("/rollout/decisions"), `{"kind":"approve","stage":"pilot-5pct"}`)
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, out["error"], "an approver or owner")

	// Halting: allowed to the viewer in both.
	code, _ = browser.decide(t, browser.viewer, "pilot-5pct", "halt", "p99 TTFT doubled")
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "halted", stageStates(browser.board(t, browser.viewer))["pilot-5pct"])
	status, out = api.apiPost(t, readOnly, api.url("/rollout/decisions"), `{"kind":"halt","stage":"pilot-5pct","reason":"p99 TTFT doubled"}`)
	require.Equal(t, http.StatusForbidden, status, "a token needs the approve scope for any decision")
	status, out = api.apiPost(t, viewerToken, api.url("/rollout/decisions"), `{"kind":"halt","stage":"pilot-5pct","reason":"p99 TTFT doubled"}`)
	require.Equal(t, http.StatusCreated, status, out)
	require.Equal(t, "halted", out["rollout"].(map[string]any)["status"])
}

// Served at an https base URL, every answer carries HSTS, so that a
// browser never falls back to plain HTTP; at an http one, none does (a
// browser would ignore it, and it would pin a development host).
func TestAttackNoHSTSBehindHTTPS(t *testing.T) {
	t.Parallel()
	secure := setup(t, setupOpts{httpsBase: true})
	plain := setup(t)
	for _, path := range []string{"/", "/signin", "/healthz", "/api/v1/openapi.json", "/no-such-page"} {
		res, _ := secure.get(t, secure.client(t), path)
		require.Equal(t, "max-age=63072000", res.Header.Get("Strict-Transport-Security"), path)
		res, _ = plain.get(t, plain.client(t), path)
		require.Empty(t, res.Header.Get("Strict-Transport-Security"), path)
	}
}
