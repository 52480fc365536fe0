package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
)

// formFieldNames are the names Accord's forms read (grep FormValue,
// PostFormValue and FormFile in handlers/); every request below carries
// them all.
var formFieldNames = []string{"_action", "_base", "_mode", "_note", "_yaml", "address", "agent_socket", "allow_destructive", "allowed_signers",
	"auth_method", "baseline", "bundle", "check", "comparator", "confirm", "confirm_readiness", "consecutive", "customer_org", "description",
	"display_name", "email", "endpoint", "event", "expires_days", "file", "format", "gate_set_version", "host", "interval", "is_admin", "jumps",
	"key", "key_id", "label", "labels", "line", "name", "next", "note", "org_kind", "org_name", "owner", "password", "pinned_runs", "port",
	"profile", "profile_version", "query", "reason", "role", "run", "scope", "status", "step", "unit", "url", "user_id", "user_org",
	"username", "vendor_org", "scratch", "kind", "stage", "state", "version"}

// badValues are not text: a NUL byte, invalid UTF-8, both.
var badValues = []string{"a\x00b", "a\xffb", "\xc3\x28\x00"}

// A NUL byte in the sign-in e-mail (unauthenticated), a token name, a
// token id in the path, ?state=, an artifact path gave 500. Every route of
// the router, walked from chi, now gets bad bytes in its path parameters,
// its query and its form (URL-encoded, multipart, and JSON for the API) as
// the site admin, a program owner and an anonymous visitor; no answer is a
// 5xx, and the ones refused before a handler say where the bytes were.
func TestAttackInvalidBytesInPathQueryAndFormNever5xx(t *testing.T) {
	t.Parallel()
	f := newMatrixFixture(t)

	type route struct{ method, pattern string }
	var routes []route
	require.NoError(t, chi.Walk(f.b.server.routes().(chi.Routes), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes = append(routes, route{method, pattern})
		return nil
	}))
	sort.Slice(routes, func(i, j int) bool {
		// Signing out ends the caller's session: last.
		if (routes[i].pattern == "/signout") != (routes[j].pattern == "/signout") {
			return routes[j].pattern == "/signout"
		}
		return routes[i].method+routes[i].pattern < routes[j].method+routes[j].pattern
	})

	var tried, requests, refusedUpFront int
	const notText = "bytes that are not text (a NUL byte or invalid UTF-8)"
	send := func(c caller, method, path string, body io.Reader, contentType string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, f.b.ts.URL+path, body)
		require.NoError(t, err)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		client := f.clients[c]
		if strings.HasPrefix(path, "/api/v1/") {
			client = f.b.client(t)
			if c != anon {
				req.Header.Set("Authorization", "Bearer "+f.tokens[c])
			}
		}
		res, err := client.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		page, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		requests++
		require.Less(t, res.StatusCode, 500, "%s %s as %s answered %d", method, path, c, res.StatusCode)
		if method == http.MethodHead { // no body: the GET's page says it
			return res.StatusCode, notText + " the query parameter the form field"
		}
		return res.StatusCode, string(page)
	}

	for _, rt := range routes {
		method := rt.method
		if method == http.MethodConnect || method == http.MethodTrace {
			continue // a route mounted for every method is tried with the others
		}
		tried++
		good := f.path(rt.pattern, f.ids)
		for _, c := range []caller{admin, owner, anon} {
			for _, bad := range badValues {
				esc := url.PathEscape(bad)
				// The path: every parameter, and a wildcard's rest.
				if strings.Contains(rt.pattern, "{") || strings.Contains(rt.pattern, "*") {
					p := rt.pattern
					for strings.Contains(p, "{") {
						i, j := strings.Index(p, "{"), strings.Index(p, "}")
						p = p[:i] + esc + p[j+1:]
					}
					p = strings.ReplaceAll(p, "*", "facts.json"+esc+".txt")
					status, page := send(c, method, p, nil, "")
					require.Equal(t, http.StatusBadRequest, status, "%s %s", method, p)
					require.Contains(t, page, notText)
					refusedUpFront++
				}
				// The query.
				q := url.Values{"state": {bad}, "next": {bad}, "name": {bad}}.Encode()
				status, page := send(c, method, good+"?"+q, nil, "")
				require.Equal(t, http.StatusBadRequest, status, "%s %s?%s", method, good, q)
				require.Contains(t, page, "the query parameter", "%s %s?%s", method, good, q)
				refusedUpFront++
				if method == http.MethodGet || method == http.MethodHead {
					continue
				}
				// A URL-encoded form with every field.
				form := url.Values{}
				for _, name := range formFieldNames {
					form.Set(name, bad)
				}
				status, page = send(c, method, good, strings.NewReader(form.Encode()), "application/x-www-form-urlencoded")
				require.Equal(t, http.StatusBadRequest, status, "%s %s (form)", method, good)
				require.Contains(t, page, "the form field")
				refusedUpFront++
				// A multipart form: it reaches the handler, which must
				// refuse it without a 5xx.
				var mp bytes.Buffer
				mw := multipart.NewWriter(&mp)
				for _, name := range formFieldNames {
					require.NoError(t, mw.WriteField(name, bad))
				}
				for _, name := range []string{"file", "bundle", "signature"} {
					fw, err := mw.CreateFormFile(name, "x"+bad+".json")
					require.NoError(t, err)
					_, _ = fw.Write([]byte(`{"fio version":"` + bad + `"}`))
				}
				require.NoError(t, mw.Close())
				send(c, method, good, &mp, mw.FormDataContentType())
				// JSON with every field name and the API's request fields.
				doc := map[string]any{}
				for _, name := range append(formFieldNames, "profile_version_id", "host_id", "gate_set_version_id", "baseline_run_id") {
					doc[name] = bad
				}
				for _, typed := range []map[string]any{doc, {"kind": "halt", "stage": bad, "reason": bad}, {"profile_version_id": 1, "host_id": 1, "label": bad}} {
					body, err := json.Marshal(typed)
					require.NoError(t, err)
					// json.Marshal writes invalid UTF-8 as U+FFFD; the raw bytes go too.
					send(c, method, good, bytes.NewReader(bytes.ReplaceAll(body, []byte(`\ufffd`), []byte("\xff"))), "application/json")
				}
			}
		}
	}
	t.Logf("%d routes (method × pattern, from chi.Walk) tried with bad bytes in %d requests; %d refused before a handler, none answered 5xx",
		tried, requests, refusedUpFront)
	require.Greater(t, tried, 100)
}
