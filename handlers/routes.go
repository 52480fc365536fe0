package handlers

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/accordlab/accord/static"
)

// routes is Accord's one route table. Every route is declared here with
// the protection it needs: signed in, site admin, or a capability inside a
// program (need(capX)), so the authorization policy reads top to bottom.
func (s *Server) routes() http.Handler {
	// Cross-origin protection on every unsafe method: a form posted from
	// another site is refused with 403 (Sec-Fetch-Site / Origin checks).
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.Warn("cross-origin request refused", "request_id", requestID(r.Context()), "path", r.URL.Path)
		s.renderError(w, r, http.StatusForbidden)
	}))

	r := chi.NewRouter()
	r.Use(withRequestID, s.withAccessLog, s.withRecovery, withSecurityHeaders, cop.Handler, s.withTextOnly, middleware.GetHead, middleware.Compress(5, compressibleTypes...))
	r.NotFound(s.showNotFound)
	r.MethodNotAllowed(s.showMethodNotAllowed)

	// Machine endpoints.
	r.Get("/healthz", s.showHealth)
	r.Get("/readyz", s.showReadiness)
	r.Method(http.MethodGet, "/metrics", s.showMetrics())
	r.Method(http.MethodGet, static.Prefix+"*", static.Handler())
	s.keyRoutes(r)

	// Browser pages: session cookie, flash messages, request timeout.
	r.Group(func(r chi.Router) {
		r.Use(s.withSession, s.withFlash)

		// Server-sent events have no request timeout.
		s.streamRoutes(r)

		r.Group(func(r chi.Router) {
			r.Use(withTimeout(s.timeout))
			r.Get("/", s.showHome)
			r.Get("/signin", s.showSignIn)
			r.Post("/signin", s.signIn)
			r.Post("/signout", s.signOut)
			r.Get("/help", s.showHelp)

			r.Group(func(r chi.Router) {
				r.Use(s.requireSignIn)
				r.Get("/verify", s.showVerify)
				r.Post("/verify", s.verifyBundle)
				r.Get("/tokens", s.listTokens)
				r.Post("/tokens", s.createToken)
				r.Post("/tokens/{tokenID}/revoke", s.revokeToken)
				r.Get("/ssh-keys", s.listSSHKeys)
				r.Post("/ssh-keys", s.addSSHKey)
				r.Post("/ssh-keys/{keyID}/remove", s.removeSSHKey)
				r.Get("/programs", s.listPrograms)
				r.With(s.requireAdmin).Post("/programs", s.createProgram)

				r.Route("/programs/{programID}", func(r chi.Router) {
					r.Use(s.inProgram)
					r.With(s.need(capView)).Get("/", s.showProgram)
					r.With(s.need(capView)).Get("/members", s.showMembers)
					r.With(s.need(capOwner)).Post("/members", s.setMember)
					r.With(s.need(capOwner)).Post("/members/{userID}/remove", s.removeMember)
					r.With(s.need(capOwner)).Get("/audit", s.showProgramAudit)
					s.programRoutes(r)
				})

				r.Route("/admin", func(r chi.Router) {
					r.Use(s.requireAdmin)
					r.Get("/", s.showAdmin)
					r.Post("/organizations", s.createOrganization)
					r.Post("/users", s.createUser)
					r.Post("/users/{userID}/disable", s.setUserDisabled(true))
					r.Post("/users/{userID}/enable", s.setUserDisabled(false))
					r.Get("/audit", s.showAdminAudit)
					r.Get("/keys", s.showAdminKeys)
					r.Post("/keys/rotate", s.rotateKey)
					r.Post("/keys/revoke", s.revokeKey)
				})
			})
		})

		// River UI: site admins only (its own single-page app, so it keeps
		// its own assets; still same-origin only).
		if s.riverUI != nil {
			r.With(s.requireSignIn, s.requireAdmin).Handle("/admin/queue", http.RedirectHandler("/admin/queue/", http.StatusMovedPermanently))
			r.With(s.requireSignIn, s.requireAdmin).Handle("/admin/queue/*", s.riverUI)
		}
	})

	// JSON API: bearer tokens only.
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(withTimeout(s.timeout))
		r.Get("/openapi.json", s.showOpenAPI)
		r.Group(func(r chi.Router) {
			r.Use(s.withAPIToken)
			s.apiRoutes(r)
		})
	})
	return r
}
