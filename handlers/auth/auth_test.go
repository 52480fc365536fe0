package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/argon2"
)

type testBundle struct {
	keys *Keys
	now  time.Time
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	secret := make([]byte, 32)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	keys, err := NewKeys(secret)
	require.NoError(t, err)
	return &testBundle{keys: keys, now: time.Now()}
}

func TestPasswordHashing(t *testing.T) {
	t.Parallel()
	h, err := HashPassword("correct horse battery")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=3,p=2$"), "the production cost: %s", h)
	require.True(t, CheckPassword(h, "correct horse battery"))
	require.False(t, CheckPassword(h, "correct horse batterz"))
	require.False(t, CheckPassword("", "anything at all"))
	require.False(t, CheckPassword("$argon2id$v=19$m=1,t=1,p=1$$", "x"))
	_, err = HashPassword("short")
	require.ErrorContains(t, err, "at least")
	h2, err := HashPassword("correct horse battery")
	require.NoError(t, err)
	require.NotEqual(t, h, h2, "salts differ")

	// A hash is checked under the parameters it carries: one made under
	// other settings (older, or a test's cheap ones) still verifies.
	salt := []byte("sixteen byte salt")
	b64 := base64.RawStdEncoding
	cheap := fmt.Sprintf("$argon2id$v=19$m=8,t=1,p=1$%s$%s", b64.EncodeToString(salt), b64.EncodeToString(argon2.IDKey([]byte("pw"), salt, 1, 8, 1, 32)))
	require.True(t, CheckPassword(cheap, "pw"))
	require.False(t, CheckPassword(cheap, "pW"))
	// Parameters past the bounds are refused rather than computed.
	require.False(t, CheckPassword(strings.Replace(cheap, "t=1", "t=21", 1), "pw"))
}

// A test binary may make its hashes cheap; they still verify, and only
// under their own password. (Not parallel: the cost is the package's, and
// the parallel tests above wait until this one restored it.)
func TestMinimalCostInTests(t *testing.T) {
	saved := cost
	defer func() { cost = saved }()
	UseMinimalCostInTests()
	h, err := HashPassword("correct horse battery")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(h, "$argon2id$v=19$m=8,t=1,p=1$"), h)
	require.True(t, CheckPassword(h, "correct horse battery"))
	require.False(t, CheckPassword(h, "correct horse batterz"))
}

func TestIssueAndVerify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok, err := b.keys.Issue(AudienceWeb, 42, "sess-1", nil, b.now, b.now.Add(time.Hour))
	require.NoError(t, err)
	uid, claims, err := b.keys.Verify(AudienceWeb, tok, b.now)
	require.NoError(t, err)
	require.EqualValues(t, 42, uid)
	require.Equal(t, "sess-1", claims.ID)

	api, err := b.keys.Issue(AudienceAPI, 42, "tok-1", []string{ScopeRead, ScopeRun}, b.now, b.now.Add(time.Hour))
	require.NoError(t, err)
	_, claims, err = b.keys.Verify(AudienceAPI, api, b.now)
	require.NoError(t, err)
	require.True(t, claims.HasScope(ScopeRun))
	require.False(t, claims.HasScope(ScopeApprove))
}

// Every forged or stale token must be refused.
func TestVerifyRefusesAttacks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	valid := func(aud string) string {
		tok, err := b.keys.Issue(aud, 7, "id-7", nil, b.now, b.now.Add(time.Hour))
		require.NoError(t, err)
		return tok
	}
	claims := func() Claims {
		return Claims{RegisteredClaims: jwt.RegisteredClaims{
			Issuer: issuer, Subject: "7", Audience: jwt.ClaimStrings{AudienceWeb}, ID: "id-7",
			IssuedAt: jwt.NewNumericDate(b.now), NotBefore: jwt.NewNumericDate(b.now), ExpiresAt: jwt.NewNumericDate(b.now.Add(time.Hour)),
		}}
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	other := setup(t)

	cases := map[string]func() string{
		"alg none": func() string {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
			require.NoError(t, err)
			return tok
		},
		"alg none with signature stripped from a real token": func() string {
			parts := strings.Split(valid(AudienceWeb), ".")
			header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
			return header + "." + parts[1] + "."
		},
		"RS256 instead of HS256": func() string {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims()).SignedString(rsaKey)
			require.NoError(t, err)
			return tok
		},
		"HS512 with the right key": func() string {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodHS512, claims()).SignedString(b.keys.web)
			require.NoError(t, err)
			return tok
		},
		"wrong key": func() string {
			tok, err := other.keys.Issue(AudienceWeb, 7, "id-7", nil, b.now, b.now.Add(time.Hour))
			require.NoError(t, err)
			return tok
		},
		"expired": func() string {
			tok, err := b.keys.Issue(AudienceWeb, 7, "id-7", nil, b.now.Add(-2*time.Hour), b.now.Add(-time.Hour))
			require.NoError(t, err)
			return tok
		},
		"not yet valid": func() string {
			c := claims()
			c.NotBefore = jwt.NewNumericDate(b.now.Add(time.Hour))
			tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(b.keys.web)
			require.NoError(t, err)
			return tok
		},
		"no expiry": func() string {
			c := claims()
			c.ExpiresAt = nil
			tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(b.keys.web)
			require.NoError(t, err)
			return tok
		},
		"tampered claims": func() string {
			parts := strings.Split(valid(AudienceWeb), ".")
			payload, err := base64.RawURLEncoding.DecodeString(parts[1])
			require.NoError(t, err)
			forged := strings.Replace(string(payload), `"sub":"7"`, `"sub":"1"`, 1)
			require.NotEqual(t, string(payload), forged)
			return parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + parts[2]
		},
		"API token used as a session": func() string { return valid(AudienceAPI) },
		"wrong issuer": func() string {
			c := claims()
			c.Issuer = "someone-else"
			tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(b.keys.web)
			require.NoError(t, err)
			return tok
		},
		"garbage": func() string { return "not.a.jwt" },
	}
	for name, make := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := b.keys.Verify(AudienceWeb, make(), b.now)
			require.ErrorIs(t, err, ErrInvalidToken)
		})
	}
}

func TestNewKeysNeedsALongSecret(t *testing.T) {
	t.Parallel()
	_, err := NewKeys([]byte("short"))
	require.ErrorContains(t, err, "at least 32 bytes")
}
