package handlers

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/static"
)

// routes is Accord's one route table. Every route is declared here with
// the protection it needs: signed in, site admin, or a capability inside a
// program (need(capX)), so the authorization policy reads top to bottom.
// The pages and the API of profiles and gate sets are the same for both
// kinds: specRoutes (specs.go) and apiSpecRoutes (api_specs.go) declare
// them for each, with the same protections.
func (s *Server) routes() http.Handler {
	// Cross-origin protection on every unsafe method: a form posted from
	// another site is refused with 403 (Sec-Fetch-Site / Origin checks).
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.Warn("cross-origin request refused", "request_id", requestID(r.Context()), "path", r.URL.Path)
		s.renderError(w, r, http.StatusForbidden)
	}))

	r := chi.NewRouter()
	r.Use(withRequestID, s.withAccessLog, s.withRecovery, s.withSecurityHeaders, cop.Handler, s.withTextOnly, headAsGet, withCompression(5, compressibleTypes...))
	r.NotFound(s.showNotFound)
	r.MethodNotAllowed(s.showMethodNotAllowed)

	// Machine endpoints.
	r.Get("/healthz", s.showHealth)
	r.Get("/readyz", s.showReadiness)
	if !s.metricsElsewhere {
		r.Method(http.MethodGet, "/metrics", s.MetricsHandler())
	}
	r.Method(http.MethodGet, static.Prefix+"*", static.Handler())

	// Public keys (anyone), for offline verification.
	r.Get("/.well-known/accord/keys.json", s.showKeys("application/json"))
	r.Get("/.well-known/accord/keys.pem", s.showKeys("application/x-pem-file"))
	r.Get("/.well-known/accord/allowed_signers", s.showKeys("text/plain; charset=utf-8"))
	r.Get("/.well-known/accord/keys/{keyFile}", s.showKeyPEM)

	// Browser pages: session cookie, flash messages, request timeout.
	r.Group(func(r chi.Router) {
		r.Use(s.withSession, s.withFlash)

		// Server-sent events have no request timeout.
		r.With(s.requireSignIn, s.inProgram, s.need(capView)).Get("/programs/{programID}/runs/{runID}/events", s.streamRunEvents)

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

					// Profiles and gate sets.
					specRoutes(s, r, profileOps)
					specRoutes(s, r, gateSetOps)

					// Lab hosts and their readiness.
					r.With(s.need(capView)).Get("/hosts", s.listHosts)
					r.With(s.need(capEngineer)).Get("/hosts/new", s.showNewHost)
					r.With(s.need(capEngineer)).Post("/hosts", s.createHost)
					r.With(s.need(capView)).Get("/hosts/{hostID}", s.showHost)
					r.With(s.need(capEngineer)).Post("/hosts/{hostID}/scan", s.scanHost)
					r.With(s.need(capEngineer)).Post("/hosts/{hostID}/pin", s.pinHost)
					r.With(s.need(capEngineer)).Post("/hosts/{hostID}/check", s.checkHost)
					r.With(s.need(capOwner)).Post("/hosts/{hostID}/write-places", s.setHostWritePlaces)
					r.With(s.need(capView)).Get("/hosts/{hostID}/check-status", s.showHostCheckStatus)
					r.With(s.need(capEngineer)).Post("/endpoint-test", s.testEndpoint)
					r.With(s.need(capView)).Get("/readiness", s.showReadinessMatrix)
					r.With(s.need(capView)).Get("/readiness/hosts/{hostID}", s.showHostReadiness)

					// The integration plan.
					r.With(s.need(capView)).Get("/readiness/plan", s.showIntegration)
					r.With(s.need(capView)).Get("/readiness/plan/steps/{planStepID}", s.showIntegrationStep)
					r.With(s.need(capEngineer)).Post("/readiness/plan/steps/{planStepID}", s.updateIntegrationStep)
					r.With(s.need(capEngineer)).Post("/readiness/plan/steps/{planStepID}/signoff", s.signOffIntegrationStep)

					// Runs, their results, reports and imports.
					r.With(s.need(capView)).Get("/runs", s.listRuns)
					r.With(s.need(capEngineer)).Get("/runs/new", s.showNewRun)
					r.With(s.need(capEngineer)).Get("/runs/precheck", s.showRunPrecheck)
					r.With(s.need(capEngineer)).Post("/runs", s.createRun)
					r.With(s.need(capView)).Get("/runs/{runID}", s.showRun)
					r.With(s.need(capEngineer)).Post("/runs/{runID}/cancel", s.cancelRun)
					r.With(s.need(capView)).Get("/runs/{runID}/metrics.csv", s.downloadMetricsCSV)
					r.With(s.need(capView)).Get("/runs/{runID}/artifacts/*", s.downloadArtifact)
					r.With(s.need(capView)).Get("/runs/{runID}/report.tar.gz", s.downloadReport)
					r.With(s.need(capView)).Get("/runs/{runID}/report", s.showReport)
					r.With(s.need(capEngineer)).Post("/runs/{runID}/report/cosign", s.cosignReport)
					r.With(s.need(capEngineer)).Get("/runs/import", s.showImport)
					r.With(s.need(capEngineer)).Post("/runs/import/result", s.importResultFile)
					r.With(s.need(capEngineer)).Post("/runs/import/report", s.importSignedReport)
					r.With(s.need(capView)).Get("/compare", s.showCompare)
					r.With(s.need(capView)).Get("/trend", s.showTrend)

					// The rollout: board, stages editor, decisions, webhooks.
					r.With(s.need(capView)).Get("/rollout", s.showRollout)
					r.With(s.need(capOwner)).Get("/rollout/plan", s.showRolloutStages)
					r.With(s.need(capOwner)).Post("/rollout/stages", s.addStage)
					r.With(s.need(capOwner)).Post("/rollout/stages/{stageID}/edit", s.editStage)
					r.With(s.need(capOwner)).Post("/rollout/stages/{stageID}/delete", s.deleteStage)
					r.With(s.need(capView)).Get("/rollout/stages/{stageID}/watch", s.showWatch)
					r.With(s.need(capView)).Get("/rollout/stages/{stageID}/watch/checks.csv", s.downloadWatchChecks)
					r.With(s.need(capOwner)).Post("/rollout/stages/{stageID}/watch", s.setWatch)
					r.With(s.need(capOwner)).Post("/rollout/stages/{stageID}/watch/delete", s.deleteWatch)
					r.With(s.need(capApprove)).Get("/rollout/stages/{stageID}/approve", s.confirmApproval)
					r.With(s.need(capApprove)).Post("/rollout/stages/{stageID}/approve", s.decideOnStage(acceptance.DecisionApprove))
					r.With(s.need(capApprove)).Post("/rollout/stages/{stageID}/waive", s.decideOnStage(acceptance.DecisionWaive))
					r.With(s.need(capApprove)).Post("/rollout/stages/{stageID}/reject", s.decideOnStage(acceptance.DecisionReject))
					r.With(s.need(capApprove)).Post("/rollout/stages/{stageID}/resume", s.decideOnStage(acceptance.DecisionResume))
					r.With(s.need(decisionNeeds(acceptance.DecisionHalt))).Post("/rollout/stages/{stageID}/halt", s.decideOnStage(acceptance.DecisionHalt))
					r.With(s.need(capApprove)).Post("/rollout/rollback", s.requestRollback)
					r.With(s.need(capView)).Get("/decisions", s.showDecisions)
					r.With(s.need(capView)).Get("/decisions/export", s.exportDecisions)
					r.With(s.need(capView)).Get("/decisions/head.json", s.showLogHead)
					r.With(s.need(capOwner)).Get("/webhooks", s.listWebhooks)
					r.With(s.need(capOwner)).Post("/webhooks", s.createWebhook)
					r.With(s.need(capOwner)).Get("/webhooks/{webhookID}", s.showWebhook)
					r.With(s.need(capOwner)).Post("/webhooks/{webhookID}/disable", s.setWebhookActive(false))
					r.With(s.need(capOwner)).Post("/webhooks/{webhookID}/enable", s.setWebhookActive(true))
					r.With(s.need(capOwner)).Post("/webhooks/{webhookID}/deliveries/{deliveryID}/redeliver", s.redeliverWebhook)
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
		// Deployers (Argo Rollouts, Flagger): tokens with the deploy scope
		// alone, which read nothing else (deployers.go).
		r.Route("/deploy/programs/{programID}/stages/{stage}", func(r chi.Router) {
			r.Use(s.withDeployToken, s.inProgram, s.need(capView))
			r.Get("/", s.showStageGate)
			r.Post("/flagger/confirm-rollout", s.answerFlagger(acceptance.FlaggerConfirmRollout))
			r.Post("/flagger/confirm-promotion", s.answerFlagger(acceptance.FlaggerConfirmPromotion))
			r.Post("/flagger/rollback", s.answerFlagger(acceptance.FlaggerRollback))
		})
		r.Group(func(r chi.Router) {
			r.Use(s.withAPIToken)
			r.Get("/programs", s.apiListPrograms)
			r.Route("/programs/{programID}", func(r chi.Router) {
				r.Use(s.inProgram)
				r.With(s.need(capView)).Get("/", s.apiShowProgram)
				apiSpecRoutes(s, r, profileOps)
				apiSpecRoutes(s, r, gateSetOps)
				// Hosts and runs for pipelines (accord submit).
				r.With(s.need(capView)).Get("/hosts", s.apiListHosts)
				r.With(s.need(capView)).Get("/runs", s.apiListRuns)
				r.With(s.need(capEngineer)).Post("/runs", s.apiCreateRun)
				r.With(s.need(capEngineer)).Post("/runs/import", s.apiImportResult)
				r.With(s.need(capView)).Get("/runs/{runID}", s.apiShowRun)
				r.With(s.need(capView)).Get("/runs/{runID}/evaluation", s.apiShowEvaluation)
				r.With(s.need(capView)).Get("/runs/{runID}/measurements", s.apiListMeasurements)
				r.With(s.need(capEngineer)).Post("/runs/{runID}/cancel", s.apiCancelRun)
				r.With(s.need(capView)).Get("/runs/{runID}/report.tar.gz", s.downloadReport)
				// The rollout and the decision log.
				r.With(s.need(capView)).Get("/rollout", s.apiShowRollout)
				// Each kind needs its own capability (decisionNeeds): halting
				// is open to every member, the rest to approvers.
				r.With(s.need(capHalt)).Post("/rollout/decisions", s.apiCreateDecision)
				r.With(s.need(capView)).Get("/decisions", s.apiListDecisions)
				r.With(s.need(capView)).Get("/decisions/export", s.exportDecisions)
				r.With(s.need(capView)).Get("/decisions/head", s.showLogHead)
			})
		})
	})
	return r
}
