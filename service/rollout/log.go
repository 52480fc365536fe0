package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/dsse"
	"github.com/accordlab/accord/store"
)

// A program's decision log over the life of the installation's keys: every
// export, bundle and page reads it through ProgramLog (records, the latest
// checkpoint and the ones it superseded), and a key revocation carries every
// log on with a checkpoint signed by the new active key (CarryLogsOver).

// ProgramLog reads a program's decision log as an export carries it, with
// its stored rows. When the program has no decisions yet and signer is set,
// the log gets a checkpoint over the empty chain signed by it at now, so that
// the export says "no decisions" in a way a verifier can check.
func ProgramLog(ctx context.Context, st *store.Store, programID int64, signer *attest.Signer, now time.Time) (*attest.DecisionLog, []store.StoredDecision, error) {
	ds, err := st.ListDecisions(ctx, programID)
	if err != nil {
		return nil, nil, err
	}
	var latest *dsse.Envelope
	chain, err := st.ProgramDecisionChain(ctx, programID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, nil, err
	default:
		latest = chain.Checkpoint
	}
	log := StoredLog(programID, ds, latest)
	history, err := st.ListCheckpoints(ctx, programID)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range history {
		if !sameEnvelope(c.Envelope, latest) {
			log.EarlierCheckpoints = append(log.EarlierCheckpoints, c.Envelope)
		}
	}
	if log.Checkpoint == nil && len(ds) == 0 && signer != nil {
		if log.Checkpoint, err = attest.SignCheckpoint(signer, log.Chain, nil, now); err != nil {
			return nil, nil, fmt.Errorf("decision log of program %d: %w", programID, err)
		}
	}
	return log, ds, nil
}

func sameEnvelope(a, b *dsse.Envelope) bool {
	if a == nil || b == nil {
		return a == b
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// LogHead is a program's published log head: its latest checkpoint, or a
// checkpoint over the empty chain signed now by the active key.
func LogHead(ctx context.Context, st *store.Store, kr *attest.Keyring, programID int64, now time.Time) (*attest.LogHead, error) {
	chain, err := st.ProgramDecisionChain(ctx, programID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	checkpoint := chain.Checkpoint
	if checkpoint == nil {
		signer, err := kr.Active()
		if err != nil {
			return nil, err
		}
		if checkpoint, err = attest.SignCheckpoint(signer, store.ChainName(programID), nil, now); err != nil {
			return nil, fmt.Errorf("log head of program %d: %w", programID, err)
		}
	}
	return attest.NewLogHead(checkpoint)
}

// CarryLogsOver signs again, with the keyring's active key, every
// program's log head whose latest checkpoint a revoked key signed: the
// revoked key's checkpoints stay in the history, and the log carries on
// under a key that is trusted. A revocation cannot happen in the same
// transaction (the keyring is files), so it is carried over right after
// the revocation, and again by a periodic job and before a report is
// signed, for as long as a head is left (a carry-over that failed, or one
// another process missed). It carries each log in a transaction of its
// own, goes on past one that fails, and returns how many it carried and
// the failures joined.
func CarryLogsOver(ctx context.Context, st *store.Store, kr *attest.Keyring, now time.Time) (int, error) {
	revoked, err := revokedKeyIDs(kr)
	if err != nil || len(revoked) == 0 {
		return 0, err
	}
	chains, err := st.ListDecisionChainsSignedBy(ctx, revoked)
	if err != nil {
		return 0, err
	}
	carried := 0
	var errs []error
	for _, c := range chains {
		done, err := carryOver(ctx, st, kr, c.ProgramID, revoked, now)
		if err != nil {
			errs = append(errs, err)
		}
		if done {
			carried++
		}
	}
	return carried, errors.Join(errs...)
}

// CarryLogOver is CarryLogsOver for one program's log (before a report
// of it is signed); it says whether it signed the head again.
func CarryLogOver(ctx context.Context, st *store.Store, kr *attest.Keyring, programID int64, now time.Time) (bool, error) {
	revoked, err := revokedKeyIDs(kr)
	if err != nil || len(revoked) == 0 {
		return false, err
	}
	return carryOver(ctx, st, kr, programID, revoked, now)
}

func revokedKeyIDs(kr *attest.Keyring) ([]string, error) {
	keys, err := kr.PublicKeys()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, k := range keys {
		if k.Status == attest.KeyRevoked {
			ids = append(ids, k.ID)
		}
	}
	return ids, nil
}

// carryOver signs the program's head again when, under its lock, its
// latest checkpoint is still one of a revoked key's.
func carryOver(ctx context.Context, st *store.Store, kr *attest.Keyring, programID int64, revoked []string, now time.Time) (bool, error) {
	signedByRevoked := func(c store.DecisionChain) bool {
		return c.Checkpoint != nil && len(c.Checkpoint.Signatures) > 0 && slices.Contains(revoked, c.Checkpoint.Signatures[0].KeyID)
	}
	switch c, err := st.ProgramDecisionChain(ctx, programID); {
	case errors.Is(err, store.ErrNotFound):
		return false, nil // no decisions: nothing to carry
	case err != nil:
		return false, err
	case !signedByRevoked(c):
		return false, nil
	}
	signer, err := kr.Active()
	if err != nil {
		return false, err
	}
	carried := false
	err = st.InTx(ctx, func(tx *store.Store) error {
		locked, err := tx.LockDecisionChain(ctx, programID)
		if err != nil {
			return err
		}
		if !signedByRevoked(locked) {
			return nil // carried over meanwhile, or a new decision signed it
		}
		checkpoint, err := attest.SignCheckpoint(signer, locked.Chain, locked.Head(), now)
		if err != nil {
			return err
		}
		if err := tx.ReplaceCheckpoint(ctx, locked, checkpoint); err != nil {
			return err
		}
		carried = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("carry the decision log of program %d over to key %s: %w", programID, signer.KeyID(), err)
	}
	return carried, nil
}
