package handlers

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	s.renderTokens(w, r, http.StatusOK, "", "")
}

func (s *Server) renderTokens(w http.ResponseWriter, r *http.Request, status int, newToken, errText string) {
	v := viewerFrom(r.Context())
	tokens, err := s.store.ListAPITokens(r.Context(), v.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, "API tokens", "tokens")
	s.render(w, r, status, web.TokensPage(p, tokens, newToken, auth.AllScopes, errText))
}

// createToken mints a token and shows it once; only its id is stored.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	scopes := r.PostForm["scope"]
	days, err := strconv.Atoi(r.PostFormValue("expires_days"))
	switch {
	case name == "" || len(name) > 100:
		s.renderTokens(w, r, http.StatusUnprocessableEntity, "", "Give the token a name of at most 100 characters, such as the pipeline that will use it.")
		return
	case len(scopes) == 0:
		s.renderTokens(w, r, http.StatusUnprocessableEntity, "", "Choose at least one scope.")
		return
	case err != nil || days < 1 || days > 365:
		s.renderTokens(w, r, http.StatusUnprocessableEntity, "", "The token must expire after 1 to 365 days.")
		return
	}
	for _, sc := range scopes {
		if !slices.Contains(auth.AllScopes, sc) {
			s.renderTokens(w, r, http.StatusUnprocessableEntity, "", "Unknown scope.")
			return
		}
	}
	if slices.Contains(scopes, auth.ScopeDeploy) && len(scopes) > 1 {
		s.renderTokens(w, r, http.StatusUnprocessableEntity, "", "A deploy token has the deploy scope alone: a deployer needs nothing else. Create another token for the rest.")
		return
	}
	if !slices.Contains(scopes, auth.ScopeRead) && !slices.Contains(scopes, auth.ScopeDeploy) {
		scopes = append([]string{auth.ScopeRead}, scopes...) // every other API call reads
	}
	now := time.Now()
	t := store.APIToken{ID: auth.NewID(), UserID: v.ID, Name: name, Scopes: scopes, ExpiresAt: now.Add(time.Duration(days) * 24 * time.Hour)}
	jwtText, err := s.keys.Issue(auth.AudienceAPI, v.ID, t.ID, scopes, now, t.ExpiresAt)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	err = s.store.InTx(r.Context(), func(tx *store.Store) error {
		if err := tx.CreateAPIToken(r.Context(), t); err != nil {
			return err
		}
		return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "token_created", Target: name,
			ClientAddr: clientAddr(r), Details: map[string]any{"token_id": t.ID, "scopes": scopes, "expires_at": t.ExpiresAt}})
	})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.renderTokens(w, r, http.StatusCreated, jwtText, "")
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	id := chi.URLParam(r, "tokenID")
	err := s.store.InTx(r.Context(), func(tx *store.Store) error {
		t, err := tx.RevokeAPIToken(r.Context(), v.ID, id)
		if err != nil {
			return err
		}
		return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "token_revoked", Target: t.Name,
			ClientAddr: clientAddr(r), Details: map[string]any{"token_id": t.ID}})
	})
	if errors.Is(err, store.ErrNotFound) {
		s.renderError(w, r, http.StatusNotFound)
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", "Token revoked.")
	redirect(w, r, "/tokens")
}
