package attest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/accordlab/accord/attest/internal/strictjson"
)

const (
	// Namespace is the sshsig namespace of report manifests; a signature
	// made for anything else (git commits, files) cannot be replayed here.
	Namespace = "accord-report@accordlab"
	// Principal is the signer identity of the installation key in
	// allowed_signers files (ssh-keygen -Y verify -I accord-signer).
	Principal = "accord-signer"

	// AlgECDSAP256 names the installation key algorithm in keys.json.
	AlgECDSAP256 = "ecdsa-p256-sha256"
	// AlgEd25519 names Ed25519 keys (co-signers' SSH keys).
	AlgEd25519 = "ed25519"
)

// KeyStatus is a key's place in its life.
type KeyStatus string

const (
	// KeyActive signs new material.
	KeyActive KeyStatus = "active"
	// KeyRetired was rotated out: it signs nothing new, and what it signed
	// stays valid.
	KeyRetired KeyStatus = "retired"
	// KeyRevoked must no longer be trusted, for anything it signed.
	KeyRevoked KeyStatus = "revoked"
)

// ErrRevokedKey is wrapped by verification errors caused by a signature of
// a revoked key made at or after its revocation.
var ErrRevokedKey = errors.New("signed by a revoked key")

// ErrRotatedOutKey is wrapped by verification errors caused by a signature
// of a retired key made at or after it was rotated out.
var ErrRotatedOutKey = errors.New("signed by a key after it was rotated out")

// ErrKeyNotYetValid is wrapped by verification errors caused by a signature
// dated before its key was made.
var ErrKeyNotYetValid = errors.New("signed by a key before the key existed")

// PublicKey is a verification key with its status.
type PublicKey struct {
	// ID is the OpenSSH SHA256 fingerprint ("SHA256:...").
	ID        string
	Algorithm string
	Key       crypto.PublicKey
	SSH       ssh.PublicKey
	Status    KeyStatus
	Created   time.Time
	// RetiredAt is when the key was rotated out (zero while active).
	RetiredAt     time.Time
	RevokedAt     time.Time
	RevokedReason string
	// Principal names the signer in allowed_signers form (may be empty).
	Principal string
}

// The key's validity window, as allowed_signers states it and every
// verifier applies it to a signature's time: from the second it was made
// to the second it was rotated out or revoked, both included. Times count
// in whole seconds, as ssh-keygen's valid-after and valid-before do (both
// bounds inclusive), so that all verifiers agree; a signature dated in the
// very second of a revocation still passes.

// ValidAfter is the first second the key may have signed in (zero: no bound).
func (k PublicKey) ValidAfter() time.Time { return wholeSecond(k.Created) }

// ValidBefore is the last second the key may have signed in (zero: no
// bound): the second it was rotated out or revoked, whichever came first.
func (k PublicKey) ValidBefore() time.Time {
	end := wholeSecond(k.RevokedAt)
	if r := wholeSecond(k.RetiredAt); !r.IsZero() && (end.IsZero() || r.Before(end)) {
		end = r
	}
	return end
}

// CheckSignedAt says whether the key may have made a signature dated at:
// nil, or an error wrapping ErrRevokedKey, ErrRotatedOutKey or
// ErrKeyNotYetValid that says when.
func (k PublicKey) CheckSignedAt(at time.Time) error {
	t := wholeSecond(at)
	if k.Status == KeyRevoked && k.RevokedAt.IsZero() {
		return fmt.Errorf("key %s is revoked (%s), since an unknown time: %w", k.ID, k.RevokedReason, ErrRevokedKey)
	}
	if after := k.ValidAfter(); !after.IsZero() && t.Before(after) {
		return fmt.Errorf("key %s was made at %s, after this signature's time %s: %w", k.ID, stamp(k.Created), stamp(at), ErrKeyNotYetValid)
	}
	before := k.ValidBefore()
	if before.IsZero() || !t.After(before) {
		return nil
	}
	if !k.RevokedAt.IsZero() && t.After(wholeSecond(k.RevokedAt)) {
		return fmt.Errorf("key %s was revoked at %s (%s), and this signature is dated %s: %w", k.ID, stamp(k.RevokedAt), k.RevokedReason, stamp(at), ErrRevokedKey)
	}
	return fmt.Errorf("key %s was rotated out at %s, and this signature is dated %s: %w", k.ID, stamp(k.RetiredAt), stamp(at), ErrRotatedOutKey)
}

func wholeSecond(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Second)
}

// stamp is how reports write a time.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// sshTime is ssh-keygen's time form (valid-after, -Overify-time), in UTC.
func sshTime(t time.Time) string { return t.UTC().Format("20060102150405") + "Z" }

// PEMFile is the key's own PEM file, relative to /.well-known/accord/ and
// to a bundle's top directory: keys/ID.pem with the fingerprint made safe
// for file names.
func (k PublicKey) PEMFile() string { return "keys/" + fileSafeID(k.ID) + ".pem" }

// KeyID returns the OpenSSH SHA256 fingerprint of pub: the key id used in
// DSSE signatures, keys.json and reports.
func KeyID(pub ssh.PublicKey) string { return ssh.FingerprintSHA256(pub) }

// NewPublicKey wraps an ECDSA P-256 or Ed25519 public key (crypto or SSH
// form); the status is active unless set later.
func NewPublicKey(key any) (PublicKey, error) {
	var (
		sshKey ssh.PublicKey
		err    error
	)
	switch k := key.(type) {
	case ssh.PublicKey:
		sshKey = k
	default:
		sshKey, err = ssh.NewPublicKey(key)
		if err != nil {
			return PublicKey{}, fmt.Errorf("attest: public key: %w", err)
		}
	}
	cpk, ok := sshKey.(ssh.CryptoPublicKey)
	if !ok {
		return PublicKey{}, fmt.Errorf("attest: public key type %s has no crypto form", sshKey.Type())
	}
	pk := PublicKey{ID: KeyID(sshKey), SSH: sshKey, Key: cpk.CryptoPublicKey(), Status: KeyActive}
	switch k := pk.Key.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return PublicKey{}, errors.New("attest: only P-256 ECDSA keys are supported")
		}
		pk.Algorithm = AlgECDSAP256
	case ed25519.PublicKey:
		pk.Algorithm = AlgEd25519
	default:
		return PublicKey{}, fmt.Errorf("attest: unsupported key type %s", sshKey.Type())
	}
	return pk, nil
}

// PEM returns the key as a PKIX "PUBLIC KEY" PEM block (what openssl reads).
func (k PublicKey) PEM() ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(k.Key)
	if err != nil {
		return nil, fmt.Errorf("attest: marshal public key %s: %w", k.ID, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// AllowedSignersLine returns the key as one allowed_signers line restricted
// to Namespace and to its validity window (valid-after, valid-before).
func (k PublicKey) AllowedSignersLine() string {
	principal := k.Principal
	if principal == "" {
		principal = Principal
	}
	opts := fmt.Sprintf("namespaces=%q", Namespace)
	if a := k.ValidAfter(); !a.IsZero() {
		opts += fmt.Sprintf(",valid-after=%q", sshTime(a))
	}
	if b := k.ValidBefore(); !b.IsZero() {
		opts += fmt.Sprintf(",valid-before=%q", sshTime(b))
	}
	return fmt.Sprintf("%s %s %s", quotePrincipal(principal), opts,
		strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k.SSH))))
}

// quotePrincipal quotes a principal with a space, tab or comma in it, which
// allowed_signers would otherwise split on.
func quotePrincipal(p string) string {
	if strings.ContainsAny(p, " \t,") {
		return `"` + strings.ReplaceAll(p, `"`, "") + `"`
	}
	return p
}

// KeySet is a set of verification keys by id. The zero value is empty.
type KeySet struct {
	keys []PublicKey
}

// NewKeySet returns a set of keys; a later key with the same id replaces an
// earlier one.
func NewKeySet(keys ...PublicKey) *KeySet {
	ks := &KeySet{}
	for _, k := range keys {
		ks.Add(k)
	}
	return ks
}

// Add adds or replaces a key.
func (ks *KeySet) Add(k PublicKey) {
	for i := range ks.keys {
		if ks.keys[i].ID == k.ID {
			ks.keys[i] = k
			return
		}
	}
	ks.keys = append(ks.keys, k)
}

// Lookup finds a key by id.
func (ks *KeySet) Lookup(id string) (PublicKey, bool) {
	if ks == nil {
		return PublicKey{}, false
	}
	for _, k := range ks.keys {
		if k.ID == id {
			return k, true
		}
	}
	return PublicKey{}, false
}

// Keys returns the keys in insertion order.
func (ks *KeySet) Keys() []PublicKey {
	if ks == nil {
		return nil
	}
	return slices.Clone(ks.keys)
}

// Len is the number of keys.
func (ks *KeySet) Len() int {
	if ks == nil {
		return 0
	}
	return len(ks.keys)
}

// keysDocument is the JSON form of published keys (keys.json).
type keysDocument struct {
	Format string    `json:"format"`
	Keys   []keyJSON `json:"keys"`
}

type keyJSON struct {
	ID            string     `json:"id"`
	Algorithm     string     `json:"algorithm"`
	PublicKeyPEM  string     `json:"public_key_pem"`
	SSHPublicKey  string     `json:"ssh_public_key"`
	Status        KeyStatus  `json:"status"`
	Created       time.Time  `json:"created"`
	RetiredAt     *time.Time `json:"retired_at,omitempty"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	RevokedReason string     `json:"revoked_reason,omitempty"`
	// PEMFile is the key's own PEM file (PublicKey.PEMFile).
	PEMFile string `json:"pem_file,omitempty"`
}

const keysFormat = "accord-keys/v1"

// MarshalKeysJSON returns the published keys.json document.
func MarshalKeysJSON(keys []PublicKey) ([]byte, error) {
	doc := keysDocument{Format: keysFormat, Keys: make([]keyJSON, 0, len(keys))}
	for _, k := range keys {
		p, err := k.PEM()
		if err != nil {
			return nil, err
		}
		kj := keyJSON{
			ID:            k.ID,
			Algorithm:     k.Algorithm,
			PublicKeyPEM:  string(p),
			SSHPublicKey:  strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k.SSH))),
			Status:        k.Status,
			Created:       k.Created.UTC(),
			RevokedReason: k.RevokedReason,
			PEMFile:       k.PEMFile(),
		}
		kj.RetiredAt, kj.RevokedAt = optionalTime(k.RetiredAt), optionalTime(k.RevokedAt)
		doc.Keys = append(doc.Keys, kj)
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("attest: marshal keys.json: %w", err)
	}
	return append(out, '\n'), nil
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// ParseKeysJSON reads a keys.json document. Each key's id must be the
// fingerprint of its PEM key and its SSH form must be the same key.
func ParseKeysJSON(data []byte) (*KeySet, error) {
	var doc keysDocument
	if err := strictjson.Decode(data, &doc); err != nil {
		return nil, fmt.Errorf("attest: keys.json: %w", err)
	}
	if doc.Format != keysFormat {
		return nil, fmt.Errorf("attest: keys.json: format %q, want %q", doc.Format, keysFormat)
	}
	ks := &KeySet{}
	for i, kj := range doc.Keys {
		keys, err := parsePEMPublicKeys([]byte(kj.PublicKeyPEM))
		if err != nil || len(keys) != 1 {
			return nil, fmt.Errorf("attest: keys.json: key %d: public_key_pem: want one key: %v", i, err)
		}
		k := keys[0]
		if k.ID != kj.ID {
			return nil, fmt.Errorf("attest: keys.json: key %d: id %s is not the key's fingerprint %s", i, kj.ID, k.ID)
		}
		if kj.SSHPublicKey != "" {
			sk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(kj.SSHPublicKey))
			if err != nil || !bytes.Equal(sk.Marshal(), k.SSH.Marshal()) {
				return nil, fmt.Errorf("attest: keys.json: key %d: ssh_public_key is not the PEM key", i)
			}
		}
		switch kj.Status {
		case KeyActive, KeyRetired, KeyRevoked:
		default:
			return nil, fmt.Errorf("attest: keys.json: key %d: unknown status %q", i, kj.Status)
		}
		if kj.PEMFile != "" && kj.PEMFile != k.PEMFile() {
			return nil, fmt.Errorf("attest: keys.json: key %d: pem_file %q, want %q", i, kj.PEMFile, k.PEMFile())
		}
		k.Status = kj.Status
		k.Created = kj.Created
		if kj.RetiredAt != nil {
			k.RetiredAt = *kj.RetiredAt
		}
		if kj.RevokedAt != nil {
			k.RevokedAt = *kj.RevokedAt
		}
		k.RevokedReason = kj.RevokedReason
		ks.Add(k)
	}
	return ks, nil
}

// MarshalPEM returns the active keys as concatenated PEM blocks, each
// preceded by a comment line naming its id (openssl skips text between
// blocks, and reads only the first block: there is one active key). Retired
// and revoked keys are published one per file (PublicKey.PEMFile).
func MarshalPEM(keys []PublicKey) ([]byte, error) {
	var b bytes.Buffer
	for _, k := range keys {
		if k.Status != KeyActive {
			continue
		}
		p, err := k.PEM()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "# %s %s\n", k.ID, k.Status)
		b.Write(p)
	}
	return b.Bytes(), nil
}

// MarshalAllowedSigners returns an OpenSSH allowed_signers file with every
// key and its validity window, so that `ssh-keygen -Y verify
// -Overify-time=T` accepts a signature dated T only while its key was in
// use: a rotated-out key's signature made after the rotation, and a revoked
// key's made after the revocation, are refused.
func MarshalAllowedSigners(keys []PublicKey) []byte {
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "# %s %s%s\n", k.ID, k.Status, keyDates(k))
		b.WriteString(k.AllowedSignersLine() + "\n")
	}
	return b.Bytes()
}

// keyDates is ", made T, rotated out T, revoked T: reason" as far as known.
func keyDates(k PublicKey) string {
	var s string
	if !k.Created.IsZero() {
		s += ", made " + stamp(k.Created)
	}
	if !k.RetiredAt.IsZero() {
		s += ", rotated out " + stamp(k.RetiredAt)
	}
	if !k.RevokedAt.IsZero() {
		s += ", revoked " + stamp(k.RevokedAt) + ": " + strings.ReplaceAll(k.RevokedReason, "\n", " ")
	}
	return s
}

// ParseAllowedSigners reads an OpenSSH allowed_signers file. Lines whose
// namespaces option excludes Namespace are skipped (ssh-keygen would not
// accept them for our signatures either); cert-authority lines are refused.
// Each key's Principal is the line's first principal. A key's window is the
// line's valid-after and valid-before; the comment Accord writes above the
// line (MarshalAllowedSigners: "# ID revoked, made T, rotated out T,
// revoked T: reason") names what ended it, a rotation or a revocation,
// when it agrees with that window (it is read for the words only: the
// window stays the line's).
func ParseAllowedSigners(data []byte) ([]PublicKey, error) {
	var keys []PublicKey
	var comment string // the comment line just above
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if c, ok := strings.CutPrefix(line, "#"); ok {
			comment = strings.TrimSpace(c)
			continue
		}
		above := comment
		comment = ""
		principals, rest, ok := cutPrincipals(line)
		if !ok {
			return nil, fmt.Errorf("attest: allowed_signers line %d: no key", n+1)
		}
		// The rest is "[options] keytype base64 [comment]": the
		// authorized_keys syntax, which the ssh package parses.
		pub, _, options, _, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(rest)))
		if err != nil {
			return nil, fmt.Errorf("attest: allowed_signers line %d: %w", n+1, err)
		}
		allowed := true
		var validAfter, validBefore time.Time
		for _, opt := range options {
			name, value, _ := strings.Cut(opt, "=")
			value = strings.Trim(value, `"`)
			switch strings.ToLower(name) {
			case "cert-authority":
				return nil, fmt.Errorf("attest: allowed_signers line %d: cert-authority is not supported", n+1)
			case "namespaces":
				allowed = slices.Contains(strings.Split(value, ","), Namespace)
			case "valid-after", "valid-before":
				t, err := parseSSHTime(value)
				if err != nil {
					return nil, fmt.Errorf("attest: allowed_signers line %d: %s: %w", n+1, name, err)
				}
				if strings.EqualFold(name, "valid-after") {
					validAfter = t
				} else {
					validBefore = t
				}
			}
		}
		if !allowed {
			continue
		}
		k, err := NewPublicKey(pub)
		if err != nil {
			return nil, fmt.Errorf("attest: allowed_signers line %d: %w", n+1, err)
		}
		// The window as the line states it: made at valid-after, rotated
		// out (no longer signing) at valid-before, or revoked then as the
		// comment above says.
		k.Created = validAfter
		if !validBefore.IsZero() {
			k.Status, k.RetiredAt = KeyRetired, validBefore
			if c, ok := parseKeyComment(above, k.ID); ok && c.Status == KeyRevoked && c.ValidBefore().Equal(validBefore) {
				k.Status, k.RetiredAt, k.RevokedAt, k.RevokedReason = KeyRevoked, c.RetiredAt, c.RevokedAt, c.RevokedReason
			}
		}
		k.Principal, _, _ = strings.Cut(principals, ",")
		keys = append(keys, k)
	}
	return keys, nil
}

// parseKeyComment reads the comment MarshalAllowedSigners writes above a
// key's line ("ID STATUS[, made T][, rotated out T][, revoked T: reason]")
// for the key id; ok is false for any other comment.
func parseKeyComment(comment, id string) (k PublicKey, ok bool) {
	rest, found := strings.CutPrefix(comment, id+" ")
	if !found {
		return k, false
	}
	status, rest, _ := strings.Cut(rest, ",")
	k.ID, k.Status = id, KeyStatus(status)
	// The revocation comes last: its reason may hold commas.
	rest, revoked, hasRevoked := strings.Cut(rest, ", revoked ")
	if hasRevoked {
		at, reason, _ := strings.Cut(revoked, ": ")
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return k, false
		}
		k.RevokedAt, k.RevokedReason = t, reason
	}
	for _, part := range strings.Split(rest, ",") {
		part = strings.TrimSpace(part)
		if at, found := strings.CutPrefix(part, "rotated out "); found {
			t, err := time.Parse(time.RFC3339, at)
			if err != nil {
				return k, false
			}
			k.RetiredAt = t
		}
	}
	return k, k.Status != KeyRevoked || hasRevoked
}

// parseSSHTime reads ssh-keygen's YYYYMMDD[HHMM[SS]] times. Accord writes
// them in UTC with a Z; without it they are read as UTC too (ssh-keygen
// would use the local time zone).
func parseSSHTime(v string) (time.Time, error) {
	v = strings.TrimSuffix(v, "Z")
	for _, layout := range []string{"20060102150405", "200601021504", "20060102"} {
		if len(v) == len(layout) {
			return time.ParseInLocation(layout, v, time.UTC)
		}
	}
	return time.Time{}, fmt.Errorf("time %q is not YYYYMMDD[HHMM[SS]][Z]", v)
}

// cutPrincipals splits an allowed_signers line after its principals field,
// which may be double-quoted.
func cutPrincipals(line string) (principals, rest string, ok bool) {
	if quoted, ok := strings.CutPrefix(line, `"`); ok {
		principals, rest, ok = strings.Cut(quoted, `"`)
		return principals, strings.TrimLeft(rest, " \t"), ok && principals != "" && rest != ""
	}
	i := strings.IndexAny(line, " \t")
	if i < 0 {
		return "", "", false
	}
	return line[:i], strings.TrimLeft(line[i:], " \t"), true
}

func parsePEMPublicKeys(data []byte) ([]PublicKey, error) {
	var keys []PublicKey
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("attest: PEM block %q, want PUBLIC KEY", block.Type)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("attest: PEM public key: %w", err)
		}
		k, err := NewPublicKey(pub)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ParseTrustedKeys reads keys a user pins or publishes: a keys.json
// document, PEM public keys, or allowed_signers lines. Keys from PEM and
// allowed_signers have status active; keys.json carries its own statuses.
func ParseTrustedKeys(data []byte) (*KeySet, error) {
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) == 0:
		return nil, errors.New("attest: trusted keys: empty")
	case trimmed[0] == '{':
		return ParseKeysJSON(trimmed)
	case bytes.Contains(trimmed, []byte("-----BEGIN ")):
		keys, err := parsePEMPublicKeys(trimmed)
		if err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			return nil, errors.New("attest: trusted keys: no PEM public key")
		}
		return NewKeySet(keys...), nil
	default:
		keys, err := ParseAllowedSigners(trimmed)
		if err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("attest: trusted keys: no allowed_signers line for namespace %s", Namespace)
		}
		return NewKeySet(keys...), nil
	}
}
