package attest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/accordlab/accord/attest/sshsig"
)

// cosignerNamePattern is what NAME may be in MANIFEST.sha256.NAME.sig.
const cosignerNamePattern = `[a-z0-9][a-z0-9_-]{0,63}`

var cosignerName = regexp.MustCompile(`^` + cosignerNamePattern + `$`)

// unlistedPathsERE matches, as a whole path from the bundle's top
// directory, the only files MANIFEST.sha256 does not list: itself, its
// signature and co-signatures. VERIFY.md's find | grep -v -x -E uses it, and
// the bundle reader the same rule (isSignatureFile), so both see the same
// files as unlisted.
const unlistedPathsERE = `MANIFEST\.sha256(\.sig|\.` + cosignerNamePattern + `\.(sig|allowed_signers))?`

var unlistedPaths = regexp.MustCompile(`^(` + unlistedPathsERE + `)$`)

// isSignatureFile reports whether rel (a path under the bundle's top
// directory) is the manifest's signature or a co-signature file.
func isSignatureFile(rel string) bool {
	return rel != FileManifest && unlistedPaths.MatchString(rel)
}

// CoSignature is a signature over a bundle's MANIFEST.sha256 by another
// party (`ssh-keygen -Y sign -n accord-report@accordlab`), with the
// allowed_signers line that names its signer.
type CoSignature struct {
	// Name goes into the file names MANIFEST.sha256.NAME.sig and
	// MANIFEST.sha256.NAME.allowed_signers: lower-case letters, digits, - and _.
	Name           string
	Signature      []byte
	AllowedSigners []byte
}

// CoSignerAllowedSigners is a co-signature's allowed_signers file as Accord
// writes it: a comment line saying whom it accepted the signature from
// (ssh-keygen skips comments; accord verify shows it), then the key's line
// for principal, restricted to Namespace.
func CoSignerAllowedSigners(principal, who string, key ssh.PublicKey) []byte {
	who = strings.Join(strings.Fields(who), " ")
	line := fmt.Sprintf("%s namespaces=%q %s", quotePrincipal(principal), Namespace, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))))
	return []byte(cosignerCommentPrefix + who + "\n" + line + "\n")
}

const cosignerCommentPrefix = "# co-signer: "

// CoSignatureFile is the file a co-signature named NAME goes to.
func CoSignatureFile(name string) string { return cosigPrefix + name + cosigSigExt }

// ValidCoSignerName reports whether a name can go into co-signature file
// names (lower-case letters, digits, - and _, at most 64).
func ValidCoSignerName(name string) bool { return cosignerName.MatchString(name) && name != "sha256" }

// CoSignatureKey reads an armored `ssh-keygen -Y sign` signature and
// returns the key that made it and its fingerprint (not verified: that
// needs the manifest, AddCoSignature does it).
func CoSignatureKey(armored []byte) (ssh.PublicKey, string, error) {
	sig, err := sshsig.Unarmor(armored)
	if err != nil {
		return nil, "", fmt.Errorf("attest: co-sign: %w", err)
	}
	return sig.PublicKey, KeyID(sig.PublicKey), nil
}

// coSignerComment reads the co-signer comment of an allowed_signers file
// ("" when it has none).
func coSignerComment(allowedSigners []byte) string {
	for _, line := range strings.Split(string(allowedSigners), "\n") {
		if who, ok := strings.CutPrefix(strings.TrimSpace(line), cosignerCommentPrefix); ok {
			return who
		}
	}
	return ""
}

// AddCoSignature copies the bundle from r to w with a co-signature added,
// after checking that it verifies over the bundle's manifest with a key its
// allowed_signers line lists. It does not verify the rest of the bundle.
func AddCoSignature(ctx context.Context, r io.Reader, w io.Writer, cs CoSignature) error {
	if !ValidCoSignerName(cs.Name) {
		return fmt.Errorf("attest: co-sign: name %q: use lower-case letters, digits, - and _", cs.Name)
	}
	allowed, err := ParseAllowedSigners(cs.AllowedSigners)
	if err != nil {
		return fmt.Errorf("attest: co-sign: %w", err)
	}
	sig, err := sshsig.Unarmor(cs.Signature)
	if err != nil {
		return fmt.Errorf("attest: co-sign: %w", err)
	}
	id := KeyID(sig.PublicKey)
	if !slices.ContainsFunc(allowed, func(k PublicKey) bool { return k.ID == id }) {
		return fmt.Errorf("attest: co-sign: signature by key %s, which the allowed_signers line does not list for namespace %s", id, Namespace)
	}

	gzr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("attest: co-sign: %w", err)
	}
	defer gzr.Close()
	tr := tar.NewReader(gzr)
	gzw := gzip.NewWriter(w)
	tw := tar.NewWriter(gzw)
	sigName := cosigPrefix + cs.Name + cosigSigExt
	signersName := cosigPrefix + cs.Name + cosigSignersExt
	var (
		top      string
		manifest []byte
		last     *tar.Header
	)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("attest: co-sign: read bundle: %w", err)
		}
		t, rel, _ := strings.Cut(strings.TrimSuffix(hdr.Name, "/"), "/")
		if top == "" {
			top = t
		}
		if rel == sigName || rel == signersName {
			return fmt.Errorf("attest: co-sign: the bundle already has %s", rel)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("attest: co-sign: %w", err)
		}
		var body io.Reader = tr
		var buf bytes.Buffer
		if rel == FileManifest {
			body = io.TeeReader(io.LimitReader(tr, maxMetadataFile), &buf)
		}
		if _, err := io.Copy(tw, body); err != nil {
			return fmt.Errorf("attest: co-sign: copy %s: %w", hdr.Name, err)
		}
		if rel == FileManifest {
			manifest = buf.Bytes()
		}
		last = hdr
	}
	if manifest == nil {
		return fmt.Errorf("attest: co-sign: the bundle has no %s", FileManifest)
	}
	if err := sshsig.Verify(sig, bytes.NewReader(manifest), Namespace); err != nil {
		return fmt.Errorf("attest: co-sign: the signature is not over this bundle's %s: %w", FileManifest, err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{sigName, sig.Armor()}, {signersName, cs.AllowedSigners}} {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: top + "/" + f.name, Size: int64(len(f.data)),
			Mode: 0o644, ModTime: last.ModTime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("attest: co-sign: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("attest: co-sign: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("attest: co-sign: %w", err)
	}
	return gzw.Close()
}
