package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

func TestSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st   *store.Store
		tx   pgx.Tx
		user int64
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		tx := storetest.Tx(t)
		st := store.New(nil).WithTx(tx)
		return &testBundle{st: st, tx: tx, user: newUser(t, st, "user", nil)}
	}
	session := func(t *testing.T, b *testBundle, id string, expires time.Duration) {
		t.Helper()
		require.NoError(t, b.st.CreateSession(ctx, store.Session{ID: id, UserID: b.user, ExpiresAt: time.Now().Add(expires), ClientAddr: "192.0.2.1",
			UserAgent: strings.Repeat("agent ", 100)}))
	}

	t.Run("ASessionIsActiveUntilRevokedOrExpired", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, _, err := b.st.ActiveSession(ctx, uniqueName(t, "unknown"))
		require.ErrorIs(t, err, store.ErrNotFound)

		id := uniqueName(t, "live")
		session(t, b, id, time.Hour)
		sess, u, err := b.st.ActiveSession(ctx, id)
		require.NoError(t, err)
		require.Equal(t, b.user, u.ID)
		require.Equal(t, "192.0.2.1", sess.ClientAddr)
		require.Len(t, sess.UserAgent, 300, "the user agent is cut to 300 bytes")

		require.NoError(t, b.st.RevokeSession(ctx, id))
		_, _, err = b.st.ActiveSession(ctx, id)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.NoError(t, b.st.RevokeSession(ctx, id), "revoking twice is no error")

		expired := "old-" + uniqueName(t, "s")
		session(t, b, expired, -time.Minute)
		_, _, err = b.st.ActiveSession(ctx, expired)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("ADisabledUsersSessionsStopAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := uniqueName(t, "s")
		session(t, b, id, time.Hour)
		require.NoError(t, b.st.SetUserDisabled(ctx, b.user, true))
		_, _, err := b.st.ActiveSession(ctx, id)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("RevokingAUsersSessionsLeavesOthers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a1, a2 := uniqueName(t, "a"), uniqueName(t, "a")
		session(t, b, a1, time.Hour)
		session(t, b, a2, time.Hour)
		other := newUser(t, b.st, "other", nil)
		o := uniqueName(t, "o")
		require.NoError(t, b.st.CreateSession(ctx, store.Session{ID: o, UserID: other, ExpiresAt: time.Now().Add(time.Hour)}))

		require.NoError(t, b.st.RevokeUserSessions(ctx, b.user))
		for _, id := range []string{a1, a2} {
			_, _, err := b.st.ActiveSession(ctx, id)
			require.ErrorIs(t, err, store.ErrNotFound)
		}
		_, u, err := b.st.ActiveSession(ctx, o)
		require.NoError(t, err)
		require.Equal(t, other, u.ID)
	})

	t.Run("FailedSignInsCountPerAccountAndPerAddress", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		email := uniqueEmail(t, "Target")
		addr := "198.51.100." + uniqueName(t, "x")
		since := time.Now().Add(-time.Minute)
		for range 3 {
			_, err := b.st.BeginSignInAttempt(ctx, strings.ToUpper(email), addr)
			require.NoError(t, err)
		}
		ok, err := b.st.BeginSignInAttempt(ctx, email, "203.0.113.9")
		require.NoError(t, err)
		byEmail, byAddr, err := b.st.FailedSignIns(ctx, email, addr, since)
		require.NoError(t, err)
		require.Equal(t, 4, byEmail, "every attempt counts as failed until its password is right")
		require.Equal(t, 3, byAddr)

		require.NoError(t, b.st.SignInSucceeded(ctx, ok))
		byEmail, _, err = b.st.FailedSignIns(ctx, email, addr, since)
		require.NoError(t, err)
		require.Equal(t, 3, byEmail)
		byEmail, byAddr, err = b.st.FailedSignIns(ctx, email, addr, time.Now().Add(time.Minute))
		require.NoError(t, err)
		require.Zero(t, byEmail+byAddr, "only attempts since the time count")
	})

	t.Run("PruneDeletesWhatEndedBeforeTheCutOff", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		live, ended, recent := uniqueName(t, "live"), uniqueName(t, "ended"), uniqueName(t, "recent")
		session(t, b, live, time.Hour)
		session(t, b, ended, -48*time.Hour)
		session(t, b, recent, time.Hour)
		require.NoError(t, b.st.RevokeSession(ctx, recent)) // ended now, after the cut-off
		email := uniqueEmail(t, "old")
		_, err := b.tx.Exec(ctx, `INSERT INTO signin_attempts (at, email, client_addr, succeeded) VALUES (now() - interval '40 days', $1, 'x', false)`, email)
		require.NoError(t, err)
		_, err = b.st.BeginSignInAttempt(ctx, email, "x")
		require.NoError(t, err)

		sessions, attempts, err := b.st.Prune(ctx, time.Now().Add(-24*time.Hour), time.Now().Add(-30*24*time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 1, sessions)
		require.EqualValues(t, 1, attempts)
		_, _, err = b.st.ActiveSession(ctx, live)
		require.NoError(t, err)
		var left int
		require.NoError(t, b.tx.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE id IN ($1, $2, $3)`, live, ended, recent).Scan(&left))
		require.Equal(t, 2, left)
	})
}

func TestAPITokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st   *store.Store
		user int64
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		return &testBundle{st: st, user: newUser(t, st, "pipeline owner", nil)}
	}
	token := func(t *testing.T, b *testBundle, expires time.Duration) store.APIToken {
		t.Helper()
		tok := store.APIToken{ID: uniqueName(t, "tok"), UserID: b.user, Name: "ci", Scopes: []string{"read", "run"}, ExpiresAt: time.Now().Add(expires)}
		require.NoError(t, b.st.CreateAPIToken(ctx, tok))
		return tok
	}

	t.Run("AnActiveTokenNotesItsUse", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tok := token(t, b, time.Hour)
		got, u, err := b.st.ActiveAPIToken(ctx, tok.ID)
		require.NoError(t, err)
		require.Equal(t, b.user, u.ID)
		require.Equal(t, []string{"read", "run"}, got.Scopes)
		require.NotNil(t, got.LastUsedAt)

		_, _, err = b.st.ActiveAPIToken(ctx, token(t, b, -time.Second).ID)
		require.ErrorIs(t, err, store.ErrNotFound, "expired")
		require.NoError(t, b.st.SetUserDisabled(ctx, b.user, true))
		_, _, err = b.st.ActiveAPIToken(ctx, tok.ID)
		require.ErrorIs(t, err, store.ErrNotFound, "its user is disabled")
	})

	t.Run("OnlyItsOwnerRevokesAToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tok := token(t, b, time.Hour)
		other := newUser(t, b.st, "someone else", nil)
		_, err := b.st.RevokeAPIToken(ctx, other, tok.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
		_, _, err = b.st.ActiveAPIToken(ctx, tok.ID)
		require.NoError(t, err)

		first, err := b.st.RevokeAPIToken(ctx, b.user, tok.ID)
		require.NoError(t, err)
		require.NotNil(t, first.RevokedAt)
		again, err := b.st.RevokeAPIToken(ctx, b.user, tok.ID)
		require.NoError(t, err)
		require.Equal(t, first.RevokedAt, again.RevokedAt, "revoking again keeps the first time")
		_, _, err = b.st.ActiveAPIToken(ctx, tok.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("TokensAreListedPerUser", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, c := token(t, b, time.Hour), token(t, b, time.Hour)
		other := newUser(t, b.st, "other", nil)
		require.NoError(t, b.st.CreateAPIToken(ctx, store.APIToken{ID: uniqueName(t, "theirs"), UserID: other, Name: "x", Scopes: []string{"read"}, ExpiresAt: time.Now().Add(time.Hour)}))
		list, err := b.st.ListAPITokens(ctx, b.user)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{a.ID, c.ID}, []string{list[0].ID, list[1].ID})
		require.Len(t, list, 2)
	})
}
