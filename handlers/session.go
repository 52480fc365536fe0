package handlers

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

const (
	sessionCookie   = "accord_session"
	flashCookie     = "accord_flash"
	sessionLifetime = 12 * time.Hour
)

// viewer is the caller: a signed-in browser or an API token's owner.
type viewer struct {
	web.Viewer
	User      store.User
	SessionID string   // browser sessions
	TokenID   string   // API tokens
	Scopes    []string // API tokens only
}

func viewerFrom(ctx context.Context) *viewer {
	v, _ := ctx.Value(keyViewer).(*viewer)
	return v
}

func newViewer(u store.User) *viewer {
	return &viewer{
		Viewer: web.Viewer{ID: u.ID, Name: u.DisplayName, Email: u.Email, IsAdmin: u.IsAdmin, OrgName: u.OrgName, OrgKind: u.OrgKind},
		User:   u,
	}
}

// withSession identifies a browser from its session cookie: a valid JWT
// whose session row is active. Anything else is simply anonymous (and the
// stale cookie is cleared).
func (s *Server) withSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(sessionCookie)
		if err != nil || c.Value == "" {
			next.ServeHTTP(w, r)
			return
		}
		_, claims, err := s.keys.Verify(auth.AudienceWeb, c.Value, time.Now())
		if err != nil {
			s.log.Debug("session cookie refused", "request_id", requestID(r.Context()), "err", err)
			s.clearSessionCookie(w)
			next.ServeHTTP(w, r)
			return
		}
		sess, user, err := s.store.ActiveSession(r.Context(), claims.ID)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				s.serverError(w, r, err)
				return
			}
			s.clearSessionCookie(w)
			next.ServeHTTP(w, r)
			return
		}
		v := newViewer(user)
		v.SessionID = sess.ID
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyViewer, v)))
	})
}

// requireSignIn sends anonymous browsers to the sign-in page (302), coming
// back to where they were going after signing in.
func (s *Server) requireSignIn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if viewerFrom(r.Context()) == nil {
			target := "/signin"
			if r.Method == http.MethodGet && r.URL.Path != "/" {
				target += "?next=" + url.QueryEscape(r.URL.RequestURI())
			}
			http.Redirect(w, r, target, http.StatusFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireAdmin allows site admins only: other signed-in users get 403.
func (s *Server) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := viewerFrom(r.Context()); v == nil || !v.IsAdmin {
			s.renderError(w, r, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) setSessionCookie(w http.ResponseWriter, token string) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: token, Path: "/", MaxAge: int(sessionLifetime.Seconds()),
		HttpOnly: true, Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode,
	})
}

func (s *Server) clearSessionCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode,
	})
}

// clientAddr is the peer address. Accord does not trust forwarding headers;
// behind a proxy, throttling is per proxy (documented in the README).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// setFlash leaves a one-line message for the next page the browser shows.
func (s *Server) setFlash(w http.ResponseWriter, kind, text string) {
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(kind + "\n" + text)), Path: "/",
		MaxAge: 60, HttpOnly: true, Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode,
	})
}

type flashKey struct{}

// withFlash moves a flash cookie into the request context and clears it,
// so the message shows exactly once.
func (s *Server) withFlash(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(flashCookie)
		if err != nil || r.Method != http.MethodGet || isAPI(r) {
			next.ServeHTTP(w, r)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode})
		raw, err := base64.RawURLEncoding.DecodeString(c.Value)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		kind, text, _ := strings.Cut(string(raw), "\n")
		switch kind {
		case "ok", "error", "info", "warn":
		default:
			kind = "info"
		}
		f := web.Flash{Kind: kind, Text: truncateText(text, 300)}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), flashKey{}, f)))
	})
}

func takeFlash(r *http.Request) []web.Flash {
	if f, ok := r.Context().Value(flashKey{}).(web.Flash); ok {
		return []web.Flash{f}
	}
	return nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// safeNext accepts only a local path, so that ?next= cannot send a user to
// another site after signing in.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}
