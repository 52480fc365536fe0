package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	s.renderWebhooks(w, r, http.StatusOK, web.WebhookForm{Events: map[string]bool{store.EventStageApproved: true, store.EventStageHalted: true, store.EventStopLoss: true}}, "", 0)
}

func (s *Server) renderWebhooks(w http.ResponseWriter, r *http.Request, status int, f web.WebhookForm, secret string, hookID int64) {
	pr := programFrom(r.Context())
	hooks, err := s.store.ListWebhooks(r.Context(), pr.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	d := web.WebhooksData{Hooks: hooks, Events: store.WebhookEvents, Form: f, NewSecret: secret, NewSecretHook: hookID}
	p := s.page(r, "Webhooks · "+pr.Name, "programs", s.rolloutCrumbs(pr, "Webhooks")...)
	s.render(w, r, status, web.WebhooksPage(p, pr.ProgramAccess, d))
}

// createWebhook registers a URL and shows its secret once (only the
// sealed secret is kept, to sign each delivery).
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	f := web.WebhookForm{URL: strings.TrimSpace(r.PostFormValue("url")), Events: map[string]bool{}, Errors: map[string]string{}}
	var events []string
	for _, e := range r.PostForm["event"] {
		if slices.Contains(store.WebhookEvents, e) && !f.Events[e] {
			f.Events[e] = true
			events = append(events, e)
		}
	}
	if len(f.URL) > 2000 {
		f.Errors["url"] = "Give a URL of at most 2000 characters."
	} else if err := s.egress.CheckURL(ctx, f.URL); err != nil {
		f.Errors["url"] = webhookURLProblem(err)
	}
	if len(events) == 0 {
		f.Errors["events"] = "Choose at least one event."
	}
	if len(f.Errors) > 0 {
		s.renderWebhooks(w, r, http.StatusUnprocessableEntity, f, "", 0)
		return
	}
	secret, err := rollout.NewWebhookSecret()
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	var id int64
	err = s.store.InTx(ctx, func(tx *store.Store) error {
		var err error
		if id, err = tx.CreateWebhook(ctx, pr.ID, f.URL, events, v.ID); err != nil {
			return err
		}
		sealed, err := s.sealer.Seal([]byte(secret), rollout.WebhookSealLabel(id))
		if err != nil {
			return err
		}
		if err := tx.SetWebhookSecret(ctx, id, sealed); err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "webhook_registered", ProgramID: &pr.ID,
			Target: fmt.Sprint(id), ClientAddr: clientAddr(r), Details: map[string]any{"url": redactedURL(f.URL), "events": events}})
	})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.renderWebhooks(w, r, http.StatusOK, web.WebhookForm{Events: map[string]bool{}}, secret, id)
}

// webhookURLProblem says why a webhook URL was refused, for the form.
func webhookURLProblem(err error) string { return egressProblem(err, "Webhooks") }

// egressProblem says why the egress policy refused a URL, for a form:
// what may not be reached, and who can open it.
func egressProblem(err error, what string) string {
	why := strings.TrimPrefix(err.Error(), egress.ErrRefused.Error()+": ")
	if strings.HasPrefix(why, "give ") {
		return "G" + why[1:] + "."
	}
	if errors.Is(err, egress.ErrMetadata) {
		return "Refused: " + why + "."
	}
	return "Refused: " + why + ". " + what + " may not reach the server's own networks (loopback, private, CGNAT, unique-local, link-local) unless an operator allows them with ACCORD_EGRESS_ALLOW_CIDRS; cloud metadata addresses never."
}

// redactedURL drops a URL's query (it may carry a token) for the audit log.
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.RawQuery, u.User = "", nil
	return u.String()
}

// loadWebhook loads {webhookID} within the program.
func (s *Server) loadWebhook(w http.ResponseWriter, r *http.Request) (store.Webhook, bool) {
	id, ok := idParam(r, "webhookID")
	if !ok {
		s.renderError(w, r, http.StatusNotFound)
		return store.Webhook{}, false
	}
	h, err := s.store.GetWebhook(r.Context(), programFrom(r.Context()).ID, id)
	if err != nil {
		s.notFoundOr(w, r, err)
		return h, false
	}
	return h, true
}

// showWebhook is a webhook's delivery log.
func (s *Server) showWebhook(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	h, ok := s.loadWebhook(w, r)
	if !ok {
		return
	}
	deliveries, err := s.store.ListDeliveries(r.Context(), pr.ID, h.ID, 200)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, fmt.Sprintf("Webhook %d · %s", h.ID, pr.Name), "programs", s.rolloutCrumbs(pr, fmt.Sprintf("Webhook %d", h.ID))...)
	s.render(w, r, http.StatusOK, web.WebhookPage(p, pr.ProgramAccess, h, deliveries))
}

func (s *Server) setWebhookActive(active bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pr := programFrom(r.Context())
		v := viewerFrom(r.Context())
		ctx := r.Context()
		h, ok := s.loadWebhook(w, r)
		if !ok {
			return
		}
		action := "webhook_disabled"
		if active {
			action = "webhook_enabled"
		}
		err := s.store.InTx(ctx, func(tx *store.Store) error {
			if err := tx.SetWebhookActive(ctx, pr.ID, h.ID, active); err != nil {
				return err
			}
			return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: action, ProgramID: &pr.ID, Target: fmt.Sprint(h.ID), ClientAddr: clientAddr(r)})
		})
		if err != nil {
			s.notFoundOr(w, r, err)
			return
		}
		if active {
			s.setFlash(w, "ok", fmt.Sprintf("Webhook %d enabled.", h.ID))
		} else {
			s.setFlash(w, "ok", fmt.Sprintf("Webhook %d disabled: nothing more is sent to it.", h.ID))
		}
		redirect(w, r, web.ProgramLink(pr.ID, "/webhooks"))
	}
}

// redeliverWebhook sends a failed delivery again, as a new delivery with
// the same body (receivers tell repeats apart by the decision's hash).
func (s *Server) redeliverWebhook(w http.ResponseWriter, r *http.Request) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	ctx := r.Context()
	h, ok := s.loadWebhook(w, r)
	if !ok {
		return
	}
	deliveryID, ok := idParam(r, "deliveryID")
	if !ok {
		s.renderError(w, r, http.StatusNotFound)
		return
	}
	back := web.ProgramLink(pr.ID, fmt.Sprintf("/webhooks/%d", h.ID))
	if !h.Active {
		s.setFlash(w, "error", fmt.Sprintf("Webhook %d is disabled: enable it before sending anything again.", h.ID))
		redirect(w, r, back)
		return
	}
	var newID int64
	err := s.store.InTx(ctx, func(tx *store.Store) error {
		var err error
		if newID, err = tx.Redeliver(ctx, pr.ID, h.ID, deliveryID); err != nil {
			return err
		}
		if _, err := s.river.InsertTx(ctx, tx.Tx(), jobs.DeliverWebhookArgs{DeliveryID: newID}, nil); err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "webhook_redelivered", ProgramID: &pr.ID,
			Target: fmt.Sprintf("%d/%d", h.ID, deliveryID), ClientAddr: clientAddr(r)})
	})
	if errors.Is(err, store.ErrDeliveryNotFailed) {
		s.setFlash(w, "error", fmt.Sprintf("Delivery %d has not failed: only a delivery that gave up is sent again.", deliveryID))
		redirect(w, r, back)
		return
	}
	if err != nil {
		s.notFoundOr(w, r, err)
		return
	}
	s.setFlash(w, "ok", fmt.Sprintf("Delivery %d is sent again as delivery %d.", deliveryID, newID))
	redirect(w, r, back)
}
