package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/service/report"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// maxBundleUpload bounds an uploaded bundle (verification, import).
const maxBundleUpload = 1 << 30

// hasReport reports whether the run's results are signed (a bundle can be
// downloaded).
func (s *Server) hasReport(ctx context.Context, run store.Run) bool {
	_, err := s.store.RunLatestReport(ctx, run.ID)
	return err == nil
}

// downloadReport streams the run's signed bundle: the same bytes every time
// (made when the run was signed; co-signing makes a new version).
func (s *Server) downloadReport(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	rep, err := s.store.RunLatestReport(r.Context(), run.ID)
	if errors.Is(err, store.ErrNotFound) {
		if isAPI(r) {
			writeJSON(w, http.StatusNotFound, apiError{Error: "this run has no signed report yet (it is signed once it is judged, or once it is done when it has no gate set)", RequestID: requestID(r.Context())})
			return
		}
		s.renderError(w, r, http.StatusNotFound)
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	body, err := s.store.Artifacts().Open(r.Context(), rep.BundleSHA256)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	defer body.Close()
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, web.ReportFileName(run.ID, rep.Version)))
	serveBlob(w, r, rep.BundleSHA256, body)
}

// showReport is the run's report page: how to verify, who signed, and the
// co-signing form.
func (s *Server) showReport(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	s.renderReportPage(w, r, http.StatusOK, run, "")
}

func (s *Server) renderReportPage(w http.ResponseWriter, r *http.Request, status int, run store.Run, errText string) {
	pr := programFrom(r.Context())
	v := viewerFrom(r.Context())
	d := web.ReportPageData{Run: run, Error: errText, CanCosign: pr.can(capEngineer)}
	var err error
	if d.Cosignatures, err = s.store.ListReportCosignatures(r.Context(), run.ID); err != nil {
		s.serverError(w, r, err)
		return
	}
	other, err := report.OtherSideOf(r.Context(), s.store, run)
	var refusal *report.CoSignRefusal
	switch {
	case errors.As(err, &refusal):
		d.CosignBlocked = refusal.Reason
	case err != nil:
		s.serverError(w, r, err)
		return
	default:
		d.OtherSide = other.OrgName + " (" + other.OrgKind + ")"
		d.IsOtherSide = v.User.OrganizationID != nil && *v.User.OrganizationID == other.OrgID
		d.CosignFile = attest.CoSignatureFile(report.CoSignerName(other.OrgKind, v.User))
	}
	if d.SSHKeys, err = s.store.ListUserSSHKeys(r.Context(), v.ID); err != nil {
		s.serverError(w, r, err)
		return
	}
	rep, err := s.store.RunLatestReport(r.Context(), run.ID)
	switch {
	case err == nil:
		d.Report = &rep
	case !errors.Is(err, store.ErrNotFound):
		s.serverError(w, r, err)
		return
	}
	if d.Attestations, err = s.store.RunAttestations(r.Context(), run.ID); err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, fmt.Sprintf("Report of run #%d", run.ID), "programs", s.runCrumbs(pr, fmt.Sprintf("#%d report", run.ID))...)
	s.render(w, r, status, web.ReportPage(p, pr.ProgramAccess, d))
}

// cosignReport adds the other side's SSH signature of the bundle's manifest
// (`ssh-keygen -Y sign -n accord-report@accordlab`) as a new version of the
// bundle, when the signed-in member is of the program's other organisation
// and signed with a key they registered; otherwise it says why not.
func (s *Server) cosignReport(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	cleanup, err := parseUpload(r, 64<<10)
	defer cleanup()
	if err != nil {
		s.renderReportPage(w, r, http.StatusUnprocessableEntity, run, "Upload your signature file (at most 64 KiB).")
		return
	}
	sig, err := formFile(r, "signature", 64<<10)
	if err != nil || len(bytes.TrimSpace(sig)) == 0 {
		s.renderReportPage(w, r, http.StatusUnprocessableEntity, run, "Choose your signature file (MANIFEST.sha256.NAME.sig) to upload.")
		return
	}
	if _, err := s.store.RunLatestReport(r.Context(), run.ID); err != nil {
		s.notFoundOr(w, r, err)
		return
	}
	_, err = report.CoSign(r.Context(), s.store, report.CoSignRequest{RunID: run.ID, User: v.User, Signature: sig,
		Audit: store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, ClientAddr: clientAddr(r)}})
	var refusal *report.CoSignRefusal
	switch {
	case errors.As(err, &refusal):
		s.renderReportPage(w, r, http.StatusUnprocessableEntity, run, "The co-signature was refused: "+refusal.Reason+".")
		return
	case err != nil:
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", "Co-signature added: the report now carries your signature beside the installation's.")
	redirect(w, r, web.ProgramLink(programFrom(r.Context()).ID, fmt.Sprintf("/runs/%d/report", run.ID)))
}

// formFile reads one uploaded file of at most limit bytes.
func formFile(r *http.Request, field string, limit int64) ([]byte, error) {
	f, _, err := r.FormFile(field)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", field, limit)
	}
	return b, nil
}

// showKeys publishes the installation's public keys.
func (s *Server) showKeys(contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		keys, err := s.keyring.PublicKeys()
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		var body []byte
		switch {
		case strings.HasSuffix(r.URL.Path, ".json"):
			body, err = attest.MarshalKeysJSON(keys)
		case strings.HasSuffix(r.URL.Path, ".pem"):
			body, err = attest.MarshalPEM(keys)
		default:
			body = attest.MarshalAllowedSigners(keys)
		}
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(body)
	}
}

// showKeyPEM publishes one key, active, retired or revoked, as its own PEM
// file (keys.json names each key's file): openssl and cosign read one key.
func (s *Server) showKeyPEM(w http.ResponseWriter, r *http.Request) {
	keys, err := s.keyring.PublicKeys()
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	want := "keys/" + chi.URLParam(r, "keyFile")
	for _, k := range keys {
		if k.PEMFile() != want {
			continue
		}
		body, err := k.PEM()
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(body)
		return
	}
	s.renderError(w, r, http.StatusNotFound)
}

// showVerify is the page where anyone signed in checks a bundle.
func (s *Server) showVerify(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, web.VerifyPage(s.page(r, "Verify a report", "verify"), web.VerifyResult{}))
}

// verifyBundle checks an uploaded bundle against this installation's keys,
// offline, exactly as `accord verify` does.
func (s *Server) verifyBundle(w http.ResponseWriter, r *http.Request) {
	p := s.page(r, "Verify a report", "verify")
	release, ok := s.enterBundleRead(w, r, func(status int, msg string) {
		s.render(w, r, status, web.VerifyPage(p, web.VerifyResult{Error: msg}))
	})
	if !ok {
		return
	}
	defer release()
	r.Body = http.MaxBytesReader(w, r.Body, maxBundleUpload)
	// The upload waits on disk past 1 MiB (ParseMultipartForm's default
	// keeps 32 MiB in memory).
	cleanup, err := parseUpload(r, 1<<20)
	defer cleanup()
	if err != nil {
		status := uploadRefusal(err)
		msg := fmt.Sprintf("The bundle is larger than %d MiB, the most this page checks.", maxBundleUpload>>20)
		if status == http.StatusBadRequest {
			msg = notMultipart
		}
		s.render(w, r, status, web.VerifyPage(p, web.VerifyResult{Error: msg}))
		return
	}
	f, _, err := r.FormFile("bundle")
	if err != nil {
		s.render(w, r, http.StatusUnprocessableEntity, web.VerifyPage(p, web.VerifyResult{Error: "Choose a report bundle (.tar.gz) to check."}))
		return
	}
	defer f.Close()
	keys, err := s.keyring.KeySet()
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	h := sha256.New()
	report, verr := attest.VerifyBundle(r.Context(), io.TeeReader(f, h), keys)
	res := web.VerifyResult{Checked: true, OK: verr == nil, SHA256: hex.EncodeToString(h.Sum(nil))}
	if report != nil {
		var text bytes.Buffer
		_ = report.WriteText(&text)
		res.Text = text.String()
	}
	if verr != nil {
		res.Error = verr.Error()
	}
	var limit *attest.LimitError
	status := http.StatusOK
	switch {
	case errors.As(verr, &limit):
		status = http.StatusRequestEntityTooLarge
	case verr != nil:
		status = http.StatusUnprocessableEntity
	}
	s.render(w, r, status, web.VerifyPage(p, res))
}

// showAdminKeys lists the signing keys with rotation and revocation.
func (s *Server) showAdminKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.keyring.PublicKeys()
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	p := s.page(r, "Signing keys", "admin", web.Crumb{Label: "Administration", Href: "/admin"}, web.Crumb{Label: "Signing keys"})
	s.render(w, r, http.StatusOK, web.KeysPage(p, keys))
}

func (s *Server) rotateKey(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	k, err := s.keyring.Rotate(time.Now())
	if err != nil {
		s.setFlash(w, "error", "The key was not rotated: "+err.Error())
		redirect(w, r, "/admin/keys")
		return
	}
	if err := s.store.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "signing_key_rotated", Target: k.ID, ClientAddr: clientAddr(r)}); err != nil {
		s.serverError(w, r, err)
		return
	}
	s.setFlash(w, "ok", "New signing key "+k.ID+" is active; the old one still verifies what it signed before now.")
	redirect(w, r, "/admin/keys")
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	if err := r.ParseForm(); err != nil {
		s.renderError(w, r, http.StatusBadRequest)
		return
	}
	id, reason := r.PostFormValue("key_id"), strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" {
		s.setFlash(w, "error", "Say why the key is revoked.")
		redirect(w, r, "/admin/keys")
		return
	}
	now := time.Now()
	if err := s.keyring.Revoke(id, reason, now); err != nil {
		s.setFlash(w, "error", "The key was not revoked: "+err.Error())
		redirect(w, r, "/admin/keys")
		return
	}
	// Every program's decision log carries on under the active key. The
	// key is revoked whatever happens here: a log not carried over now is
	// carried over by the periodic job (jobs.CarryLogsOverArgs) and before
	// a report of its program is signed.
	carried, carryErr := rollout.CarryLogsOver(r.Context(), s.store, s.keyring, now)
	details := map[string]any{"reason": reason, "decision_logs_signed_again": carried}
	if carryErr != nil {
		s.log.Error("decision logs not carried over after a key revocation: retried by the periodic job and before signing", "request_id", requestID(r.Context()), "key_id", id, "err", carryErr)
		details["decision_logs_carry_over_failed"] = true
	}
	if err := s.store.Audit(r.Context(), store.AuditEntry{ActorUserID: &v.ID, ActorLabel: v.Email, Action: "signing_key_revoked", Target: id, ClientAddr: clientAddr(r),
		Details: details}); err != nil {
		s.serverError(w, r, err)
		return
	}
	if carryErr != nil {
		s.setFlash(w, "warn", fmt.Sprintf("Key revoked at %s. %d decision logs were signed again with the active key; the others could not be yet (see the server's log): retried every %d s and before a report is signed.",
			now.UTC().Format(time.RFC3339), carried, int(jobs.CarryLogsOverInterval.Seconds())))
	} else {
		s.setFlash(w, "ok", fmt.Sprintf("Key revoked at %s: signatures it made from then on are refused; what it signed before still verifies, with a warning. %d decision logs were signed again with the active key.",
			now.UTC().Format(time.RFC3339), carried))
	}
	redirect(w, r, "/admin/keys")
}
