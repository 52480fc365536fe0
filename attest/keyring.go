package attest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/accordlab/accord/attest/dsse"
	"github.com/accordlab/accord/attest/internal/strictjson"
	"github.com/accordlab/accord/attest/sshsig"
)

// Signer signs with one installation key (ECDSA P-256).
type Signer struct {
	pub  PublicKey
	priv *ecdsa.PrivateKey
	ssh  ssh.Signer
}

// NewSigner wraps a P-256 private key.
func NewSigner(priv *ecdsa.PrivateKey) (*Signer, error) {
	if priv == nil || priv.Curve != elliptic.P256() {
		return nil, errors.New("attest: signer: need an ECDSA P-256 key")
	}
	sshSigner, err := ssh.NewSignerFromSigner(priv)
	if err != nil {
		return nil, fmt.Errorf("attest: signer: %w", err)
	}
	pub, err := NewPublicKey(sshSigner.PublicKey())
	if err != nil {
		return nil, err
	}
	return &Signer{pub: pub, priv: priv, ssh: sshSigner}, nil
}

// KeyID is the signer's key id (dsse.Signer).
func (s *Signer) KeyID() string { return s.pub.ID }

// PublicKey returns the signer's public key.
func (s *Signer) PublicKey() PublicKey { return s.pub }

// SignPAE signs a DSSE pre-authentication encoding (dsse.Signer).
func (s *Signer) SignPAE(pae []byte) ([]byte, error) {
	return dsse.KeySigner{ID: s.pub.ID, Key: s.priv}.SignPAE(pae)
}

// SignDSSE wraps payload in a DSSE envelope signed by this key.
func (s *Signer) SignDSSE(payloadType string, payload []byte) (*dsse.Envelope, error) {
	return dsse.Sign(payloadType, payload, s)
}

// SignSSH makes an sshsig signature of message in Namespace.
func (s *Signer) SignSSH(message io.Reader) (*sshsig.Signature, error) {
	return sshsig.Sign(s.ssh, message, Namespace)
}

// Keyring is the installation's signing keys in one directory: PKCS#8 PEM
// private keys with mode 0400 and keyring.json with every key's public
// part and status. Several processes may share the directory: changes take
// an exclusive flock and every read sees the current state.
type Keyring struct {
	dir     string
	keyFile string

	mu    sync.Mutex
	cache map[string]*Signer
}

// KeyringOptions configure OpenKeyring.
type KeyringOptions struct {
	// KeyFile, when set, is a PKCS#8 PEM private key managed outside Accord
	// (mode 0400 or 0600, no group or other access). It becomes the active
	// key; a previously active key is retired. Rotate is then refused:
	// rotate by configuring a new file.
	KeyFile string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

const (
	keyringFile   = "keyring.json"
	keyringLock   = ".keyring.lock"
	keyringFormat = "accord-keyring/v1"
)

// ErrExternalKey is returned by Rotate when the key file is configured.
var ErrExternalKey = errors.New("attest: the signing key is a configured file: rotate by configuring a new one")

type keyringState struct {
	Format string         `json:"format"`
	Keys   []keyringEntry `json:"keys"`
}

type keyringEntry struct {
	ID            string     `json:"id"`
	Algorithm     string     `json:"algorithm"`
	PublicKeyPEM  string     `json:"public_key_pem"`
	PrivateKey    string     `json:"private_key_file,omitempty"`
	Status        KeyStatus  `json:"status"`
	Created       time.Time  `json:"created"`
	RetiredAt     *time.Time `json:"retired_at,omitempty"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	RevokedReason string     `json:"revoked_reason,omitempty"`
}

// OpenKeyring opens the keyring in dir, creating the directory (0700) and
// generating the first key when there is none.
func OpenKeyring(dir string, opts KeyringOptions) (*Keyring, error) {
	if dir == "" {
		return nil, errors.New("attest: keyring: empty directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("attest: keyring: %w", err)
	}
	kr := &Keyring{dir: dir, keyFile: opts.KeyFile, cache: map[string]*Signer{}}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	err := kr.update(func(st *keyringState) error {
		if kr.keyFile != "" {
			return kr.adoptKeyFile(st, now())
		}
		if activeEntry(st) == nil {
			return kr.generate(st, now())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return kr, nil
}

// Dir is the keyring's directory.
func (kr *Keyring) Dir() string { return kr.dir }

// Active returns the signer of the active key.
func (kr *Keyring) Active() (*Signer, error) {
	st, err := kr.read()
	if err != nil {
		return nil, err
	}
	e := activeEntry(st)
	if e == nil {
		return nil, errors.New("attest: keyring: no active key")
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if s, ok := kr.cache[e.ID]; ok {
		return s, nil
	}
	path := e.PrivateKey
	if !filepath.IsAbs(path) {
		path = filepath.Join(kr.dir, path)
	}
	s, err := loadPrivateKey(path)
	if err != nil {
		return nil, err
	}
	if s.KeyID() != e.ID {
		return nil, fmt.Errorf("attest: keyring: %s holds key %s, keyring.json says %s", path, s.KeyID(), e.ID)
	}
	kr.cache[e.ID] = s
	return s, nil
}

// PublicKeys returns every key, active, retired and revoked, oldest first.
func (kr *Keyring) PublicKeys() ([]PublicKey, error) {
	st, err := kr.read()
	if err != nil {
		return nil, err
	}
	keys := make([]PublicKey, 0, len(st.Keys))
	for i, e := range st.Keys {
		k, err := e.publicKey()
		if err != nil {
			return nil, err
		}
		// Keyrings written before rotation times were kept: a key that is
		// no longer active was rotated out when the next key was made.
		if k.Status != KeyActive && k.RetiredAt.IsZero() && i+1 < len(st.Keys) {
			k.RetiredAt = st.Keys[i+1].Created
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// KeySet returns PublicKeys as a KeySet for verification.
func (kr *Keyring) KeySet() (*KeySet, error) {
	keys, err := kr.PublicKeys()
	if err != nil {
		return nil, err
	}
	return NewKeySet(keys...), nil
}

// Rotate generates a new active key; the previous one is retired and stays
// published for verifying what it signed.
func (kr *Keyring) Rotate(now time.Time) (PublicKey, error) {
	if kr.keyFile != "" {
		return PublicKey{}, ErrExternalKey
	}
	var created PublicKey
	err := kr.update(func(st *keyringState) error {
		if err := kr.generate(st, now); err != nil {
			return err
		}
		var err error
		created, err = st.Keys[len(st.Keys)-1].publicKey()
		return err
	})
	return created, err
}

// Revoke marks a key revoked with a reason and deletes its private key: what
// it signed is no longer trusted. Revoking the active key rotates first, so
// the installation keeps a key to sign with.
func (kr *Keyring) Revoke(id, reason string, now time.Time) error {
	if strings.TrimSpace(reason) == "" {
		return errors.New("attest: revoke: a reason is required")
	}
	return kr.update(func(st *keyringState) error {
		var target *keyringEntry
		for i := range st.Keys {
			if st.Keys[i].ID == id {
				target = &st.Keys[i]
			}
		}
		if target == nil {
			return fmt.Errorf("attest: revoke: no key %s", id)
		}
		if target.Status == KeyRevoked {
			return fmt.Errorf("attest: revoke: key %s is already revoked", id)
		}
		if target.Status == KeyActive {
			if kr.keyFile != "" {
				return fmt.Errorf("attest: revoke: %w", ErrExternalKey)
			}
			if err := kr.generate(st, now); err != nil {
				return err
			}
			// generate appended; target may have moved.
			for i := range st.Keys {
				if st.Keys[i].ID == id {
					target = &st.Keys[i]
				}
			}
		}
		t := now.UTC()
		target.Status = KeyRevoked
		target.RevokedAt = &t
		target.RevokedReason = reason
		if target.PrivateKey != "" && !filepath.IsAbs(target.PrivateKey) {
			if err := os.Remove(filepath.Join(kr.dir, target.PrivateKey)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("attest: revoke: remove private key: %w", err)
			}
			target.PrivateKey = ""
		}
		kr.mu.Lock()
		delete(kr.cache, id)
		kr.mu.Unlock()
		return nil
	})
}

// generate makes a new P-256 key, writes it 0400, retires the active key
// and appends the new one as active.
func (kr *Keyring) generate(st *keyringState, now time.Time) error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("attest: generate key: %w", err)
	}
	s, err := NewSigner(priv)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("attest: generate key: %w", err)
	}
	name := "key-" + fileSafeID(s.KeyID()) + ".pem"
	if err := writeFileAtomic(filepath.Join(kr.dir, name), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o400); err != nil {
		return fmt.Errorf("attest: write private key: %w", err)
	}
	return addActive(st, s.PublicKey(), name, now)
}

// adoptKeyFile makes the configured key file the active key.
func (kr *Keyring) adoptKeyFile(st *keyringState, now time.Time) error {
	path, err := filepath.Abs(kr.keyFile)
	if err != nil {
		return fmt.Errorf("attest: key file: %w", err)
	}
	s, err := loadPrivateKey(path)
	if err != nil {
		return err
	}
	for i := range st.Keys {
		if st.Keys[i].ID != s.KeyID() {
			continue
		}
		switch st.Keys[i].Status {
		case KeyRevoked:
			return fmt.Errorf("attest: key file %s holds revoked key %s", path, s.KeyID())
		case KeyActive:
			st.Keys[i].PrivateKey = path
			return nil
		}
		// A retired key configured again becomes active again.
		retireActive(st, now)
		st.Keys[i].Status = KeyActive
		st.Keys[i].RetiredAt = nil
		st.Keys[i].PrivateKey = path
		return nil
	}
	return addActive(st, s.PublicKey(), path, now)
}

func addActive(st *keyringState, pub PublicKey, privateFile string, now time.Time) error {
	retireActive(st, now)
	p, err := pub.PEM()
	if err != nil {
		return err
	}
	st.Keys = append(st.Keys, keyringEntry{
		ID:           pub.ID,
		Algorithm:    pub.Algorithm,
		PublicKeyPEM: string(p),
		PrivateKey:   privateFile,
		Status:       KeyActive,
		Created:      now.UTC(),
	})
	return nil
}

func retireActive(st *keyringState, now time.Time) {
	t := now.UTC()
	for i := range st.Keys {
		if st.Keys[i].Status == KeyActive {
			st.Keys[i].Status = KeyRetired
			st.Keys[i].RetiredAt = &t
		}
	}
}

func activeEntry(st *keyringState) *keyringEntry {
	for i := range st.Keys {
		if st.Keys[i].Status == KeyActive {
			return &st.Keys[i]
		}
	}
	return nil
}

func (e keyringEntry) publicKey() (PublicKey, error) {
	keys, err := parsePEMPublicKeys([]byte(e.PublicKeyPEM))
	if err != nil || len(keys) != 1 {
		return PublicKey{}, fmt.Errorf("attest: keyring: key %s: bad public key: %v", e.ID, err)
	}
	k := keys[0]
	if k.ID != e.ID {
		return PublicKey{}, fmt.Errorf("attest: keyring: key %s: public key fingerprint is %s", e.ID, k.ID)
	}
	k.Status = e.Status
	k.Created = e.Created
	if e.RetiredAt != nil {
		k.RetiredAt = *e.RetiredAt
	}
	if e.RevokedAt != nil {
		k.RevokedAt = *e.RevokedAt
	}
	k.RevokedReason = e.RevokedReason
	return k, nil
}

// read loads keyring.json under a shared lock.
func (kr *Keyring) read() (*keyringState, error) {
	unlock, err := kr.lock(syscall.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return kr.load()
}

func (kr *Keyring) load() (*keyringState, error) {
	data, err := os.ReadFile(filepath.Join(kr.dir, keyringFile))
	if errors.Is(err, os.ErrNotExist) {
		return &keyringState{Format: keyringFormat}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("attest: keyring: %w", err)
	}
	var st keyringState
	if err := strictjson.Decode(data, &st); err != nil {
		return nil, fmt.Errorf("attest: keyring: %s: %w", keyringFile, err)
	}
	if st.Format != keyringFormat {
		return nil, fmt.Errorf("attest: keyring: format %q, want %q", st.Format, keyringFormat)
	}
	return &st, nil
}

// update applies change to the state under an exclusive lock and saves it.
func (kr *Keyring) update(change func(*keyringState) error) error {
	unlock, err := kr.lock(syscall.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := kr.load()
	if err != nil {
		return err
	}
	if err := change(st); err != nil {
		return err
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("attest: keyring: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(kr.dir, keyringFile), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("attest: keyring: save: %w", err)
	}
	return nil
}

func (kr *Keyring) lock(how int) (func(), error) {
	f, err := os.OpenFile(filepath.Join(kr.dir, keyringLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("attest: keyring lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("attest: keyring lock: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// loadPrivateKey reads a PKCS#8 PEM P-256 key, refusing files that others
// than the owner can read.
func loadPrivateKey(path string) (*Signer, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("attest: private key: %w", err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("attest: private key %s: mode %04o allows group or other access; want 0400", path, info.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("attest: private key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("attest: private key %s: want a PKCS#8 PEM \"PRIVATE KEY\" block", path)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("attest: private key %s: %w", path, err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("attest: private key %s: %T, want ECDSA P-256", path, key)
	}
	return NewSigner(ec)
}

// fileSafeID turns "SHA256:ab+c/d" into "ab-c_d" for file names.
func fileSafeID(id string) string {
	return strings.NewReplacer("/", "_", "+", "-").Replace(strings.TrimPrefix(id, "SHA256:"))
}

// writeFileAtomic writes to a temporary file with mode perm, syncs it and
// renames it into place.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(name)
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}
