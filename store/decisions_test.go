package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/dsse"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

// signingKey is a keyring of the test's own with its active signer, made
// before the decisions the tests date.
func signingKey(t *testing.T) (*attest.Keyring, *attest.Signer) {
	t.Helper()
	kr, err := attest.OpenKeyring(t.TempDir(), attest.KeyringOptions{Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }})
	require.NoError(t, err)
	signer, err := kr.Active()
	require.NoError(t, err)
	return kr, signer
}

// appendDecision signs a decision of kind on the chain's head and appends
// it, in tx (which holds the chain's lock until it ends).
func appendDecision(t *testing.T, tx *store.Store, programID int64, signer *attest.Signer, kind string) (attest.SignedDecision, error) {
	t.Helper()
	ctx := context.Background()
	chain, err := tx.LockDecisionChain(ctx, programID)
	if err != nil {
		return attest.SignedDecision{}, err
	}
	rec, err := attest.NextDecision(chain.Head(), attest.Decision{Chain: chain.Chain, Kind: kind, Actor: "approver@example.com",
		Organisation: "customer:C", Time: time.Now(), Stage: "pilot"})
	if err != nil {
		return attest.SignedDecision{}, err
	}
	signed, err := attest.SignDecision(signer, rec)
	if err != nil {
		return signed, err
	}
	cp, err := attest.SignCheckpoint(signer, chain.Chain, &signed, time.Now())
	if err != nil {
		return signed, err
	}
	return signed, tx.AppendDecision(ctx, programID, signed, 0, cp)
}

func TestDecisionLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st             *store.Store
		program, other int64
		keyring        *attest.Keyring
		signer         *attest.Signer
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		p := newProgram(t, st)
		other := p.another(t, st)
		kr, signer := signingKey(t)
		return &testBundle{st: st, program: p.ID, other: other, keyring: kr, signer: signer}
	}

	// A record read back from the database hashes and verifies exactly as
	// it was signed: time at microsecond precision, evidence as JSON.
	t.Run("ARecordReadsBackAsSigned", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := store.New(b.st.Pool).LockDecisionChain(ctx, b.program)
		require.ErrorContains(t, err, "needs a transaction")
		_, err = b.st.ProgramDecisionChain(ctx, b.program)
		require.ErrorIs(t, err, store.ErrNotFound)

		at := time.Date(2026, 11, 30, 9, 0, 0, 123456789, time.FixedZone("CET", 3600))
		for i, kind := range []string{"approve", "approve", "stop-loss-triggered"} {
			chain, err := b.st.LockDecisionChain(ctx, b.program)
			require.NoError(t, err)
			require.Equal(t, int64(i), chain.HeadSeq)
			require.Equal(t, store.ChainName(b.program), chain.Chain)
			rec, err := attest.NextDecision(chain.Head(), attest.Decision{Chain: chain.Chain, Kind: kind, Actor: fmt.Sprintf("user%d@example.com", i),
				Organisation: "vendor:V", Time: at.Add(time.Duration(i) * time.Minute), Stage: "pilot", Reason: "ünïcode reason 😀",
				Evidence: attest.DecisionEvidence{RunIDs: []string{"7"}, Verdicts: map[string]string{"gates": "PASS", "7": "PASS"}, Digests: map[string]string{"evaluation/7": "sha256:ab"}}})
			require.NoError(t, err)
			signed, err := attest.SignDecision(b.signer, rec)
			require.NoError(t, err)
			cp, err := attest.SignCheckpoint(b.signer, chain.Chain, &signed, at)
			require.NoError(t, err)
			require.NoError(t, b.st.AppendDecision(ctx, b.program, signed, 0, cp))
			if i == 0 {
				// The same seq again does not follow the head.
				err := b.st.InTx(ctx, func(tx *store.Store) error { return tx.AppendDecision(ctx, b.program, signed, 0, cp) })
				require.ErrorIs(t, err, store.ErrConflict)
			}
		}
		ds, err := b.st.ListDecisions(ctx, b.program)
		require.NoError(t, err)
		require.Len(t, ds, 3)
		chain, err := b.st.ProgramDecisionChain(ctx, b.program)
		require.NoError(t, err)
		require.Equal(t, int64(3), chain.HeadSeq)
		require.Equal(t, ds[2].Hash, chain.HeadHash)
		records := make([]attest.Decision, len(ds))
		envs := make([]*dsse.Envelope, len(ds))
		signed := make([]attest.SignedDecision, len(ds))
		for i, d := range ds {
			records[i], envs[i], signed[i] = d.Record, d.Envelope, d.Signed()
			h, err := d.Record.Hash()
			require.NoError(t, err)
			require.Equal(t, d.Hash, h, "record %d hashes as signed", i+1)
		}
		keys, err := b.keyring.KeySet()
		require.NoError(t, err)
		require.NoError(t, attest.VerifyChain(records, envs, chain.Checkpoint, keys))
		_, err = attest.NewDecisionLog(chain.Chain, signed, chain.Checkpoint).Verify(keys)
		require.NoError(t, err)

		list, err := b.st.ListDecisions(ctx, b.other)
		require.NoError(t, err)
		require.Empty(t, list, "another program's log is its own")
		err = b.st.InTx(ctx, func(tx *store.Store) error {
			_, err := tx.Tx().Exec(ctx, `UPDATE decisions SET reason = 'x'`)
			return err
		})
		require.ErrorContains(t, err, "decisions is append-only")
	})

	t.Run("AnEmptyChainHasNoHead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		chain, err := b.st.LockDecisionChain(ctx, b.program)
		require.NoError(t, err)
		require.Nil(t, chain.Head())
		require.Equal(t, attest.GenesisHash, chain.HeadHash)
		require.Nil(t, chain.Checkpoint)
		again, err := b.st.LockDecisionChain(ctx, b.program)
		require.NoError(t, err)
		require.Equal(t, chain.HeadHash, again.HeadHash, "locking twice creates nothing new")
	})

	t.Run("ARecordMustFollowTheHead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, err := appendDecision(t, b.st, b.program, b.signer, "approve")
		require.NoError(t, err)
		// A record built on the genesis again (seq 1 twice) and one that
		// skips a number are both refused.
		rec, err := attest.NextDecision(nil, attest.Decision{Chain: store.ChainName(b.program), Kind: "approve", Actor: "x", Time: time.Now()})
		require.NoError(t, err)
		again, err := attest.SignDecision(b.signer, rec)
		require.NoError(t, err)
		err = inSavepoint(b.st, func(tx *store.Store) error { return tx.AppendDecision(ctx, b.program, again, 0, nil) })
		require.ErrorIs(t, err, store.ErrConflict)
		skip := first
		skip.Record.Seq = 3
		err = inSavepoint(b.st, func(tx *store.Store) error { return tx.AppendDecision(ctx, b.program, skip, 0, nil) })
		require.ErrorIs(t, err, store.ErrConflict)
		list, err := b.st.ListDecisions(ctx, b.program)
		require.NoError(t, err)
		require.Len(t, list, 1)
	})
}

// Decisions appended at the same moment are numbered one after another:
// the chain's lock makes each wait for the one before, and the chain
// verifies.
func TestDecisionsAppendedConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(storetest.NewPool(t))
	p := newProgram(t, st)
	kr, signer := signingKey(t)

	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = st.InTx(ctx, func(tx *store.Store) error {
				_, err := appendDecision(t, tx, p.ID, signer, fmt.Sprintf("approve-%d", i))
				return err
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	ds, err := st.ListDecisions(ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, ds, n)
	records := make([]attest.Decision, n)
	envs := make([]*dsse.Envelope, n)
	for i, d := range ds {
		require.EqualValues(t, i+1, d.Record.Seq)
		records[i], envs[i] = d.Record, d.Envelope
	}
	chain, err := st.ProgramDecisionChain(ctx, p.ID)
	require.NoError(t, err)
	require.EqualValues(t, n, chain.HeadSeq)
	keys, err := kr.KeySet()
	require.NoError(t, err)
	require.NoError(t, attest.VerifyChain(records, envs, chain.Checkpoint, keys))
}
