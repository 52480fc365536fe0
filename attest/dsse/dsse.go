// Package dsse implements Dead Simple Signing Envelopes (DSSE v1): the
// envelope JSON, the pre-authentication encoding (PAE), and ECDSA P-256 /
// Ed25519 signing and verification over it.
//
// Signatures are over PAE(payloadType, payload) =
//
//	"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
//
// with LEN the decimal byte length. ECDSA signatures are ASN.1 DER over
// SHA-256 of the PAE, so `openssl dgst -sha256 -verify` checks them.
package dsse

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/accordlab/accord/attest/internal/strictjson"
)

// Envelope is a DSSE envelope as it appears in JSON.
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one signature of an envelope.
type Signature struct {
	KeyID string `json:"keyid,omitempty"`
	Sig   string `json:"sig"`
}

// ErrInvalid wraps every parse and verification failure.
var ErrInvalid = errors.New("dsse: invalid envelope")

// maxEnvelope bounds what Parse accepts.
const maxEnvelope = 32 << 20

// PAE is the pre-authentication encoding the signatures cover.
func PAE(payloadType string, payload []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(payloadType) + len(payload) + 32)
	b.WriteString("DSSEv1 ")
	b.WriteString(strconv.Itoa(len(payloadType)))
	b.WriteByte(' ')
	b.WriteString(payloadType)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(len(payload)))
	b.WriteByte(' ')
	b.Write(payload)
	return b.Bytes()
}

// Signer makes one signature over a PAE.
type Signer interface {
	KeyID() string
	SignPAE(pae []byte) ([]byte, error)
}

// KeySigner signs with an ECDSA P-256 or Ed25519 private key.
type KeySigner struct {
	ID  string
	Key crypto.Signer
}

// KeyID returns the id written into the signature.
func (s KeySigner) KeyID() string { return s.ID }

// SignPAE signs pae: ECDSA over SHA-256 (ASN.1 DER), Ed25519 over the bytes.
func (s KeySigner) SignPAE(pae []byte) ([]byte, error) {
	switch k := s.Key.(type) {
	case *ecdsa.PrivateKey:
		sum := sha256.Sum256(pae)
		return ecdsa.SignASN1(rand.Reader, k, sum[:])
	case ed25519.PrivateKey:
		return ed25519.Sign(k, pae), nil
	default:
		return nil, fmt.Errorf("dsse: unsupported signing key %T", s.Key)
	}
}

// Sign makes an envelope over payload signed by every signer.
func Sign(payloadType string, payload []byte, signers ...Signer) (*Envelope, error) {
	if payloadType == "" {
		return nil, errors.New("dsse: sign: empty payload type")
	}
	if len(signers) == 0 {
		return nil, errors.New("dsse: sign: no signer")
	}
	env := &Envelope{PayloadType: payloadType, Payload: base64.StdEncoding.EncodeToString(payload)}
	for _, s := range signers {
		if err := env.AddSignature(s); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// AddSignature adds one more signature (co-signing) over the same payload.
func (e *Envelope) AddSignature(s Signer) error {
	payload, err := e.DecodePayload()
	if err != nil {
		return err
	}
	sig, err := s.SignPAE(PAE(e.PayloadType, payload))
	if err != nil {
		return fmt.Errorf("dsse: sign with %s: %w", s.KeyID(), err)
	}
	e.Signatures = append(e.Signatures, Signature{KeyID: s.KeyID(), Sig: base64.StdEncoding.EncodeToString(sig)})
	return nil
}

// DecodePayload returns the payload bytes.
func (e *Envelope) DecodePayload() ([]byte, error) {
	p, err := decodeBase64(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %w", ErrInvalid, err)
	}
	return p, nil
}

// decodeBase64 accepts standard and URL-safe base64, padded or not, as the
// DSSE spec asks of decoders; we always write standard padded base64.
func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.Strict().DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// Parse reads an envelope strictly: no unknown or duplicate fields, a payload type,
// decodable payload and at least one decodable signature.
func Parse(data []byte) (*Envelope, error) {
	if len(data) > maxEnvelope {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalid, maxEnvelope)
	}
	var e Envelope
	if err := strictjson.Decode(data, &e); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if e.PayloadType == "" {
		return nil, fmt.Errorf("%w: empty payloadType", ErrInvalid)
	}
	if _, err := e.DecodePayload(); err != nil {
		return nil, err
	}
	if len(e.Signatures) == 0 {
		return nil, fmt.Errorf("%w: no signatures", ErrInvalid)
	}
	for i, s := range e.Signatures {
		if _, err := decodeBase64(s.Sig); err != nil || s.Sig == "" {
			return nil, fmt.Errorf("%w: signature %d: not base64", ErrInvalid, i)
		}
	}
	return &e, nil
}

// Marshal returns the envelope as indented JSON, one field per line, which
// keeps the shell recipe in VERIFY.md (grep for a field) simple.
func (e *Envelope) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(e); err != nil {
		return nil, fmt.Errorf("dsse: marshal: %w", err)
	}
	return b.Bytes(), nil
}

// KeyLookup finds the public key for a signature's key id. It returns false
// for keys the verifier does not know: such signatures are skipped (they may
// be co-signatures by parties the verifier does not track).
type KeyLookup func(keyID string) (crypto.PublicKey, bool)

// Verify checks the envelope's signatures. It succeeds when at least one
// signature verifies with a known key, and fails when any signature that
// names a known key does not verify (a replaced or corrupted signature).
// It returns the key ids whose signatures verified, and the payload.
func (e *Envelope) Verify(lookup KeyLookup) ([]string, []byte, error) {
	payload, err := e.DecodePayload()
	if err != nil {
		return nil, nil, err
	}
	pae := PAE(e.PayloadType, payload)
	var good []string
	for i, s := range e.Signatures {
		pub, known := lookup(s.KeyID)
		if !known {
			continue
		}
		sig, err := decodeBase64(s.Sig)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: signature %d: not base64", ErrInvalid, i)
		}
		if err := VerifySignature(pub, pae, sig); err != nil {
			return nil, nil, fmt.Errorf("%w: signature %d by %s: %w", ErrInvalid, i, s.KeyID, err)
		}
		good = append(good, s.KeyID)
	}
	if len(good) == 0 {
		return nil, nil, fmt.Errorf("%w: no signature by a trusted key", ErrInvalid)
	}
	return good, payload, nil
}

// VerifySignature checks one signature over pae.
func VerifySignature(pub crypto.PublicKey, pae, sig []byte) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		sum := sha256.Sum256(pae)
		if !ecdsa.VerifyASN1(k, sum[:], sig) {
			return errors.New("ECDSA signature does not verify")
		}
		return nil
	case ed25519.PublicKey:
		if !ed25519.Verify(k, pae, sig) {
			return errors.New("Ed25519 signature does not verify")
		}
		return nil
	default:
		return fmt.Errorf("unsupported public key %T", pub)
	}
}
