package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

// withRequestID gives every request a fresh id, returned in X-Request-Id
// and attached to every log line about it. A client's own header is not
// trusted.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id := hex.EncodeToString(b)
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyRequestID, id)))
	})
}

// withAccessLog writes one structured line per request and feeds the
// request metrics, keyed by the route pattern (not the raw path, which
// would explode the label space).
func (s *Server) withAccessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		elapsed := time.Since(start)
		pattern := routePattern(r)
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		s.metrics.observe(r.Method, pattern, status, elapsed)
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		if strings.HasPrefix(r.URL.Path, "/static/") || r.URL.Path == "/healthz" || r.URL.Path == "/metrics" {
			level = slog.LevelDebug
		}
		attrs := []slog.Attr{
			slog.String("request_id", requestID(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", pattern),
			slog.String("path", r.URL.Path),
			slog.Int("status", status),
			slog.Int("bytes", ww.BytesWritten()),
			slog.Duration("duration", elapsed),
		}
		if v := viewerFrom(r.Context()); v != nil {
			attrs = append(attrs, slog.Int64("user_id", v.ID))
		}
		s.log.LogAttrs(r.Context(), level, "http request", attrs...)
	})
}

// routePattern is the chi route that matched, or a fixed label.
func routePattern(r *http.Request) string {
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		if p := rctx.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// withRecovery turns a panic into the 500 page and a logged stack trace.
func (s *Server) withRecovery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if rec == http.ErrAbortHandler {
				panic(rec)
			}
			s.log.Error("panic in handler", "request_id", requestID(r.Context()), "panic", fmt.Sprint(rec), "stack", string(debug.Stack()))
			s.renderError(w, r, http.StatusInternalServerError)
		}()
		next.ServeHTTP(w, r)
	})
}

// contentSecurityPolicy allows our own origin only: no inline script, no
// eval, no other host, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// headAsGet routes HEAD as GET (net/http drops the body): the route table
// declares no HEAD route of its own. chi's GetHead looks for a HEAD route
// first and, for the "/" of a mounted router (/programs/{programID}/),
// takes the mount point for one, so that HEAD answered 405 there.
func headAsGet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			if rctx := chi.RouteContext(r.Context()); rctx != nil {
				rctx.RouteMethod = http.MethodGet
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hstsMaxAge is two years, the preload list's figure; subdomains are not
// included (they may be other services of the site).
const hstsMaxAge = 2 * 365 * 24 * 60 * 60

func (s *Server) withSecurityHeaders(next http.Handler) http.Handler {
	https := s.baseURL != nil && s.baseURL.Scheme == "https"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if https {
			// Served at an https address (behind a TLS proxy): browsers
			// keep to https from the first answer on.
			h.Set("Strict-Transport-Security", fmt.Sprintf("max-age=%d", hstsMaxAge))
		}
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// withTimeout bounds a request's context. Streams (server-sent events) and
// large downloads opt out by living in a group without it.
func withTimeout(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// compressibleTypes excludes text/event-stream, which must not be buffered.
var compressibleTypes = []string{
	"text/html", "text/css", "text/plain", "text/javascript", "text/csv",
	"application/javascript", "application/json", "image/svg+xml", "application/yaml",
}

// withCompression gzips (or deflates) answers of the compressible types for
// clients that accept it, except answers to a Range request: a 206's
// Content-Range and Content-Length count bytes of the file as stored, and
// compressing the part would send other bytes under those numbers (chi's
// compressor does not know about ranges). Such a request is answered
// uncompressed, whole or in part.
func withCompression(level int, types ...string) func(http.Handler) http.Handler {
	compress := middleware.Compress(level, types...)
	return func(next http.Handler) http.Handler {
		compressed := compress(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Range") != "" {
				next.ServeHTTP(w, r)
				return
			}
			compressed.ServeHTTP(w, r)
		})
	}
}
