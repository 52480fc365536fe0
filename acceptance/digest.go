package acceptance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// A spec version is identified by the SHA-256 of its canonical JSON: the
// normalized spec encoded with object keys sorted, no insignificant
// whitespace and no HTML escaping (close to RFC 8785 for the values specs
// hold). Formatting, comments, key order and omitted defaults of the
// document a user wrote do not change it; any change of meaning does.

// DigestPrefix marks the algorithm of a digest string.
const DigestPrefix = "sha256:"

// ProfileCanonicalJSON returns the canonical encoding of the normalized profile.
func ProfileCanonicalJSON(p ProfileSpec) ([]byte, error) {
	b, err := canonicalJSON(p.Normalized())
	if err != nil {
		return nil, fmt.Errorf("canonical profile %q: %w", p.Name, err)
	}
	return b, nil
}

// GateSetCanonicalJSON returns the canonical encoding of the normalized gate set.
func GateSetCanonicalJSON(g GateSetSpec) ([]byte, error) {
	b, err := canonicalJSON(g.Normalized())
	if err != nil {
		return nil, fmt.Errorf("canonical gate set %q: %w", g.Name, err)
	}
	return b, nil
}

// ProfileDigest returns "sha256:<hex>" of the profile's canonical JSON.
func ProfileDigest(p ProfileSpec) (string, error) {
	b, err := ProfileCanonicalJSON(p)
	if err != nil {
		return "", err
	}
	return digestOf(b), nil
}

// GateSetDigest returns "sha256:<hex>" of the gate set's canonical JSON.
func GateSetDigest(g GateSetSpec) (string, error) {
	b, err := GateSetCanonicalJSON(g)
	if err != nil {
		return "", err
	}
	return digestOf(b), nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// canonicalJSON encodes v, then re-encodes it through a generic tree so that
// object keys come out sorted (encoding/json sorts map keys) and numbers keep
// the exact text of the first encoding.
func canonicalJSON(v any) ([]byte, error) {
	first, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(first))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
