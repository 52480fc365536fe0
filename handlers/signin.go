package handlers

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// Sign-in throttling: failures counted over a window, per account and per
// client address. The message is the same whether or not the email exists.
const (
	throttleWindow      = 15 * time.Minute
	maxFailuresPerEmail = 5
	maxFailuresPerAddr  = 20
)

func (s *Server) showSignIn(w http.ResponseWriter, r *http.Request) {
	if viewerFrom(r.Context()) != nil {
		redirect(w, r, safeNext(r.URL.Query().Get("next")))
		return
	}
	p := s.page(r, "Sign in", "")
	s.render(w, r, http.StatusOK, web.SignIn(p, web.SignInForm{Next: safeNext(r.URL.Query().Get("next")), Demo: s.demo}))
}

func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	form := web.SignInForm{
		Email: strings.TrimSpace(r.PostFormValue("email")),
		Next:  safeNext(r.PostFormValue("next")),
		Demo:  s.demo,
	}
	password := r.PostFormValue("password")
	addr := clientAddr(r)
	ctx := r.Context()
	fail := func(status int, msg string) {
		form.Error = msg
		p := s.page(r, "Sign in", "")
		s.render(w, r, status, web.SignIn(p, form))
	}
	if form.Email == "" || password == "" {
		fail(http.StatusUnprocessableEntity, "Enter your email and password.")
		return
	}
	// This attempt counts as failed until the password proves right, so the
	// count below includes it (and any guesses racing it).
	attempt, err := s.store.BeginSignInAttempt(ctx, form.Email, addr)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	byEmail, byAddr, err := s.store.FailedSignIns(ctx, form.Email, addr, time.Now().Add(-throttleWindow))
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if byEmail > maxFailuresPerEmail || byAddr > maxFailuresPerAddr {
		_ = s.store.Audit(ctx, store.AuditEntry{ActorLabel: form.Email, Action: "signin_throttled", ClientAddr: addr})
		fail(http.StatusTooManyRequests, "Too many failed sign-in attempts. Wait 15 minutes and try again, or ask an administrator.")
		return
	}
	user, err := s.store.UserByEmail(ctx, form.Email)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.serverError(w, r, err)
		return
	}
	// CheckPassword costs the same whether or not the user exists.
	ok := auth.CheckPassword(user.PasswordHash, password) && !user.Disabled
	if ok {
		if err := s.store.SignInSucceeded(ctx, attempt); err != nil {
			s.serverError(w, r, err)
			return
		}
	}
	if !ok {
		entry := store.AuditEntry{ActorLabel: form.Email, Action: "signin_failed", ClientAddr: addr}
		if user.ID != 0 {
			entry.ActorUserID = &user.ID
		}
		_ = s.store.Audit(ctx, entry)
		fail(http.StatusUnauthorized, "That email and password do not match an active account.")
		return
	}
	now := time.Now()
	sess := store.Session{ID: auth.NewID(), UserID: user.ID, ExpiresAt: now.Add(sessionLifetime), ClientAddr: addr, UserAgent: r.UserAgent()}
	token, err := s.keys.Issue(auth.AudienceWeb, user.ID, sess.ID, nil, now, sess.ExpiresAt)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	err = s.store.InTx(ctx, func(tx *store.Store) error {
		if err := tx.CreateSession(ctx, sess); err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorUserID: &user.ID, ActorLabel: user.Email, Action: "signin", ClientAddr: addr})
	})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setSessionCookie(w, token)
	redirect(w, r, form.Next)
}

func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	if v := viewerFrom(r.Context()); v != nil && v.SessionID != "" {
		if err := s.store.RevokeSession(r.Context(), v.SessionID); err != nil {
			s.serverError(w, r, err)
			return
		}
		_ = s.store.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "signout", ClientAddr: clientAddr(r)})
	}
	s.clearSessionCookie(w)
	s.setFlash(w, "ok", "You are signed out.")
	redirect(w, r, "/signin")
}
