package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/dsse"
)

// DecisionChain is the head of a program's decision log: the last record's
// seq and hash, and the signed checkpoint over them.
type DecisionChain struct {
	ProgramID  int64
	Chain      string
	HeadSeq    int64
	HeadHash   string
	Checkpoint *dsse.Envelope
	UpdatedAt  time.Time
}

// Head returns the chain's last record as attest.NextDecision needs it (nil
// for an empty chain).
func (c DecisionChain) Head() *attest.SignedDecision {
	if c.HeadSeq == 0 {
		return nil
	}
	return &attest.SignedDecision{Record: attest.Decision{Chain: c.Chain, Seq: c.HeadSeq}, Hash: c.HeadHash}
}

// ChainName is the decision chain of a program.
func ChainName(programID int64) string { return fmt.Sprintf("program:%d", programID) }

func scanChain(row pgx.Row) (DecisionChain, error) {
	var c DecisionChain
	var cp []byte
	if err := row.Scan(&c.ProgramID, &c.Chain, &c.HeadSeq, &c.HeadHash, &cp, &c.UpdatedAt); err != nil {
		return c, err
	}
	if cp != nil {
		c.Checkpoint = &dsse.Envelope{}
		if err := json.Unmarshal(cp, c.Checkpoint); err != nil {
			return c, fmt.Errorf("checkpoint: %w", err)
		}
	}
	return c, nil
}

const chainColumns = `program_id, chain, head_seq, head_hash, checkpoint, updated_at`

// LockDecisionChain returns a program's chain head, locked until the
// transaction ends, creating it when the program has none: every append,
// and every change that a decision's rules depend on (the plan), takes this
// lock first, so decisions are numbered and judged one at a time.
func (s *Store) LockDecisionChain(ctx context.Context, programID int64) (DecisionChain, error) {
	if s.tx == nil {
		return DecisionChain{}, fmt.Errorf("store: lock decision chain of program %d: needs a transaction", programID)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO decision_chains (program_id, chain, head_hash) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		programID, ChainName(programID), attest.GenesisHash); err != nil {
		return DecisionChain{}, fmt.Errorf("store: decision chain of program %d: %w", programID, err)
	}
	c, err := scanChain(s.db.QueryRow(ctx, `SELECT `+chainColumns+` FROM decision_chains WHERE program_id = $1 FOR UPDATE`, programID))
	if err != nil {
		return c, notFound(err, fmt.Sprintf("decision chain of program %d", programID))
	}
	return c, nil
}

// ProgramDecisionChain returns a program's chain head (ErrNotFound before its
// first decision).
func (s *Store) ProgramDecisionChain(ctx context.Context, programID int64) (DecisionChain, error) {
	c, err := scanChain(s.db.QueryRow(ctx, `SELECT `+chainColumns+` FROM decision_chains WHERE program_id = $1`, programID))
	if err != nil {
		return c, notFound(err, fmt.Sprintf("decision chain of program %d", programID))
	}
	return c, nil
}

// StoredDecision is one row of the decision log: the signed record, its
// hash and envelope, and the account it links to (for pages).
type StoredDecision struct {
	ProgramID   int64
	Record      attest.Decision
	Hash        string
	Envelope    *dsse.Envelope
	ActorUserID *int64
	ActorName   string
	CreatedAt   time.Time
}

// Signed returns the row as attest's signed record.
func (d StoredDecision) Signed() attest.SignedDecision {
	return attest.SignedDecision{Record: d.Record, Hash: d.Hash, Envelope: d.Envelope}
}

// AppendDecision inserts a signed record and moves the chain's head to it,
// with the checkpoint signed over it. The caller holds the chain's lock
// (LockDecisionChain) and built the record on its head.
func (s *Store) AppendDecision(ctx context.Context, programID int64, d attest.SignedDecision, actorUserID int64, checkpoint *dsse.Envelope) error {
	evidence, err := json.Marshal(d.Record.Evidence)
	if err != nil {
		return fmt.Errorf("store: decision %d evidence: %w", d.Record.Seq, err)
	}
	env, err := json.Marshal(d.Envelope)
	if err != nil {
		return fmt.Errorf("store: decision %d envelope: %w", d.Record.Seq, err)
	}
	cp, err := json.Marshal(checkpoint)
	if err != nil {
		return fmt.Errorf("store: decision %d checkpoint: %w", d.Record.Seq, err)
	}
	r := d.Record
	_, err = s.db.Exec(ctx, `INSERT INTO decisions (program_id, seq, chain, kind, actor, organisation, at, stage, evidence, reason, prev_hash, hash, envelope, actor_user_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		programID, r.Seq, r.Chain, r.Kind, r.Actor, r.Organisation, r.Time, r.Stage, evidence, r.Reason, r.PrevHash, d.Hash, env, nullID(actorUserID))
	if err != nil {
		return notFound(err, fmt.Sprintf("append decision %d of program %d", r.Seq, programID))
	}
	tag, err := s.db.Exec(ctx, `UPDATE decision_chains SET head_seq = $2, head_hash = $3, checkpoint = $4, updated_at = now()
		WHERE program_id = $1 AND head_seq = $2 - 1`, programID, r.Seq, d.Hash, cp)
	if err != nil {
		return fmt.Errorf("store: move decision chain of program %d: %w", programID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("store: decision %d does not follow the head of program %d's chain: %w", r.Seq, programID, ErrConflict)
	}
	return s.keepCheckpoint(ctx, programID, r.Seq, d.Hash, CheckpointForDecision, checkpoint, cp)
}

// Why a checkpoint was signed.
const (
	CheckpointForDecision   = "decision"
	CheckpointForRevocation = "key_revoked"
)

func (s *Store) keepCheckpoint(ctx context.Context, programID, seq int64, head, reason string, env *dsse.Envelope, raw []byte) error {
	keyID := ""
	if len(env.Signatures) > 0 {
		keyID = env.Signatures[0].KeyID
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO decision_checkpoints (program_id, seq, head_hash, key_id, reason, envelope)
		VALUES ($1, $2, $3, $4, $5, $6)`, programID, seq, head, keyID, reason, raw); err != nil {
		return fmt.Errorf("store: keep checkpoint of program %d at seq %d: %w", programID, seq, err)
	}
	return nil
}

// ReplaceCheckpoint makes checkpoint the chain's latest, over the same
// head, and keeps it in the history (after a key revocation the head is
// signed again with the active key). The caller holds the chain's lock.
func (s *Store) ReplaceCheckpoint(ctx context.Context, chain DecisionChain, checkpoint *dsse.Envelope) error {
	raw, err := json.Marshal(checkpoint)
	if err != nil {
		return fmt.Errorf("store: checkpoint of program %d: %w", chain.ProgramID, err)
	}
	tag, err := s.db.Exec(ctx, `UPDATE decision_chains SET checkpoint = $3, updated_at = now() WHERE program_id = $1 AND head_seq = $2`,
		chain.ProgramID, chain.HeadSeq, raw)
	if err != nil {
		return fmt.Errorf("store: checkpoint of program %d: %w", chain.ProgramID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("store: checkpoint of program %d: the head moved: %w", chain.ProgramID, ErrConflict)
	}
	return s.keepCheckpoint(ctx, chain.ProgramID, chain.HeadSeq, chain.HeadHash, CheckpointForRevocation, checkpoint, raw)
}

// StoredCheckpoint is one checkpoint of a program's history.
type StoredCheckpoint struct {
	Seq       int64
	HeadHash  string
	KeyID     string
	Reason    string
	Envelope  *dsse.Envelope
	CreatedAt time.Time
}

// ListCheckpoints returns every checkpoint a program's log had, oldest first.
func (s *Store) ListCheckpoints(ctx context.Context, programID int64) ([]StoredCheckpoint, error) {
	rows, err := s.db.Query(ctx, `SELECT seq, head_hash, key_id, reason, envelope, created_at FROM decision_checkpoints
		WHERE program_id = $1 ORDER BY id`, programID)
	if err != nil {
		return nil, fmt.Errorf("store: checkpoints of program %d: %w", programID, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StoredCheckpoint, error) {
		var c StoredCheckpoint
		var env []byte
		if err := row.Scan(&c.Seq, &c.HeadHash, &c.KeyID, &c.Reason, &env, &c.CreatedAt); err != nil {
			return c, err
		}
		c.Envelope = &dsse.Envelope{}
		if err := json.Unmarshal(env, c.Envelope); err != nil {
			return c, fmt.Errorf("checkpoint at seq %d: %w", c.Seq, err)
		}
		return c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: checkpoints of program %d: %w", programID, err)
	}
	return list, nil
}

// ListDecisionChains returns every program's chain head that has a
// checkpoint (a program with decisions).
func (s *Store) ListDecisionChains(ctx context.Context) ([]DecisionChain, error) {
	rows, err := s.db.Query(ctx, `SELECT `+chainColumns+` FROM decision_chains WHERE checkpoint IS NOT NULL ORDER BY program_id`)
	if err != nil {
		return nil, fmt.Errorf("store: decision chains: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DecisionChain, error) { return scanChain(row) })
	if err != nil {
		return nil, fmt.Errorf("store: decision chains: %w", err)
	}
	return list, nil
}

// ListDecisionChainsSignedBy returns the chain heads whose latest
// checkpoint is signed (first signature) by one of keyIDs.
func (s *Store) ListDecisionChainsSignedBy(ctx context.Context, keyIDs []string) ([]DecisionChain, error) {
	if len(keyIDs) == 0 {
		return nil, nil
	}
	rows, err := s.db.Query(ctx, `SELECT `+chainColumns+` FROM decision_chains
		WHERE checkpoint->'signatures'->0->>'keyid' = ANY($1) ORDER BY program_id`, keyIDs)
	if err != nil {
		return nil, fmt.Errorf("store: decision chains signed by %v: %w", keyIDs, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DecisionChain, error) { return scanChain(row) })
	if err != nil {
		return nil, fmt.Errorf("store: decision chains signed by %v: %w", keyIDs, err)
	}
	return list, nil
}

// ListDecisions returns a program's decision log in order.
func (s *Store) ListDecisions(ctx context.Context, programID int64) ([]StoredDecision, error) {
	rows, err := s.db.Query(ctx, `SELECT d.program_id, d.seq, d.chain, d.kind, d.actor, d.organisation, d.at, d.stage, d.evidence, d.reason,
			d.prev_hash, d.hash, d.envelope, d.actor_user_id, coalesce(u.display_name, ''), d.created_at
		FROM decisions d LEFT JOIN users u ON u.id = d.actor_user_id
		WHERE d.program_id = $1 ORDER BY d.seq`, programID)
	if err != nil {
		return nil, fmt.Errorf("store: decisions of program %d: %w", programID, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StoredDecision, error) {
		var d StoredDecision
		var evidence, env []byte
		r := &d.Record
		if err := row.Scan(&d.ProgramID, &r.Seq, &r.Chain, &r.Kind, &r.Actor, &r.Organisation, &r.Time, &r.Stage, &evidence, &r.Reason,
			&r.PrevHash, &d.Hash, &env, &d.ActorUserID, &d.ActorName, &d.CreatedAt); err != nil {
			return d, err
		}
		// A row whose JSON no longer reads is kept as it is: verification
		// then names it, rather than the page failing.
		_ = json.Unmarshal(evidence, &r.Evidence)
		d.Envelope = &dsse.Envelope{}
		if err := json.Unmarshal(env, d.Envelope); err != nil {
			d.Envelope = nil
		}
		return d, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: decisions of program %d: %w", programID, err)
	}
	return list, nil
}
