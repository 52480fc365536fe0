// Package auth holds the credentials logic: argon2id password hashes, and
// the JWTs that carry a session id (browser cookie) or an API token id
// (pipelines), signed with keys derived from the server's secret.
package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters (RFC 9106's second recommended option, with 64 MiB).
const (
	argonTime    = 3
	argonMemory  = 64 * 1024
	argonThreads = 2
	argonKeyLen  = 32
	saltLen      = 16
)

// cost is what new hashes, and the check against an unknown account,
// spend: the parameters above, unless a test binary lowered it.
var cost = struct {
	time, memory uint32
	threads      uint8
}{argonTime, argonMemory, argonThreads}

// UseMinimalCostInTests makes new hashes, and the check against an unknown
// account, as cheap as argon2id allows (1 pass over 8 KiB): for test
// binaries whose tests make accounts and sign in by the hundred, where the
// production cost is about 0.2 CPU-seconds each. Hashes made before or
// elsewhere keep verifying under the parameters they carry. Outside a
// test binary it panics, so that no server can be made to use it.
func UseMinimalCostInTests() {
	if !testing.Testing() {
		panic("auth: UseMinimalCostInTests outside a test binary")
	}
	cost.time, cost.memory, cost.threads = 1, 8, 1
}

// MinPasswordLength is the shortest password accepted.
const MinPasswordLength = 10

// HashPassword returns an argon2id PHC string.
func HashPassword(password string) (string, error) {
	if len(password) < MinPasswordLength {
		return "", fmt.Errorf("a password needs at least %d characters", MinPasswordLength)
	}
	if len(password) > 1024 {
		return "", errors.New("a password may have at most 1024 characters")
	}
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, cost.time, cost.memory, cost.threads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, cost.memory, cost.time, cost.threads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// dummyHash is compared against when an email is unknown, so that the
// response time does not tell whether the account exists. It is made on
// first use: the binary also runs as the probe on lab hosts, which must not
// pay for an argon2 hash at every start.
var dummyHash = sync.OnceValue(func() string {
	h, _ := HashPassword("no-such-account-placeholder")
	return h
})

// CheckPassword reports whether password matches the PHC string. An empty
// or malformed hash never matches (and still costs one hash computation).
func CheckPassword(encoded, password string) bool {
	if encoded == "" {
		_ = checkPHC(dummyHash(), password) // same cost as a real check
		return false
	}
	return checkPHC(encoded, password)
}

func checkPHC(encoded, password string) bool {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false
	}
	var memory uint32
	var iterations uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &iterations, &threads); err != nil {
		return false
	}
	if memory > 1<<20 || iterations > 20 || threads == 0 {
		return false
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > 128 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, iterations, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}
