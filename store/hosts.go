package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// JumpHop is one hop of a host's jump chain (like ProxyJump), each with
// its own pinned host key.
type JumpHop struct {
	Address       string `json:"address"`
	Port          int    `json:"port"`
	Username      string `json:"username"`
	HostKey       string `json:"host_key"`
	HostKeySHA256 string `json:"host_key_sha256"`
}

// Host is a lab host of a program, reached over SSH.
type Host struct {
	ID               int64
	ProgramID        int64
	Name             string
	Address          string
	Port             int
	Username         string
	Labels           map[string]string
	JumpChain        []JumpHop
	AuthMethod       string // key or agent
	PublicKey        string // the generated key's authorized_keys line
	SealedPrivateKey []byte
	AgentSocket      string
	HostKey          string // pinned, authorized_keys form; "" until confirmed
	HostKeySHA256    string
	HostKeyPinnedAt  *time.Time
	AllowDestructive bool
	// WritePlaces are where tests may write on the host
	// (acceptance.WritePlaces).
	WritePlaces      []string
	Emulated         bool
	LastCheckAt      *time.Time
	LastCheckOK      *bool
	LastCheckMessage string
	LastRTTMs        *float64
	CreatedAt        time.Time
	// LastFactsAt is when the host's newest facts were taken (by a check
	// or at the start of a run, LastFactsRunID), nil when none were.
	LastFactsAt    *time.Time
	LastFactsRunID *int64
}

// Pinned reports whether the host key was confirmed (every hop included).
func (h Host) Pinned() bool {
	if h.HostKey == "" {
		return false
	}
	for _, j := range h.JumpChain {
		if j.HostKey == "" {
			return false
		}
	}
	return true
}

const hostColumns = `id, program_id, name, address, port, username, labels, jump_chain, auth_method, public_key, sealed_private_key,
	agent_socket, host_key, host_key_sha256, host_key_pinned_at, allow_destructive, write_places, emulated, last_check_at, last_check_ok,
	last_check_message, last_rtt_ms, created_at,
	(SELECT f.taken_at FROM host_facts f WHERE f.host_id = hosts.id ORDER BY f.taken_at DESC, f.id DESC LIMIT 1),
	(SELECT f.run_id FROM host_facts f WHERE f.host_id = hosts.id ORDER BY f.taken_at DESC, f.id DESC LIMIT 1)`

func scanHost(row pgx.Row) (Host, error) {
	var h Host
	var labels, jumps []byte
	err := row.Scan(&h.ID, &h.ProgramID, &h.Name, &h.Address, &h.Port, &h.Username, &labels, &jumps, &h.AuthMethod, &h.PublicKey,
		&h.SealedPrivateKey, &h.AgentSocket, &h.HostKey, &h.HostKeySHA256, &h.HostKeyPinnedAt, &h.AllowDestructive, &h.WritePlaces, &h.Emulated,
		&h.LastCheckAt, &h.LastCheckOK, &h.LastCheckMessage, &h.LastRTTMs, &h.CreatedAt, &h.LastFactsAt, &h.LastFactsRunID)
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(labels, &h.Labels); err != nil {
		return h, fmt.Errorf("host labels: %w", err)
	}
	if err := json.Unmarshal(jumps, &h.JumpChain); err != nil {
		return h, fmt.Errorf("host jump chain: %w", err)
	}
	return h, nil
}

// NewHost is what registering a host needs.
type NewHost struct {
	Name             string
	Address          string
	Port             int
	Username         string
	Labels           map[string]string
	JumpChain        []JumpHop
	AuthMethod       string
	PublicKey        string
	SealedPrivateKey []byte
	AgentSocket      string
	AllowDestructive bool
	WritePlaces      []string
	Emulated         bool
	CreatedBy        int64
}

// CreateHost registers a host; a duplicate name in the program is ErrConflict.
func (s *Store) CreateHost(ctx context.Context, programID int64, h NewHost) (int64, error) {
	if h.Labels == nil {
		h.Labels = map[string]string{}
	}
	if h.JumpChain == nil {
		h.JumpChain = []JumpHop{}
	}
	if h.WritePlaces == nil {
		h.WritePlaces = []string{}
	}
	labels, _ := json.Marshal(h.Labels)
	jumps, _ := json.Marshal(h.JumpChain)
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO hosts (program_id, name, address, port, username, labels, jump_chain, auth_method,
		public_key, sealed_private_key, agent_socket, allow_destructive, write_places, emulated, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING id`,
		programID, h.Name, h.Address, h.Port, h.Username, labels, jumps, h.AuthMethod, h.PublicKey, h.SealedPrivateKey,
		h.AgentSocket, h.AllowDestructive, h.WritePlaces, h.Emulated, nullID(h.CreatedBy)).Scan(&id)
	if err != nil {
		return 0, notFound(err, "create host")
	}
	return id, nil
}

// ListHosts returns a program's hosts by name.
func (s *Store) ListHosts(ctx context.Context, programID int64) ([]Host, error) {
	rows, err := s.db.Query(ctx, `SELECT `+hostColumns+` FROM hosts WHERE program_id = $1 ORDER BY lower(name)`, programID)
	if err != nil {
		return nil, fmt.Errorf("store: list hosts: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Host, error) { return scanHost(r) })
}

// GetHost returns a host of the program.
func (s *Store) GetHost(ctx context.Context, programID, hostID int64) (Host, error) {
	h, err := scanHost(s.db.QueryRow(ctx, `SELECT `+hostColumns+` FROM hosts WHERE id = $1 AND program_id = $2`, hostID, programID))
	if err != nil {
		return h, notFound(err, fmt.Sprintf("host %d", hostID))
	}
	return h, nil
}

// PinHostKeys records the confirmed host keys of the host and its hops.
// The caller passes what the engineer confirmed; pinning replaces nothing
// silently: a pinned host must be unpinned (re-scanned) on purpose.
func (s *Store) PinHostKeys(ctx context.Context, programID, hostID int64, key, sha string, jumps []JumpHop) error {
	b, _ := json.Marshal(jumps)
	tag, err := s.db.Exec(ctx, `UPDATE hosts SET host_key = $3, host_key_sha256 = $4, host_key_pinned_at = now(), jump_chain = $5
		WHERE id = $1 AND program_id = $2`, hostID, programID, key, sha, b)
	if err != nil {
		return fmt.Errorf("store: pin host key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: pin host key of host %d: %w", hostID, ErrNotFound)
	}
	return nil
}

// SetHostWritePlaces replaces where tests may write on the host, and
// whether destructive steps (writes to its declared devices) are allowed.
func (s *Store) SetHostWritePlaces(ctx context.Context, programID, hostID int64, places []string, allowDestructive bool) error {
	if places == nil {
		places = []string{}
	}
	tag, err := s.db.Exec(ctx, `UPDATE hosts SET write_places = $3, allow_destructive = $4 WHERE id = $1 AND program_id = $2`,
		hostID, programID, places, allowDestructive)
	return oneRow(tag, err, fmt.Sprintf("set write places of host %d", hostID))
}

// RecordHostCheck notes the outcome of a host check.
func (s *Store) RecordHostCheck(ctx context.Context, hostID int64, ok bool, message string, rttMs *float64) error {
	tag, err := s.db.Exec(ctx, `UPDATE hosts SET last_check_at = now(), last_check_ok = $2, last_check_message = $3, last_rtt_ms = $4 WHERE id = $1`,
		hostID, ok, truncate(message, 2000), rttMs)
	return oneRow(tag, err, fmt.Sprintf("record check of host %d", hostID))
}

// HostFacts is one capture of a host's facts.
type HostFacts struct {
	ID      int64
	HostID  int64
	RunID   *int64
	TakenAt time.Time
	Facts   json.RawMessage
	Digest  string
}

// AddHostFacts stores facts taken by a check or at the start of a run.
func (s *Store) AddHostFacts(ctx context.Context, hostID int64, runID *int64, facts json.RawMessage, digest string) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `INSERT INTO host_facts (host_id, run_id, facts, digest) VALUES ($1, $2, $3, $4) RETURNING id`,
		hostID, runID, facts, digest).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("store: add host facts: %w", err)
	}
	return id, nil
}

// HostFactsHistory returns a host's facts, newest first.
func (s *Store) HostFactsHistory(ctx context.Context, hostID int64, limit int) ([]HostFacts, error) {
	rows, err := s.db.Query(ctx, `SELECT id, host_id, run_id, taken_at, facts, digest FROM host_facts WHERE host_id = $1 ORDER BY taken_at DESC, id DESC LIMIT $2`, hostID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: host facts: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[HostFacts])
}

// RunFacts returns the facts taken for a run (or ErrNotFound).
func (s *Store) RunFacts(ctx context.Context, runID int64) (HostFacts, error) {
	rows, err := s.db.Query(ctx, `SELECT id, host_id, run_id, taken_at, facts, digest FROM host_facts WHERE run_id = $1 ORDER BY id DESC LIMIT 1`, runID)
	if err != nil {
		return HostFacts{}, fmt.Errorf("store: run facts: %w", err)
	}
	f, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[HostFacts])
	if err != nil {
		return f, notFound(err, fmt.Sprintf("facts of run %d", runID))
	}
	return f, nil
}

// RunHostFacts returns the facts taken for a run on each of its hosts
// (the latest per host), by host id.
func (s *Store) RunHostFacts(ctx context.Context, runID int64) (map[int64]HostFacts, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT ON (host_id) id, host_id, run_id, taken_at, facts, digest FROM host_facts
		WHERE run_id = $1 ORDER BY host_id, id DESC`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: run facts: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[HostFacts])
	if err != nil {
		return nil, fmt.Errorf("store: run facts: %w", err)
	}
	out := make(map[int64]HostFacts, len(list))
	for _, f := range list {
		out[f.HostID] = f
	}
	return out, nil
}

// SetHostSealedKey stores a host's sealed private key (sealed after the
// row exists, because the seal is bound to the row's id).
func (s *Store) SetHostSealedKey(ctx context.Context, hostID int64, sealed []byte) error {
	tag, err := s.db.Exec(ctx, `UPDATE hosts SET sealed_private_key = $2 WHERE id = $1`, hostID, sealed)
	return oneRow(tag, err, fmt.Sprintf("seal key of host %d", hostID))
}

// SetHostPublicKey stores the public half of a host's client key, the line
// its administrator adds to authorized_keys (the demo lab's key is made
// outside Accord's host form).
func (s *Store) SetHostPublicKey(ctx context.Context, hostID int64, publicKey string) error {
	tag, err := s.db.Exec(ctx, `UPDATE hosts SET public_key = $2 WHERE id = $1`, hostID, publicKey)
	return oneRow(tag, err, fmt.Sprintf("public key of host %d", hostID))
}
