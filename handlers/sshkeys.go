package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// SSH signing keys: each user registers the public keys they co-sign
// reports with (audited); a co-signature is accepted only with one of them.

func (s *Server) listSSHKeys(w http.ResponseWriter, r *http.Request) {
	s.renderSSHKeys(w, r, http.StatusOK, "")
}

func (s *Server) renderSSHKeys(w http.ResponseWriter, r *http.Request, status int, errText string) {
	v := viewerFrom(r.Context())
	keys, err := s.store.ListUserSSHKeys(r.Context(), v.ID)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.render(w, r, status, web.SSHKeysPage(s.page(r, "SSH signing keys", "ssh-keys"), keys, errText))
}

// addSSHKey registers a public key for the signed-in user.
func (s *Server) addSSHKey(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	if name == "" || len(name) > 100 {
		s.renderSSHKeys(w, r, http.StatusUnprocessableEntity, "Give the key a name of at most 100 characters, such as the machine it is on.")
		return
	}
	authorized, fingerprint, err := report.ParseSigningKey(r.PostFormValue("public_key"))
	if err != nil {
		s.renderSSHKeys(w, r, http.StatusUnprocessableEntity, "The key was not registered: "+err.Error()+".")
		return
	}
	err = s.store.InTx(r.Context(), func(tx *store.Store) error {
		k, err := tx.AddUserSSHKey(r.Context(), store.UserSSHKey{UserID: v.ID, Name: name, PublicKey: authorized, Fingerprint: fingerprint})
		if err != nil {
			return err
		}
		return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "ssh_key_registered", Target: fingerprint,
			ClientAddr: clientAddr(r), Details: map[string]any{"key_id": k.ID, "name": name}})
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		s.renderSSHKeys(w, r, http.StatusUnprocessableEntity, "The key was not registered: "+fingerprint+" is already registered to an account.")
		return
	case err != nil:
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", "Key "+fingerprint+" registered: you can co-sign reports with it.")
	redirect(w, r, "/ssh-keys")
}

// removeSSHKey removes one of the signed-in user's keys.
func (s *Server) removeSSHKey(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "keyID"), 10, 64)
	if err != nil {
		s.renderError(w, r, http.StatusNotFound)
		return
	}
	err = s.store.InTx(r.Context(), func(tx *store.Store) error {
		k, err := tx.RemoveUserSSHKey(r.Context(), v.ID, id)
		if err != nil {
			return err
		}
		return tx.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "ssh_key_removed", Target: k.Fingerprint,
			ClientAddr: clientAddr(r), Details: map[string]any{"key_id": k.ID, "name": k.Name}})
	})
	if err != nil {
		s.notFoundOr(w, r, err)
		return
	}
	s.setFlash(w, "ok", "Key removed: co-signatures made with it stay, new ones are refused.")
	redirect(w, r, "/ssh-keys")
}
