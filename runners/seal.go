// Package runners is the server's side of a run on a lab host, on top of
// runners/sshrun: it drives one run from dial to collected artifacts
// (Execute), stops a run (Stop), checks a host (Check), and seals the
// hosts' private keys at rest (Sealer). It knows nothing of the database:
// the jobs package gives it targets and hooks that persist what happens.
package runners

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// Sealer encrypts lab-host private keys with AES-256-GCM under a key
// derived from the server's secret. The host id is the additional data,
// so a sealed key copied to another host row does not open.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer derives the sealing key from the server's secret.
func NewSealer(secret []byte) (*Sealer, error) {
	if len(secret) < 32 {
		return nil, errors.New("runners: the secret must have at least 32 bytes")
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("accord host key seal v1"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plaintext bound to label (for example "host:42").
func (s *Sealer) Seal(plaintext []byte, label string) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return s.aead.Seal(nonce, nonce, plaintext, []byte(label)), nil
}

// ErrUnseal is returned for a sealed value that does not open: wrong
// secret, wrong label or tampered bytes.
var ErrUnseal = errors.New("runners: the sealed key does not open with this server's secret")

// Open decrypts a sealed value.
func (s *Sealer) Open(sealed []byte, label string) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, ErrUnseal
	}
	out, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(label))
	if err != nil {
		return nil, fmt.Errorf("%w", ErrUnseal)
	}
	return out, nil
}
