package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const issuer = "accord"

// Audiences keep a session cookie from being used as an API token and back.
const (
	AudienceWeb = "accord-web"
	AudienceAPI = "accord-api"
)

// Scopes of API tokens.
const (
	ScopeRead    = "read"
	ScopeRun     = "run"
	ScopeApprove = "approve"
	// ScopeDeploy is a deployer's token (Argo Rollouts, Flagger): it reads
	// the state of rollout stages through the deploy endpoints and nothing
	// else, so it is given alone.
	ScopeDeploy = "deploy"
)

// AllScopes lists the scopes in display order.
var AllScopes = []string{ScopeRead, ScopeRun, ScopeApprove, ScopeDeploy}

// Keys signs and verifies Accord's JWTs. Each audience has its own HMAC key
// derived from the server's secret, so that the secret itself never signs.
type Keys struct {
	web []byte
	api []byte
}

// NewKeys derives the signing keys from the server's secret (at least 32 bytes).
func NewKeys(secret []byte) (*Keys, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("auth: the secret key must have at least 32 bytes, it has %d", len(secret))
	}
	return &Keys{web: derive(secret, "accord session jwt v1"), api: derive(secret, "accord api token jwt v1")}, nil
}

// Derive returns a key for another purpose (sealing host keys, webhooks).
func (k *Keys) Derive(secret []byte, purpose string) []byte { return derive(secret, purpose) }

func derive(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// Claims are the claims Accord issues: the subject is the user id and the
// JWT id the session or token id.
type Claims struct {
	Scopes []string `json:"scp,omitempty"`
	jwt.RegisteredClaims
}

// NewID returns a random 128-bit identifier in hex.
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Issue signs a token for userID with id, valid from now until expires.
func (k *Keys) Issue(audience string, userID int64, id string, scopes []string, now, expires time.Time) (string, error) {
	key, err := k.keyFor(audience)
	if err != nil {
		return "", err
	}
	claims := Claims{
		Scopes: scopes,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuer,
			Subject:   strconv.FormatInt(userID, 10),
			Audience:  jwt.ClaimStrings{audience},
			ID:        id,
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(expires),
		},
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
}

// ErrInvalidToken covers every way a token can be refused; the cause is
// wrapped for logs, never shown to the client.
var ErrInvalidToken = errors.New("invalid token")

// Verify checks a token for audience: only HS256 with our key, our issuer
// and audience, and exp/nbf/iat present and valid. It returns the user id
// and the session or token id; the caller must still check that id in the
// database (revocation).
func (k *Keys) Verify(audience, token string, now time.Time) (int64, Claims, error) {
	key, err := k.keyFor(audience)
	if err != nil {
		return 0, Claims{}, err
	}
	var claims Claims
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(issuer),
		jwt.WithAudience(audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(5*time.Second),
		jwt.WithTimeFunc(func() time.Time { return now }),
	)
	_, err = parser.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		if t.Method != jwt.SigningMethodHS256 {
			return nil, fmt.Errorf("unexpected signing method %v", t.Header["alg"])
		}
		return key, nil
	})
	if err != nil {
		return 0, Claims{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if claims.NotBefore == nil || claims.ID == "" {
		return 0, Claims{}, fmt.Errorf("%w: missing nbf or jti", ErrInvalidToken)
	}
	userID, err := strconv.ParseInt(claims.Subject, 10, 64)
	if err != nil || userID <= 0 {
		return 0, Claims{}, fmt.Errorf("%w: bad subject", ErrInvalidToken)
	}
	return userID, claims, nil
}

// HasScope reports whether the claims grant scope.
func (c Claims) HasScope(scope string) bool { return slices.Contains(c.Scopes, scope) }

func (k *Keys) keyFor(audience string) ([]byte, error) {
	switch audience {
	case AudienceWeb:
		return k.web, nil
	case AudienceAPI:
		return k.api, nil
	}
	return nil, fmt.Errorf("auth: unknown audience %q", audience)
}
