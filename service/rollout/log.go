package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	chain, err := st.GetDecisionChain(ctx, programID)
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
	chain, err := st.GetDecisionChain(ctx, programID)
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

// CarryLogsOver signs every program's log head again with the keyring's
// active key, after a key was revoked: the revoked key's checkpoints stay
// in the history, and the log carries on under a key that is trusted.
// It returns how many logs it carried over.
func CarryLogsOver(ctx context.Context, st *store.Store, kr *attest.Keyring, now time.Time) (int, error) {
	chains, err := st.ListDecisionChains(ctx)
	if err != nil {
		return 0, err
	}
	signer, err := kr.Active()
	if err != nil {
		return 0, err
	}
	for _, c := range chains {
		err := st.InTx(ctx, func(tx *store.Store) error {
			locked, err := tx.LockDecisionChain(ctx, c.ProgramID)
			if err != nil {
				return err
			}
			checkpoint, err := attest.SignCheckpoint(signer, locked.Chain, locked.Head(), now)
			if err != nil {
				return err
			}
			return tx.ReplaceCheckpoint(ctx, locked, checkpoint)
		})
		if err != nil {
			return 0, fmt.Errorf("carry the decision log of program %d over to key %s: %w", c.ProgramID, signer.KeyID(), err)
		}
	}
	return len(chains), nil
}
