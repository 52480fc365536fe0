package handlers

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/store"
)

// scopeOfCapability is the token scope each capability needs, as the API
// documents it (written out here, not taken from apiScopeAllows).
var scopeOfCapability = map[capability]string{
	capView: auth.ScopeRead, capEngineer: auth.ScopeRun, capApprove: auth.ScopeApprove, capHalt: auth.ScopeApprove,
}

// issueToken records a token with exactly these scopes for the user (the
// tokens page always adds read; a row without it must be refused too).
func (f *matrixFixture) issueToken(t *testing.T, email string, scopes ...string) string {
	t.Helper()
	ctx := context.Background()
	var uid int64
	require.NoError(t, f.b.pool.QueryRow(ctx, `SELECT id FROM users WHERE email = $1`, email).Scan(&uid))
	now := time.Now()
	tok := store.APIToken{ID: auth.NewID(), UserID: uid, Name: "scopes " + strings.Join(scopes, "+"), Scopes: scopes, ExpiresAt: now.Add(time.Hour)}
	text, err := f.b.keys.Issue(auth.AudienceAPI, uid, tok.ID, scopes, now, tok.ExpiresAt)
	require.NoError(t, err)
	require.NoError(t, f.b.store.CreateAPIToken(ctx, tok))
	return text
}

// expectedForScopes is the status of an API route for a program owner
// (whose role allows every capability) holding a token with scopes.
func expectedForScopes(r routeCase, scopes []string) []int {
	has := func(s string) bool { return slices.Contains(scopes, s) }
	switch r.guard.kind {
	case "deploy":
		if !has(auth.ScopeDeploy) {
			return []int{http.StatusForbidden}
		}
		return r.allowed
	case "api", "apiprogram":
		// Every call reads; the route's capability needs its own scope.
		if !has(auth.ScopeRead) || !has(scopeOfCapability[r.guard.cap]) {
			return []int{http.StatusForbidden}
		}
		return r.allowed
	}
	panic("not an API route: " + r.pattern)
}

// Every API route, called by a program owner with a token of one scope
// at a time, and of read with one other scope: exactly the routes the
// scopes grant answer, the rest are 403. The OpenAPI document names the
// same scope for each route.
func TestAuthorizationMatrixTokenScopes(t *testing.T) {
	t.Parallel()
	f := newMatrixFixture(t)
	sets := [][]string{{}}
	for _, s := range auth.AllScopes {
		sets = append(sets, []string{s})
		if s != auth.ScopeRead {
			sets = append(sets, []string{auth.ScopeRead, s})
		}
	}
	documented := map[string]string{}
	for _, op := range apiOperations {
		documented[op.Method+" "+strings.TrimSuffix(op.Path, "/")] = op.Scope
	}
	ownerEmail := strings.ReplaceAll(string(owner), " ", "-") + "@example.com"
	var cells int
	for _, scopes := range sets {
		token := f.issueToken(t, ownerEmail, scopes...)
		for _, r := range routeTable {
			if r.guard.kind != "api" && r.guard.kind != "apiprogram" && r.guard.kind != "deploy" {
				continue
			}
			req, err := http.NewRequest(r.method, f.b.ts.URL+f.path(r.pattern, f.ids), nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+token)
			if r.method != http.MethodGet {
				req.Header.Set("Content-Type", "application/json")
			}
			res, err := f.b.client(t).Do(req)
			require.NoError(t, err)
			res.Body.Close()
			require.Contains(t, expectedForScopes(r, scopes), res.StatusCode, "%s %s with a token of %v", r.method, r.pattern, scopes)
			cells++
			if doc, ok := documented[r.method+" "+strings.TrimSuffix(r.pattern, "/")]; ok && r.guard.kind != "deploy" {
				require.Equal(t, scopeOfCapability[r.guard.cap], doc, "the OpenAPI document's scope of %s %s", r.method, r.pattern)
			}
		}
	}
	t.Logf("%d scope sets × API routes: %d cells", len(sets), cells)
}

// Routes mounted for every method answer every method (HEAD included) as
// they answer GET, for every caller; and HEAD on every GET route is
// authorized exactly as GET.
func TestAuthorizationMatrixEveryMethod(t *testing.T) {
	t.Parallel()
	f := newMatrixFixture(t)
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions, http.MethodTrace}
	var cells int
	for _, r := range routeTable {
		var tried []string
		switch {
		case r.method == "ANY":
			tried = methods
		case r.method == http.MethodGet && r.pattern != "/signout":
			tried = []string{http.MethodHead}
		default:
			continue
		}
		for _, method := range tried {
			for _, c := range callers {
				want := expected(r, c)
				got := f.do(t, c, method, f.path(r.pattern, f.ids))
				require.Contains(t, want, got, "%s %s (declared %s) as %s", method, r.pattern, r.method, c)
				cells++
			}
		}
	}
	t.Logf("%d cells (every method on routes for any method, HEAD on every GET route)", cells)
	require.Positive(t, cells)
}
