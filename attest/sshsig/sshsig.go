// Package sshsig reads, writes, signs and verifies SSH signatures in the
// format that `ssh-keygen -Y sign` writes and `ssh-keygen -Y verify` checks
// (OpenSSH's PROTOCOL.sshsig).
//
// A signature binds a message to a namespace: the signer signs
//
//	"SSHSIG" || string(namespace) || string(reserved) || string(hash_algorithm) || string(H(message))
//
// and the blob carries the signer's public key, so the verifier still has to
// decide whether it trusts that key (an allowed_signers file does that for
// ssh-keygen).
package sshsig

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/ssh"
)

const (
	magic   = "SSHSIG"
	version = 1

	// HashSHA512 is the hash ssh-keygen uses by default and the one we sign with.
	HashSHA512 = "sha512"
	// HashSHA256 is the other hash the format allows; accepted on verify.
	HashSHA256 = "sha256"

	armorBegin = "-----BEGIN SSH SIGNATURE-----"
	armorEnd   = "-----END SSH SIGNATURE-----"
	// armorWidth is the line length ssh-keygen wraps the base64 at.
	armorWidth = 70

	// maxBlob bounds what Parse accepts; real signatures are under 1 KiB.
	maxBlob = 64 << 10
)

// Signature is one parsed SSH signature.
type Signature struct {
	PublicKey     ssh.PublicKey
	Namespace     string
	HashAlgorithm string
	Signature     *ssh.Signature
}

// ErrInvalid wraps every failure to parse or verify a signature.
var ErrInvalid = errors.New("sshsig: invalid signature")

// Sign signs message under namespace with signer, hashing with SHA-512.
// RSA keys sign with rsa-sha2-512 as ssh-keygen does (never SHA-1).
func Sign(signer ssh.Signer, message io.Reader, namespace string) (*Signature, error) {
	if namespace == "" {
		return nil, errors.New("sshsig: sign: empty namespace")
	}
	digest, err := hashMessage(HashSHA512, message)
	if err != nil {
		return nil, fmt.Errorf("sshsig: sign: %w", err)
	}
	data := signedData(namespace, HashSHA512, digest)
	var sig *ssh.Signature
	if signer.PublicKey().Type() == ssh.KeyAlgoRSA {
		as, ok := signer.(ssh.AlgorithmSigner)
		if !ok {
			return nil, errors.New("sshsig: sign: RSA signer cannot choose rsa-sha2-512")
		}
		sig, err = as.SignWithAlgorithm(rand.Reader, data, ssh.KeyAlgoRSASHA512)
	} else {
		sig, err = signer.Sign(rand.Reader, data)
	}
	if err != nil {
		return nil, fmt.Errorf("sshsig: sign: %w", err)
	}
	return &Signature{
		PublicKey:     signer.PublicKey(),
		Namespace:     namespace,
		HashAlgorithm: HashSHA512,
		Signature:     sig,
	}, nil
}

// Verify checks that s signs message under namespace. It checks the
// cryptography only: whether s.PublicKey is trusted is the caller's decision.
func Verify(s *Signature, message io.Reader, namespace string) error {
	if s == nil || s.PublicKey == nil || s.Signature == nil {
		return fmt.Errorf("%w: incomplete", ErrInvalid)
	}
	if namespace == "" || s.Namespace != namespace {
		return fmt.Errorf("%w: namespace %q, want %q", ErrInvalid, s.Namespace, namespace)
	}
	if err := checkSignatureFormat(s.PublicKey, s.Signature.Format); err != nil {
		return err
	}
	digest, err := hashMessage(s.HashAlgorithm, message)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := s.PublicKey.Verify(signedData(s.Namespace, s.HashAlgorithm, digest), s.Signature); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// checkSignatureFormat refuses SHA-1 RSA signatures (as ssh-keygen does) and
// signatures whose algorithm does not belong to the key.
func checkSignatureFormat(pub ssh.PublicKey, format string) error {
	if pub.Type() == ssh.KeyAlgoRSA {
		if format != ssh.KeyAlgoRSASHA256 && format != ssh.KeyAlgoRSASHA512 {
			return fmt.Errorf("%w: RSA signature algorithm %q not allowed", ErrInvalid, format)
		}
		return nil
	}
	if format != pub.Type() {
		return fmt.Errorf("%w: signature algorithm %q does not match key type %q", ErrInvalid, format, pub.Type())
	}
	return nil
}

func hashMessage(algorithm string, message io.Reader) ([]byte, error) {
	var h hash.Hash
	switch algorithm {
	case HashSHA512:
		h = sha512.New()
	case HashSHA256:
		h = sha256.New()
	default:
		return nil, fmt.Errorf("unsupported hash algorithm %q", algorithm)
	}
	if _, err := io.Copy(h, message); err != nil {
		return nil, fmt.Errorf("read message: %w", err)
	}
	return h.Sum(nil), nil
}

func signedData(namespace, hashAlg string, digest []byte) []byte {
	var b cryptobyte.Builder
	b.AddBytes([]byte(magic))
	addString(&b, []byte(namespace))
	addString(&b, nil) // reserved
	addString(&b, []byte(hashAlg))
	addString(&b, digest)
	return b.BytesOrPanic()
}

func addString(b *cryptobyte.Builder, v []byte) {
	b.AddUint32LengthPrefixed(func(c *cryptobyte.Builder) { c.AddBytes(v) })
}

// Marshal returns the binary blob (what the armor encodes).
func (s *Signature) Marshal() []byte {
	var b cryptobyte.Builder
	b.AddBytes([]byte(magic))
	b.AddUint32(version)
	addString(&b, s.PublicKey.Marshal())
	addString(&b, []byte(s.Namespace))
	addString(&b, nil) // reserved
	addString(&b, []byte(s.HashAlgorithm))
	addString(&b, ssh.Marshal(s.Signature))
	return b.BytesOrPanic()
}

// Armor returns the PEM-like text form ssh-keygen reads and writes.
func (s *Signature) Armor() []byte {
	enc := base64.StdEncoding.EncodeToString(s.Marshal())
	var out bytes.Buffer
	out.WriteString(armorBegin + "\n")
	for len(enc) > armorWidth {
		out.WriteString(enc[:armorWidth] + "\n")
		enc = enc[armorWidth:]
	}
	out.WriteString(enc + "\n")
	out.WriteString(armorEnd + "\n")
	return out.Bytes()
}

// Unarmor parses the armored text form.
func Unarmor(text []byte) (*Signature, error) {
	if len(text) > 2*maxBlob {
		return nil, fmt.Errorf("%w: armor too large", ErrInvalid)
	}
	s := strings.TrimSpace(strings.ReplaceAll(string(text), "\r\n", "\n"))
	body, ok := strings.CutPrefix(s, armorBegin)
	if !ok {
		return nil, fmt.Errorf("%w: missing %q", ErrInvalid, armorBegin)
	}
	body, ok = strings.CutSuffix(body, armorEnd)
	if !ok {
		return nil, fmt.Errorf("%w: missing %q", ErrInvalid, armorEnd)
	}
	body = strings.Join(strings.Fields(body), "")
	blob, err := base64.StdEncoding.Strict().DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("%w: base64: %w", ErrInvalid, err)
	}
	return Parse(blob)
}

// Parse parses the binary blob.
func Parse(blob []byte) (*Signature, error) {
	if len(blob) > maxBlob {
		return nil, fmt.Errorf("%w: blob too large", ErrInvalid)
	}
	in := cryptobyte.String(blob)
	var (
		pre                                       []byte
		ver                                       uint32
		pubBytes, ns, reserved, hashAlg, sigBytes cryptobyte.String
	)
	if !in.ReadBytes(&pre, len(magic)) || string(pre) != magic {
		return nil, fmt.Errorf("%w: bad magic", ErrInvalid)
	}
	if !in.ReadUint32(&ver) || ver != version {
		return nil, fmt.Errorf("%w: unsupported version", ErrInvalid)
	}
	if !readString(&in, &pubBytes) ||
		!readString(&in, &ns) ||
		!readString(&in, &reserved) ||
		!readString(&in, &hashAlg) ||
		!readString(&in, &sigBytes) {
		return nil, fmt.Errorf("%w: truncated", ErrInvalid)
	}
	if !in.Empty() {
		return nil, fmt.Errorf("%w: trailing data", ErrInvalid)
	}
	if len(ns) == 0 {
		return nil, fmt.Errorf("%w: empty namespace", ErrInvalid)
	}
	switch string(hashAlg) {
	case HashSHA512, HashSHA256:
	default:
		return nil, fmt.Errorf("%w: unsupported hash algorithm %q", ErrInvalid, string(hashAlg))
	}
	pub, err := ssh.ParsePublicKey(pubBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %w", ErrInvalid, err)
	}
	if _, isCert := pub.(*ssh.Certificate); isCert {
		return nil, fmt.Errorf("%w: certificate signers are not supported", ErrInvalid)
	}
	sig, err := parseSSHSignature(sigBytes)
	if err != nil {
		return nil, err
	}
	return &Signature{
		PublicKey:     pub,
		Namespace:     string(ns),
		HashAlgorithm: string(hashAlg),
		Signature:     sig,
	}, nil
}

// parseSSHSignature reads the wire form string(format) string(blob) [rest];
// the rest carries the flags and counter of security-key signatures.
func parseSSHSignature(b cryptobyte.String) (*ssh.Signature, error) {
	var format, blob cryptobyte.String
	if !readString(&b, &format) || !readString(&b, &blob) {
		return nil, fmt.Errorf("%w: truncated signature", ErrInvalid)
	}
	sig := &ssh.Signature{Format: string(format), Blob: bytes.Clone(blob)}
	if len(b) > 0 {
		sig.Rest = bytes.Clone(b)
	}
	return sig, nil
}

// readString reads an SSH wire string (uint32 length, then the bytes).
func readString(in *cryptobyte.String, out *cryptobyte.String) bool {
	var n uint32
	var v []byte
	if !in.ReadUint32(&n) || !in.ReadBytes(&v, int(n)) {
		return false
	}
	*out = v
	return true
}
