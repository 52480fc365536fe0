package handlers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/argon2"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
	"github.com/accordlab/accord/web"
)

const testPassword = "correct-horse-42"

// passwordHash is the test users' password as an argon2id PHC string with
// the cheapest parameters argon2 allows. CheckPassword verifies a hash
// under the parameters it carries (as hashes made under older settings
// must keep verifying), so sign-in takes the same path; with the
// production parameters (auth.HashPassword, tested in auth) each of the
// hundreds of sign-ins here cost about 0.2 CPU-seconds.
var passwordHash = func() string {
	salt := []byte("accord-test-salt")
	key := argon2.IDKey([]byte(testPassword), salt, 1, 8, 1, 32)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=8,t=1,p=1$%s$%s", argon2.Version, b64.EncodeToString(salt), b64.EncodeToString(key))
}()

type testBundle struct {
	pool    *pgxpool.Pool
	store   *store.Store
	keys    *auth.Keys
	server  *Server
	ts      *httptest.Server
	log     *slog.Logger
	river   *river.Client[pgx.Tx]
	sealer  *runners.Sealer
	keyring *attest.Keyring
}

type setupOpts struct {
	dev bool
	// httpsBase makes the public URL https (a TLS proxy in front), while
	// the test still talks plain HTTP to the server.
	httpsBase bool
	// egress is the outbound policy of webhooks and watches (default:
	// loopback allowed, as an operator's ACCORD_EGRESS_ALLOW_CIDRS would,
	// for the servers the tests start).
	egress *egress.Policy
	// demo is what the sign-in page lists of a demo (dev mode).
	demo *web.DemoSignIn
	// probe is the accord binary the server uploads to lab hosts (for
	// tests that reach a host from a page); empty: none.
	probe string
	// logTo receives the server's log as well (for tests of what is
	// logged rather than shown); it must be safe for concurrent use.
	logTo io.Writer
}

func setup(t *testing.T, opts ...setupOpts) *testBundle {
	t.Helper()
	var o setupOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	pool := storetest.NewPool(t)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	keys, err := auth.NewKeys(secret)
	require.NoError(t, err)
	logOut := io.Discard
	if os.Getenv("ACCORD_TEST_LOG") != "" {
		logOut = os.Stderr
	}
	if o.logTo != nil {
		logOut = io.MultiWriter(logOut, o.logTo)
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st := store.New(pool)
	b := &testBundle{pool: pool, store: st, keys: keys, log: log}
	b.ts = httptest.NewUnstartedServer(nil)
	b.ts.Start()
	base, _ := url.Parse(b.ts.URL)
	if o.httpsBase {
		base.Scheme = "https"
	}
	// A stand-in for River UI, so that its route's protection is tested.
	riverUI := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("river ui")) })
	// An insert-only River client: jobs are inserted, nothing works them
	// (tests that need workers start their own).
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	sealer, err := runners.NewSealer(secret)
	require.NoError(t, err)
	b.sealer = sealer
	b.river = rc
	b.keyring, err = attest.OpenKeyring(t.TempDir(), attest.KeyringOptions{})
	require.NoError(t, err)
	if o.egress == nil {
		o.egress = egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, nil)
	}
	b.server = New(Options{Log: log, Pool: pool, Store: st, Keys: keys, BaseURL: base, Dev: o.dev, Registry: prometheus.NewRegistry(), RiverUI: riverUI,
		River: rc, Sealer: sealer, Keyring: b.keyring, Egress: o.egress, Demo: o.demo,
		Runner: runners.Config{Options: sshrun.Options{DialTimeout: 2 * time.Second, HandshakeTimeout: 3 * time.Second, RemoteBase: t.TempDir()},
			Probe: sshrun.ProbeSource{File: o.probe}}})
	b.ts.Config.Handler = b.server
	t.Cleanup(b.server.Close) // runs before the pool closes (registered later)
	t.Cleanup(b.ts.Close)
	return b
}

func (b *testBundle) createOrg(t *testing.T, name, kind string) int64 {
	t.Helper()
	id, err := b.store.CreateOrganization(context.Background(), name, kind)
	require.NoError(t, err)
	return id
}

func (b *testBundle) createUser(t *testing.T, email string, org *int64, admin bool) int64 {
	t.Helper()
	id, err := b.store.CreateUser(context.Background(), store.NewUser{Email: email, DisplayName: strings.Split(email, "@")[0], PasswordHash: passwordHash, OrganizationID: org, IsAdmin: admin})
	require.NoError(t, err)
	return id
}

// client is a browser-like client with cookies that does not follow redirects.
func (b *testBundle) client(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// signIn returns a client signed in as email.
func (b *testBundle) signIn(t *testing.T, email string) *http.Client {
	t.Helper()
	c := b.client(t)
	res := b.postForm(t, c, "/signin", url.Values{"email": {email}, "password": {testPassword}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "sign in as %s", email)
	return c
}

func (b *testBundle) get(t *testing.T, c *http.Client, path string) (*http.Response, string) {
	t.Helper()
	res, err := c.Get(b.ts.URL + path)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}

// postForm posts like a same-origin browser form.
func (b *testBundle) postForm(t *testing.T, c *http.Client, path string, form url.Values) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.ts.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", b.ts.URL)
	res, err := c.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

func ioCopy(w io.Writer, res *http.Response) (int64, error) { return io.Copy(w, res.Body) }
