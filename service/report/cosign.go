package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/store"
)

// Co-signing: the other side of a program adds its signature to a run's
// signed report. Accord takes it only from a signed-in member of the
// program's other organisation (the one that did not request the run), made
// with an SSH key that member registered in Accord beforehand; the new
// bundle version and the report page name the member and their
// organisation. Anything else is refused with the reason.

// CoSignRefusal is a co-signature Accord does not accept, with the reason
// to show the person who uploaded it.
type CoSignRefusal struct{ Reason string }

func (e *CoSignRefusal) Error() string { return "co-signature refused: " + e.Reason }

func refuse(format string, args ...any) error {
	return &CoSignRefusal{Reason: fmt.Sprintf(format, args...)}
}

// CoSignRequest is one upload of a co-signature.
type CoSignRequest struct {
	RunID int64
	// User is the signed-in member who uploads it.
	User store.User
	// Signature is the armored `ssh-keygen -Y sign` output over the
	// bundle's MANIFEST.sha256.
	Signature []byte
	// Audit carries the actor and client address of the audit entry.
	Audit store.AuditEntry
}

// OtherSide is the program's organisation that may co-sign a run: the one
// its requester is not of.
type OtherSide struct {
	OrgID   int64
	OrgName string
	OrgKind string
}

// OtherSideOf finds who may co-sign a run; a run without a requester of
// one of the program's organisations has no other side (a refusal).
func OtherSideOf(ctx context.Context, st *store.Store, run store.Run) (OtherSide, error) {
	program, err := st.ProgramByID(ctx, run.ProgramID)
	if err != nil {
		return OtherSide{}, err
	}
	if run.CreatedBy == nil {
		return OtherSide{}, refuse("run #%d has no requesting member recorded, so Accord cannot tell which side is the other one", run.ID)
	}
	requester, err := st.UserByID(ctx, *run.CreatedBy)
	if err != nil {
		return OtherSide{}, err
	}
	switch {
	case requester.OrganizationID == nil:
	case *requester.OrganizationID == program.VendorOrgID:
		return OtherSide{OrgID: program.CustomerOrgID, OrgName: program.CustomerName, OrgKind: "customer"}, nil
	case *requester.OrganizationID == program.CustomerOrgID:
		return OtherSide{OrgID: program.VendorOrgID, OrgName: program.VendorName, OrgKind: "vendor"}, nil
	}
	return OtherSide{}, refuse("run #%d was requested by someone of neither organisation of the program, so it has no other side", run.ID)
}

// CoSign checks a co-signature and adds it to the run's report as a new
// bundle version; it returns the accepted co-signature. A refusal is a
// *CoSignRefusal.
func CoSign(ctx context.Context, st *store.Store, req CoSignRequest) (store.ReportCosignature, error) {
	var out store.ReportCosignature
	run, err := st.RunByID(ctx, req.RunID)
	if err != nil {
		return out, err
	}
	other, err := OtherSideOf(ctx, st, run)
	if err != nil {
		return out, err
	}
	u := req.User
	if u.OrganizationID == nil || *u.OrganizationID != other.OrgID {
		mine := "no organisation"
		if u.OrganizationID != nil {
			mine = fmt.Sprintf("%s (%s), the side that requested the run", u.OrgName, u.OrgKind)
		}
		return out, refuse("only a member of %s (%s), the other organisation of this program, may co-sign run #%d; you are of %s",
			other.OrgName, other.OrgKind, run.ID, mine)
	}
	pub, fingerprint, err := attest.CoSignatureKey(req.Signature)
	if err != nil {
		return out, refuse("the file is not an ssh-keygen -Y sign signature (%s)", strings.TrimPrefix(err.Error(), "attest: co-sign: "))
	}
	key, err := st.UserSSHKeyByFingerprint(ctx, fingerprint)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && key.UserID != u.ID):
		return out, refuse("it is signed with key %s, which is not one of your registered SSH signing keys: register the key first (SSH keys), then sign again", fingerprint)
	case err != nil:
		return out, err
	}
	existing, err := st.ListReportCosignatures(ctx, run.ID)
	if err != nil {
		return out, err
	}
	if slices.ContainsFunc(existing, func(c store.ReportCosignature) bool { return c.UserID == u.ID }) {
		return out, refuse("you have already co-signed this report")
	}
	rep, err := st.RunLatestReport(ctx, run.ID)
	if err != nil {
		return out, err
	}
	src, err := st.Artifacts().Open(ctx, rep.BundleSHA256)
	if err != nil {
		return out, err
	}
	defer src.Close()

	name := CoSignerName(other.OrgKind, u)
	now := time.Now().UTC()
	who := fmt.Sprintf("%s <%s>, member of %s (%s); key %q %s, registered in Accord %s; accepted by Accord %s",
		u.DisplayName, u.Email, other.OrgName, other.OrgKind, key.Name, fingerprint,
		key.CreatedAt.UTC().Format(time.RFC3339), now.Format(time.RFC3339))
	// The new bundle goes to a temporary file and streams from there into
	// the artifact store: a bundle is as large as its run's files.
	bundle, err := os.CreateTemp("", "accord-cosigned-*.tar.gz")
	if err != nil {
		return out, fmt.Errorf("co-sign run %d: %w", run.ID, err)
	}
	defer os.Remove(bundle.Name())
	defer bundle.Close()
	err = attest.AddCoSignature(ctx, src, bundle, attest.CoSignature{Name: name, Signature: req.Signature,
		AllowedSigners: attest.CoSignerAllowedSigners(u.Email, who, pub)})
	if err != nil {
		if strings.Contains(err.Error(), "is not over this bundle") {
			return out, refuse("the signature does not verify over this report's MANIFEST.sha256 in namespace %s: sign the manifest of the bundle you downloaded", attest.Namespace)
		}
		if strings.Contains(err.Error(), "already has") {
			return out, refuse("you have already co-signed this report")
		}
		return out, fmt.Errorf("co-sign run %d: %w", run.ID, err)
	}
	if _, err := bundle.Seek(0, io.SeekStart); err != nil {
		return out, fmt.Errorf("co-sign run %d: %w", run.ID, err)
	}
	err = st.InTx(ctx, func(tx *store.Store) error {
		blob, err := tx.Artifacts().Put(ctx, bundle)
		if err != nil {
			return err
		}
		next, err := tx.AddRunReport(ctx, store.RunReport{RunID: run.ID, BundleSHA256: blob.SHA256, Size: blob.Size, ManifestSHA256: rep.ManifestSHA256,
			KeyID: rep.KeyID, Cosigners: append(slices.Clone(rep.Cosigners), name), CreatedBy: &u.ID})
		if err != nil {
			return err
		}
		out, err = tx.AddReportCosignature(ctx, store.ReportCosignature{RunID: run.ID, ReportVersion: next.Version, UserID: u.ID,
			OrganizationID: other.OrgID, SSHKeyID: key.ID, Fingerprint: fingerprint, FileName: attest.CoSignatureFile(name)})
		if err != nil {
			return err
		}
		a := req.Audit
		a.Action, a.ProgramID, a.Target = "report_cosigned", &run.ProgramID, fmt.Sprintf("run %d", run.ID)
		a.Details = map[string]any{"organisation": other.OrgName, "side": other.OrgKind, "key": fingerprint, "key_name": key.Name,
			"file": attest.CoSignatureFile(name), "report_version": next.Version}
		return tx.Audit(ctx, a)
	})
	if errors.Is(err, store.ErrConflict) {
		return out, refuse("you have already co-signed this report")
	}
	return out, err
}

var notNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// CoSignerName names a member's co-signature files: their side, the local
// part of their e-mail made file-safe, and their user id, so that two
// members never share one (MANIFEST.sha256.customer-erin-17.sig).
func CoSignerName(side string, u store.User) string {
	local, _, _ := strings.Cut(strings.ToLower(u.Email), "@")
	local = strings.Trim(notNameChars.ReplaceAllString(local, "-"), "-")
	if len(local) > 40 {
		local = local[:40]
	}
	name := side + "-"
	if local != "" {
		name += local + "-"
	}
	return fmt.Sprintf("%s%d", name, u.ID)
}

// ParseSigningKey reads an SSH public key a user registers: one
// authorized_keys line, Ed25519 or ECDSA P-256 (what Accord verifies), and
// returns it in normal form with its fingerprint.
func ParseSigningKey(text string) (authorized, fingerprint string, err error) {
	pub, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(text)))
	if err != nil {
		return "", "", errors.New("not an SSH public key line (paste the .pub file, e.g. ~/.ssh/id_ed25519.pub)")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return "", "", errors.New("paste one key only")
	}
	k, err := attest.NewPublicKey(pub)
	if err != nil {
		return "", "", fmt.Errorf("%s keys are not accepted: use an Ed25519 or ECDSA P-256 key", pub.Type())
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), k.ID, nil
}
