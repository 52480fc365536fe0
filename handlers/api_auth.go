package handlers

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/store"
)

// withAPIToken authenticates /api/v1 requests by `Authorization: Bearer`
// only; session cookies are not accepted there, so a browser page can never
// be tricked into calling the API with the user's session.
func (s *Server) withAPIToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="accord"`)
			writeJSON(w, http.StatusUnauthorized, apiError{Error: "an API token is required (Authorization: Bearer TOKEN)", RequestID: requestID(r.Context())})
			return
		}
		v, ok := s.apiTokenViewer(w, r, token)
		if !ok {
			return
		}
		if !slices.Contains(v.Scopes, auth.ScopeRead) {
			writeJSON(w, http.StatusForbidden, apiError{Error: "this token lacks the read scope", RequestID: requestID(r.Context())})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyViewer, v)))
	})
}

// apiTokenViewer checks an API token (its signature and expiry, and its
// row: not revoked, its user enabled) and returns its user with the row's
// scopes; false when it answered the request (401, or 500).
func (s *Server) apiTokenViewer(w http.ResponseWriter, r *http.Request, token string) (*viewer, bool) {
	_, claims, err := s.keys.Verify(auth.AudienceAPI, strings.TrimSpace(token), time.Now())
	if err != nil {
		s.log.Debug("API token refused", "request_id", requestID(r.Context()), "err", err)
		writeJSON(w, http.StatusUnauthorized, apiError{Error: "the API token is invalid, expired or revoked", RequestID: requestID(r.Context())})
		return nil, false
	}
	tok, user, err := s.store.ActiveAPIToken(r.Context(), claims.ID)
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusUnauthorized, apiError{Error: "the API token is invalid, expired or revoked", RequestID: requestID(r.Context())})
		return nil, false
	}
	if err != nil {
		s.serverError(w, r, err)
		return nil, false
	}
	v := newViewer(user)
	v.TokenID = tok.ID
	v.Scopes = tok.Scopes // the row's scopes are authoritative
	return v, true
}

// apiScopeAllows maps a capability to the token scope it needs.
func apiScopeAllows(r *http.Request, c capability) bool {
	v := viewerFrom(r.Context())
	if v == nil {
		return false
	}
	switch c {
	case capView:
		return slices.Contains(v.Scopes, auth.ScopeRead)
	case capEngineer:
		return slices.Contains(v.Scopes, auth.ScopeRun)
	case capApprove, capHalt:
		return slices.Contains(v.Scopes, auth.ScopeApprove)
	}
	return false // owner actions are not offered to tokens
}
