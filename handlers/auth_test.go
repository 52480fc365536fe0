package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/handlers/auth"
)

func TestSignInSignOutAndRevocation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	org := b.createOrg(t, "Vendor Co", "vendor")
	b.createUser(t, "ana@vendor.example", &org, false)

	c := b.signIn(t, "ana@vendor.example")
	res, body := b.get(t, c, "/")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "Welcome, ana")

	// The session cookie (its attributes: TestSessionCookieAttributes).
	u, _ := url.Parse(b.ts.URL)
	var session *http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == sessionCookie {
			session = ck
		}
	}
	require.NotNil(t, session)

	// Sign out: the same cookie no longer works, even replayed.
	stolen := session.Value
	res = b.postForm(t, c, "/signout", nil)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	replay := b.client(t)
	replay.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: stolen}})
	res, _ = b.get(t, replay, "/programs")
	require.Equal(t, http.StatusFound, res.StatusCode, "a revoked session is anonymous")
	require.True(t, strings.HasPrefix(res.Header.Get("Location"), "/signin"))

	// Disabling an account ends its sessions at once.
	c2 := b.signIn(t, "ana@vendor.example")
	var id int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT id FROM users WHERE email = 'ana@vendor.example'`).Scan(&id))
	require.NoError(t, b.store.SetUserDisabled(context.Background(), id, true))
	res, _ = b.get(t, c2, "/programs")
	require.Equal(t, http.StatusFound, res.StatusCode)
}

func TestSessionCookieCheckedServerSide(t *testing.T) {
	t.Parallel()
	b := setup(t)
	uid := b.createUser(t, "bo@x.example", nil, false)
	u, _ := url.Parse(b.ts.URL)
	// A correctly signed JWT for a session id that does not exist is refused.
	now := time.Now()
	tok, err := b.keys.Issue(auth.AudienceWeb, uid, "no-such-session", nil, now, now.Add(time.Hour))
	require.NoError(t, err)
	c := b.client(t)
	c.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: tok}})
	res, _ := b.get(t, c, "/programs")
	require.Equal(t, http.StatusFound, res.StatusCode)

	// An API token is not a session.
	api, err := b.keys.Issue(auth.AudienceAPI, uid, "x", []string{"read"}, now, now.Add(time.Hour))
	require.NoError(t, err)
	c.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: api}})
	res, _ = b.get(t, c, "/programs")
	require.Equal(t, http.StatusFound, res.StatusCode)
}

func TestSignInThrottlingGivesNoHintAboutAccounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createUser(t, "cy@x.example", nil, false)
	c := b.client(t)
	try := func(email, password string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, b.ts.URL+"/signin", strings.NewReader(url.Values{"email": {email}, "password": {password}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := c.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		buf := new(strings.Builder)
		_, _ = ioCopy(buf, res)
		return res.StatusCode, buf.String()
	}
	codeKnown, bodyKnown := try("cy@x.example", "wrong-password-1")
	codeUnknown, bodyUnknown := try("nobody@x.example", "wrong-password-1")
	require.Equal(t, http.StatusUnauthorized, codeKnown)
	require.Equal(t, codeKnown, codeUnknown)
	require.Contains(t, bodyKnown, "do not match an active account")
	require.Contains(t, bodyUnknown, "do not match an active account")

	for i := 0; i < maxFailuresPerEmail; i++ {
		try("cy@x.example", "wrong-password-2")
	}
	code, body := try("cy@x.example", testPassword)
	require.Equal(t, http.StatusTooManyRequests, code, "even the right password is refused while throttled")
	require.Contains(t, body, "Too many failed sign-in attempts")
	// The same message for an unknown account that was hammered.
	for i := 0; i < maxFailuresPerEmail; i++ {
		try("ghost@x.example", "wrong-password-2")
	}
	code, body = try("ghost@x.example", "whatever-password")
	require.Equal(t, http.StatusTooManyRequests, code)
	require.Contains(t, body, "Too many failed sign-in attempts")

	// The audit log recorded the failures and the throttling.
	var failed, throttled int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE action = 'signin_failed'), count(*) FILTER (WHERE action = 'signin_throttled') FROM audit_log`).Scan(&failed, &throttled))
	require.GreaterOrEqual(t, failed, 2*maxFailuresPerEmail)
	require.GreaterOrEqual(t, throttled, 2)
}

func TestSignInRedirectsOnlyToLocalPaths(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/programs/3":           "/programs/3",
		"https://evil.example/": "/",
		"//evil.example/x":      "/",
		"/\\evil.example":       "/",
		"":                      "/",
		"javascript:alert(1)":   "/",
	} {
		require.Equal(t, want, safeNext(in), in)
	}
}

// A form posted from another site is refused; the same form from our page works.
func TestCrossSiteRequestsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createUser(t, "dee@x.example", nil, false)
	c := b.signIn(t, "dee@x.example")
	post := func(headers map[string]string) int {
		form := url.Values{"name": {"ci"}, "scope": {"read"}, "expires_days": {"30"}}
		req, _ := http.NewRequest(http.MethodPost, b.ts.URL+"/tokens", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		res, err := c.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusForbidden, post(map[string]string{"Sec-Fetch-Site": "cross-site"}))
	require.Equal(t, http.StatusForbidden, post(map[string]string{"Origin": "https://evil.example"}))
	require.Equal(t, http.StatusCreated, post(map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": b.ts.URL}))
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM api_tokens`).Scan(&n))
	require.Equal(t, 1, n, "only the same-origin post created a token")
}

// The session cookie is HttpOnly and SameSite=Lax, and Secure when the
// installation is served over https.
func TestSessionCookieAttributes(t *testing.T) {
	t.Parallel()
	for _, https := range []bool{false, true} {
		b := setup(t, setupOpts{httpsBase: https})
		org := b.createOrg(t, "Vendor", "vendor")
		b.createUser(t, "ana@vendor.example", &org, false)
		req, err := http.NewRequest(http.MethodPost, b.ts.URL+"/signin", strings.NewReader(url.Values{"email": {"ana@vendor.example"}, "password": {testPassword}}.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		res, err := b.client(t).Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		var session *http.Cookie
		for _, c := range res.Cookies() {
			if c.Name == sessionCookie {
				session = c
			}
		}
		require.NotNil(t, session, "https=%v", https)
		require.True(t, session.HttpOnly)
		require.Equal(t, http.SameSiteLaxMode, session.SameSite)
		require.Equal(t, https, session.Secure, "Secure exactly when the public URL is https")
	}
}

// Guesses sent at once cannot slip under the limit together: each counts
// before its password is checked.
func TestSignInThrottlingHoldsUnderParallelGuesses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createUser(t, "dee@x.example", nil, false)
	try := func(email, password string) int {
		req, _ := http.NewRequest(http.MethodPost, b.ts.URL+"/signin", strings.NewReader(url.Values{"email": {email}, "password": {password}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := b.client(t).Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	const parallel = 4 * maxFailuresPerEmail
	codes := make(chan int, parallel)
	var wg sync.WaitGroup
	for i := range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- try("dee@x.example", fmt.Sprintf("guess-%d", i))
		}()
	}
	wg.Wait()
	close(codes)
	checked := 0
	for c := range codes {
		if c == http.StatusUnauthorized {
			checked++
		} else {
			require.Equal(t, http.StatusTooManyRequests, c)
		}
	}
	require.LessOrEqual(t, checked, maxFailuresPerEmail, "no more passwords were checked than the limit allows")

}

// The limit per client address holds across accounts, each of them far
// below its own limit.
func TestSignInThrottlingPerAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	try := func(email string) int {
		req, _ := http.NewRequest(http.MethodPost, b.ts.URL+"/signin", strings.NewReader(url.Values{"email": {email}, "password": {"wrong"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := b.client(t).Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	for i := 0; i < maxFailuresPerAddr; i++ {
		require.Equal(t, http.StatusUnauthorized, try(fmt.Sprintf("user%d@y.example", i)), "attempt %d", i+1)
	}
	require.Equal(t, http.StatusTooManyRequests, try("fresh@y.example"), "the address is throttled, whichever account it tries")
}
