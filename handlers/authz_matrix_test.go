package handlers

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

// The authorization matrix: every route × every kind of caller, each cell
// an exact status. A route missing from routeTable fails the test, so new
// routes must declare who may use them.

type caller string

const (
	anon     caller = "anonymous"
	viewerC  caller = "viewer"
	engineer caller = "engineer"
	approver caller = "approver"
	owner    caller = "owner"
	outsider caller = "member of another program"
	admin    caller = "site admin"
)

var callers = []caller{anon, viewerC, engineer, approver, owner, outsider, admin}

// protection says how a route is guarded.
type protection struct {
	kind string     // public, signedin, admin, program, api, apiprogram
	cap  capability // for program routes
}

var (
	public    = protection{kind: "public"}
	signedIn  = protection{kind: "signedin"}
	adminOnly = protection{kind: "admin"}
	apiToken  = protection{kind: "api"}
)

func inProgramNeeds(c capability) protection    { return protection{kind: "program", cap: c} }
func apiInProgramNeeds(c capability) protection { return protection{kind: "apiprogram", cap: c} }

type routeCase struct {
	method, pattern string
	guard           protection
	// allowed lists the statuses that mean "authorized" for this route when
	// called with an empty body (200, 303 after a save, 422 for an empty
	// form, 201, ...).
	allowed []int
}

func rc(method, pattern string, guard protection, allowed ...int) routeCase {
	if len(allowed) == 0 {
		allowed = []int{http.StatusOK}
	}
	return routeCase{method: method, pattern: pattern, guard: guard, allowed: allowed}
}

// routeTable lists every route: the base routes here, and each area's in
// its own file (authz_*_test.go).
var routeTable = slices.Concat(baseRoutes, reportRouteCases, chartRouteCases, readinessRouteCases, rolloutRouteCases, deployRouteCases)

// baseRoutes lists the routes of accounts, programs, specs, hosts and runs.
var baseRoutes = []routeCase{
	rc("GET", "/healthz", public),
	rc("GET", "/readyz", public),
	rc("GET", "/metrics", public),
	rc("GET", "/static/*", public, http.StatusOK),
	rc("GET", "/", public),
	rc("GET", "/signin", public, http.StatusOK, http.StatusSeeOther),
	rc("POST", "/signin", public, http.StatusUnprocessableEntity),
	rc("POST", "/signout", public, http.StatusSeeOther),
	rc("GET", "/help", public),
	rc("GET", "/tokens", signedIn),
	rc("POST", "/tokens", signedIn, http.StatusUnprocessableEntity),
	rc("POST", "/tokens/{tokenID}/revoke", signedIn, http.StatusNotFound),
	rc("GET", "/programs", signedIn),
	rc("POST", "/programs", adminOnly, http.StatusUnprocessableEntity),
	rc("GET", "/programs/{programID}/", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/members", inProgramNeeds(capView)),
	rc("POST", "/programs/{programID}/members", inProgramNeeds(capOwner), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/members/{userID}/remove", inProgramNeeds(capOwner), http.StatusSeeOther, http.StatusUnprocessableEntity),
	rc("GET", "/programs/{programID}/audit", inProgramNeeds(capOwner)),
	rc("GET", "/programs/{programID}/profiles", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/profiles/new", inProgramNeeds(capEngineer)),
	rc("POST", "/programs/{programID}/profiles", inProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/profiles/import", inProgramNeeds(capEngineer), http.StatusSeeOther),
	rc("GET", "/programs/{programID}/profiles/{specID}", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/profiles/{specID}/versions/{version}", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/profiles/{specID}/versions/{version}/yaml", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/profiles/{specID}/diff", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/profiles/{specID}/edit", inProgramNeeds(capEngineer)),
	rc("POST", "/programs/{programID}/profiles/{specID}/edit", inProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("GET", "/programs/{programID}/gatesets", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/gatesets/new", inProgramNeeds(capEngineer)),
	rc("POST", "/programs/{programID}/gatesets", inProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/gatesets/import", inProgramNeeds(capEngineer), http.StatusSeeOther),
	rc("GET", "/programs/{programID}/gatesets/{specID}", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/gatesets/{specID}/versions/{version}", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/gatesets/{specID}/versions/{version}/yaml", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/gatesets/{specID}/diff", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/gatesets/{specID}/edit", inProgramNeeds(capEngineer)),
	rc("POST", "/programs/{programID}/gatesets/{specID}/edit", inProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("GET", "/programs/{programID}/hosts", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/hosts/new", inProgramNeeds(capEngineer)),
	rc("POST", "/programs/{programID}/hosts", inProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("GET", "/programs/{programID}/hosts/{hostID}", inProgramNeeds(capView)),
	rc("POST", "/programs/{programID}/hosts/{hostID}/scan", inProgramNeeds(capEngineer)),
	rc("POST", "/programs/{programID}/hosts/{hostID}/pin", inProgramNeeds(capEngineer), http.StatusSeeOther),
	rc("POST", "/programs/{programID}/hosts/{hostID}/check", inProgramNeeds(capEngineer), http.StatusSeeOther),
	rc("POST", "/programs/{programID}/hosts/{hostID}/write-places", inProgramNeeds(capOwner), http.StatusSeeOther),
	rc("GET", "/programs/{programID}/hosts/{hostID}/check-status", inProgramNeeds(capView), http.StatusBadRequest),
	rc("GET", "/programs/{programID}/runs", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/runs/new", inProgramNeeds(capEngineer)),
	rc("GET", "/programs/{programID}/runs/precheck", inProgramNeeds(capEngineer)),
	rc("POST", "/programs/{programID}/endpoint-test", inProgramNeeds(capEngineer)),
	rc("POST", "/programs/{programID}/runs", inProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("GET", "/programs/{programID}/runs/{runID}", inProgramNeeds(capView)),
	rc("POST", "/programs/{programID}/runs/{runID}/cancel", inProgramNeeds(capEngineer), http.StatusSeeOther),
	rc("GET", "/programs/{programID}/runs/{runID}/metrics.csv", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/runs/{runID}/artifacts/*", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/runs/{runID}/events", inProgramNeeds(capView)),
	rc("GET", "/admin/", adminOnly),
	rc("POST", "/admin/organizations", adminOnly, http.StatusUnprocessableEntity),
	rc("POST", "/admin/users", adminOnly, http.StatusUnprocessableEntity),
	rc("POST", "/admin/users/{userID}/disable", adminOnly, http.StatusSeeOther),
	rc("POST", "/admin/users/{userID}/enable", adminOnly, http.StatusSeeOther),
	rc("GET", "/admin/audit", adminOnly),
	rc("ANY", "/admin/queue", adminOnly, http.StatusMovedPermanently),
	rc("ANY", "/admin/queue/*", adminOnly),
	rc("GET", "/api/v1/openapi.json", public),
	rc("GET", "/api/v1/programs", apiToken),
	rc("GET", "/api/v1/programs/{programID}/", apiInProgramNeeds(capView)),
	rc("GET", "/api/v1/programs/{programID}/hosts", apiInProgramNeeds(capView)),
	rc("GET", "/api/v1/programs/{programID}/runs", apiInProgramNeeds(capView)),
	rc("POST", "/api/v1/programs/{programID}/runs", apiInProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("POST", "/api/v1/programs/{programID}/runs/import", apiInProgramNeeds(capEngineer), http.StatusBadRequest, http.StatusUnprocessableEntity),
	rc("GET", "/api/v1/programs/{programID}/runs/{runID}", apiInProgramNeeds(capView)),
	rc("GET", "/api/v1/programs/{programID}/runs/{runID}/evaluation", apiInProgramNeeds(capView), http.StatusNotFound),
	rc("GET", "/api/v1/programs/{programID}/runs/{runID}/measurements", apiInProgramNeeds(capView)),
	rc("POST", "/api/v1/programs/{programID}/runs/{runID}/cancel", apiInProgramNeeds(capEngineer), http.StatusAccepted),
	rc("GET", "/api/v1/programs/{programID}/profiles", apiInProgramNeeds(capView)),
	rc("POST", "/api/v1/programs/{programID}/profiles", apiInProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("GET", "/api/v1/programs/{programID}/profiles/{specID}", apiInProgramNeeds(capView)),
	rc("GET", "/api/v1/programs/{programID}/profiles/{specID}/versions/{version}", apiInProgramNeeds(capView)),
	rc("GET", "/api/v1/programs/{programID}/profiles/{specID}/versions/{version}/yaml", apiInProgramNeeds(capView)),
	rc("GET", "/api/v1/programs/{programID}/profile-versions/{versionID}", apiInProgramNeeds(capView)),
	rc("POST", "/api/v1/programs/{programID}/profiles/{specID}/versions", apiInProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("GET", "/api/v1/programs/{programID}/gatesets", apiInProgramNeeds(capView)),
	rc("POST", "/api/v1/programs/{programID}/gatesets", apiInProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("GET", "/api/v1/programs/{programID}/gatesets/{specID}", apiInProgramNeeds(capView)),
	rc("GET", "/api/v1/programs/{programID}/gatesets/{specID}/versions/{version}", apiInProgramNeeds(capView)),
	rc("GET", "/api/v1/programs/{programID}/gatesets/{specID}/versions/{version}/yaml", apiInProgramNeeds(capView)),
	rc("GET", "/api/v1/programs/{programID}/gateset-versions/{versionID}", apiInProgramNeeds(capView)),
	rc("POST", "/api/v1/programs/{programID}/gatesets/{specID}/versions", apiInProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
}

// matrixFixture is a small world: program A with one member of each role,
// program B with the outsider, a site admin, and objects in both programs.
type matrixFixture struct {
	b        *testBundle
	clients  map[caller]*http.Client
	tokens   map[caller]string
	deploy   map[caller]string // tokens with the deploy scope alone
	programA int64
	programB int64
	ids      map[string]string // URL parameter → value in program A
	idsB     map[string]string // URL parameter → value of an object in program B
}

func newMatrixFixture(t *testing.T) *matrixFixture {
	b := setup(t)
	ctx := context.Background()
	f := &matrixFixture{b: b, clients: map[caller]*http.Client{}, tokens: map[caller]string{}, deploy: map[caller]string{}, ids: map[string]string{}, idsB: map[string]string{}}
	vendor := b.createOrg(t, "Vendor", "vendor")
	customer := b.createOrg(t, "Customer", "customer")
	var err error
	f.programA, err = b.store.CreateProgram(ctx, "A", "", vendor, customer, nil)
	require.NoError(t, err)
	f.programB, err = b.store.CreateProgram(ctx, "B", "", vendor, customer, nil)
	require.NoError(t, err)
	roles := map[caller]store.Role{viewerC: store.RoleViewer, engineer: store.RoleEngineer, approver: store.RoleApprover, owner: store.RoleOwner}
	orgOf := map[caller]int64{viewerC: customer, engineer: vendor, approver: customer, owner: vendor, outsider: vendor}
	for _, c := range callers {
		if c == anon {
			continue
		}
		email := strings.ReplaceAll(string(c), " ", "-") + "@example.com"
		if c == admin {
			b.createUser(t, email, nil, true)
		} else {
			org := orgOf[c]
			id := b.createUser(t, email, &org, false)
			if c == outsider {
				_, err = b.store.SetMember(ctx, f.programB, id, store.RoleOwner)
			} else {
				_, err = b.store.SetMember(ctx, f.programA, id, roles[c])
			}
			require.NoError(t, err)
		}
		f.clients[c] = b.signIn(t, email)
		f.tokens[c] = b.createTokenViaUI(t, f.clients[c], "read", "run", "approve")
		f.deploy[c] = b.createTokenViaUI(t, f.clients[c], "deploy")
	}
	f.clients[anon] = b.client(t)
	// A spare member of A that member-removal cells can remove, and a user id for admin cells.
	spare := b.createUser(t, "spare@example.com", &customer, false)
	_, err = b.store.SetMember(ctx, f.programA, spare, store.RoleViewer)
	require.NoError(t, err)
	f.ids["userID"] = fmt.Sprint(spare)
	f.ids["programID"] = fmt.Sprint(f.programA)
	f.ids["tokenID"] = "0000"
	f.ids["version"] = "1"
	f.ids["stage"] = "pilot" // the stage addRolloutObjects creates
	f.addObjects(t)
	return f
}

func (f *matrixFixture) path(pattern string, ids map[string]string) string {
	p := pattern
	if strings.HasPrefix(p, "/static/") {
		p = strings.ReplaceAll(p, "/*", "/css/app.css")
	}
	if strings.Contains(p, "/artifacts/") {
		p = strings.ReplaceAll(p, "/*", "/events.jsonl")
	}
	p = strings.ReplaceAll(p, "/*", "/jobs")
	// Keys are either a parameter ("userID") or a path piece that names
	// the object's kind ("profiles/{specID}").
	for k, v := range ids {
		if strings.Contains(k, "/") {
			p = strings.ReplaceAll(p, k, v)
		} else {
			p = strings.ReplaceAll(p, "{"+k+"}", v)
		}
	}
	p = strings.ReplaceAll(p, "{programID}", f.ids["programID"])
	return p
}

// expected computes the exact status for a caller from the route's guard
// and the one authorization policy (roleCan / programCtx.can).
func expected(r routeCase, c caller) []int {
	deny := func(code int) []int { return []int{code} }
	switch r.guard.kind {
	case "public":
		return r.allowed
	case "signedin":
		if c == anon {
			return deny(http.StatusFound)
		}
		return r.allowed
	case "admin":
		if c == anon {
			return deny(http.StatusFound)
		}
		if c != admin {
			return deny(http.StatusForbidden)
		}
		return r.allowed
	case "program":
		switch c {
		case anon:
			return deny(http.StatusFound)
		case outsider:
			return deny(http.StatusNotFound)
		case admin:
			if (&programCtx{ProgramAccess: store.ProgramAccess{IsAdmin: true}}).can(r.guard.cap) {
				return r.allowed
			}
			return deny(http.StatusForbidden)
		}
		if roleCan(roleOfCaller(c), r.guard.cap) {
			return r.allowed
		}
		return deny(http.StatusForbidden)
	case "api":
		if c == anon {
			return deny(http.StatusUnauthorized)
		}
		return r.allowed
	case "deploy", "apiprogram":
		switch c {
		case anon:
			return deny(http.StatusUnauthorized)
		case outsider:
			return deny(http.StatusNotFound)
		case admin:
			if r.guard.cap == capView {
				return r.allowed
			}
			return deny(http.StatusForbidden)
		}
		if roleCan(roleOfCaller(c), r.guard.cap) {
			return r.allowed
		}
		return deny(http.StatusForbidden)
	}
	panic("unknown guard " + r.guard.kind)
}

func roleOfCaller(c caller) store.Role {
	return map[caller]store.Role{viewerC: store.RoleViewer, engineer: store.RoleEngineer, approver: store.RoleApprover, owner: store.RoleOwner}[c]
}

func (f *matrixFixture) do(t *testing.T, c caller, method, path string) int {
	t.Helper()
	req, err := http.NewRequest(method, f.b.ts.URL+path, nil)
	require.NoError(t, err)
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	client := f.clients[c]
	if strings.HasPrefix(path, "/api/v1/") {
		client = f.b.client(t)
		if method != http.MethodGet {
			req.Header.Set("Content-Type", "application/json")
		}
		token := f.tokens[c]
		if strings.HasPrefix(path, "/api/v1/deploy/") {
			token = f.deploy[c]
		}
		if c != anon {
			req.Header.Set("Authorization", "Bearer "+token)
		}
	}
	res, err := client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	if res.StatusCode == http.StatusFound && c == anon {
		// A page that needs a session sends the visitor to sign in (and,
		// for a page, back to it afterwards).
		want := "/signin"
		if method == http.MethodGet {
			want = "/signin?next="
		}
		require.True(t, strings.HasPrefix(res.Header.Get("Location"), want), "%s %s: Location %q", method, path, res.Header.Get("Location"))
	}
	return res.StatusCode
}

func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	f := newMatrixFixture(t)

	// Every route of the router is in the table, and nothing else.
	declared := map[string]bool{}
	for _, r := range routeTable {
		declared[r.method+" "+r.pattern] = true
	}
	methodsOf := map[string]map[string]bool{}
	err := chi.Walk(f.b.server.routes().(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if methodsOf[route] == nil {
			methodsOf[route] = map[string]bool{}
		}
		methodsOf[route][method] = true
		return nil
	})
	require.NoError(t, err)
	var missing []string
	seen := map[string]bool{}
	for route, methods := range methodsOf {
		if methods[http.MethodTrace] && methods[http.MethodConnect] {
			methods = map[string]bool{"ANY": true} // mounted for every method
		}
		for method := range methods {
			if method == http.MethodHead {
				continue
			}
			key := method + " " + route
			seen[key] = true
			if !declared[key] {
				missing = append(missing, key)
			}
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "routes missing from the authorization matrix (add them to routeTable)")
	for key := range declared {
		require.True(t, seen[key], "routeTable lists %s, which the router does not have", key)
	}

	// Signing out would end the caller's session: do it last.
	table := append([]routeCase(nil), routeTable...)
	sort.SliceStable(table, func(i, j int) bool { return table[j].pattern == "/signout" && table[i].pattern != "/signout" })
	for _, r := range table {
		method := r.method
		if method == "ANY" {
			method = http.MethodGet
		}
		for _, c := range callers {
			want := expected(r, c)
			got := f.do(t, c, method, f.path(r.pattern, f.ids))
			require.Contains(t, want, got, "%s %s as %s", r.method, r.pattern, c)
		}
	}
}

// Another program's object answers 404 through a program the caller may
// see, whatever its id.
func TestObjectsOfAnotherProgramAre404(t *testing.T) {
	t.Parallel()
	f := newMatrixFixture(t)
	for _, r := range routeTable {
		if r.guard.kind != "program" && r.guard.kind != "apiprogram" {
			continue
		}
		usesObject := false
		for k := range f.idsB {
			usesObject = usesObject || strings.Contains(r.pattern, k)
		}
		if !usesObject {
			continue
		}
		got := f.do(t, owner, r.method, f.path(r.pattern, f.idsB))
		require.Equal(t, http.StatusNotFound, got, "%s %s with program B's object as program A's owner", r.method, r.pattern)
	}
}
