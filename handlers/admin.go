package handlers

import (
	"errors"
	"net/http"
	"net/mail"
	"strconv"
	"strings"

	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

func (s *Server) showAdmin(w http.ResponseWriter, r *http.Request) {
	s.renderAdmin(w, r, http.StatusOK, web.AdminForms{OrgKind: "vendor"})
}

func (s *Server) renderAdmin(w http.ResponseWriter, r *http.Request, status int, f web.AdminForms) {
	orgs, err := s.store.ListOrganizations(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	users, err := s.store.ListUsers(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, "Administration", "admin")
	s.render(w, r, status, web.AdminPage(p, orgs, users, f))
}

func (s *Server) createOrganization(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	f := web.AdminForms{OrgName: strings.TrimSpace(r.PostFormValue("org_name")), OrgKind: r.PostFormValue("org_kind"), Errors: map[string]string{}}
	if f.OrgName == "" || len(f.OrgName) > 200 {
		f.Errors["org_name"] = "Give the organisation a name of at most 200 characters."
	}
	if f.OrgKind != "vendor" && f.OrgKind != "customer" {
		f.Errors["org_kind"] = "Choose vendor or customer."
	}
	if len(f.Errors) == 0 {
		err := s.store.InTx(r.Context(), func(tx *store.Store) error {
			if _, err := tx.CreateOrganization(r.Context(), f.OrgName, f.OrgKind); err != nil {
				return err
			}
			return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "organization_created", Target: f.OrgName, ClientAddr: clientAddr(r)})
		})
		switch {
		case errors.Is(err, store.ErrConflict):
			f.Errors["org_name"] = "An organisation with that name exists already."
		case err != nil:
			s.serverError(w, r, err)
			return
		default:
			s.setFlash(w, "ok", "Organisation added.")
			redirect(w, r, "/admin")
			return
		}
	}
	s.renderAdmin(w, r, http.StatusUnprocessableEntity, f)
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	f := web.AdminForms{
		Email: strings.TrimSpace(r.PostFormValue("email")), DisplayName: strings.TrimSpace(r.PostFormValue("display_name")),
		UserOrg: r.PostFormValue("user_org"), MakeAdmin: r.PostFormValue("is_admin") == "1", OrgKind: "vendor",
		Errors: map[string]string{},
	}
	if addr, err := mail.ParseAddress(f.Email); err != nil || addr.Address != f.Email {
		f.Errors["email"] = "Enter a plain email address such as ana@example.com."
	}
	if f.DisplayName == "" || len(f.DisplayName) > 200 {
		f.Errors["display_name"] = "Enter the person's name (at most 200 characters)."
	}
	hash, err := auth.HashPassword(r.PostFormValue("password"))
	if err != nil {
		f.Errors["password"] = "The password is too short or too long: " + err.Error() + "."
	}
	var orgID *int64
	if f.UserOrg != "" {
		id, err := strconv.ParseInt(f.UserOrg, 10, 64)
		if err != nil {
			f.Errors["user_org"] = "Choose an organisation."
		}
		orgID = &id
	}
	if len(f.Errors) == 0 {
		err := s.store.InTx(r.Context(), func(tx *store.Store) error {
			id, err := tx.CreateUser(r.Context(), store.NewUser{Email: f.Email, DisplayName: f.DisplayName, PasswordHash: hash, OrganizationID: orgID, IsAdmin: f.MakeAdmin})
			if err != nil {
				return err
			}
			return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "user_created",
				Target: "user " + strconv.FormatInt(id, 10), ClientAddr: clientAddr(r), Details: map[string]any{"email": f.Email, "admin": f.MakeAdmin}})
		})
		switch {
		case errors.Is(err, store.ErrConflict):
			f.Errors["email"] = "An account with that email exists already."
		case err != nil:
			s.serverError(w, r, err)
			return
		default:
			s.setFlash(w, "ok", "Account created.")
			redirect(w, r, "/admin")
			return
		}
	}
	s.renderAdmin(w, r, http.StatusUnprocessableEntity, f)
}

func (s *Server) setUserDisabled(disabled bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := viewerFrom(r.Context())
		id, ok := idParam(r, "userID")
		if !ok || id == v.ID {
			s.renderError(w, r, http.StatusNotFound)
			return
		}
		action := "user_enabled"
		if disabled {
			action = "user_disabled"
		}
		err := s.store.InTx(r.Context(), func(tx *store.Store) error {
			if err := tx.SetUserDisabled(r.Context(), id, disabled); err != nil {
				return err
			}
			if disabled {
				// Sessions and API tokens end for good: enabling the
				// account again brings neither back.
				if err := tx.RevokeUserSessions(r.Context(), id); err != nil {
					return err
				}
				if err := tx.RevokeUserAPITokens(r.Context(), id); err != nil {
					return err
				}
			}
			return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: action, Target: "user " + strconv.FormatInt(id, 10), ClientAddr: clientAddr(r)})
		})
		if errors.Is(err, store.ErrNotFound) {
			s.renderError(w, r, http.StatusNotFound)
			return
		}
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		redirect(w, r, "/admin")
	}
}

func (s *Server) showAdminAudit(w http.ResponseWriter, r *http.Request) {
	entries, err := s.store.ListAudit(r.Context(), store.AuditFilter{Limit: 500})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, "Audit log", "admin", web.Crumb{Label: "Administration", Href: "/admin"}, web.Crumb{Label: "Audit log"})
	s.render(w, r, http.StatusOK, web.AuditPage(p, nil, entries))
}
