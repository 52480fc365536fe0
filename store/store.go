// Package store is Accord's PostgreSQL access, one file per aggregate. Every
// method takes a context; "not found" is ErrNotFound, never a nil result.
//
// Who may read what: a program's rows are read through the program's id
// (GetRun(ctx, programID, runID): another program's run is simply not
// found), and the handlers establish first that the caller is a member of
// that program (ProgramFor, in their inProgram middleware). The parts of
// one run, host or program are then read by that object's id (RunFacts,
// HostFactsHistory, ProgramCounts): the caller holds the object already,
// from a program-checked read or, in a worker, from an id Accord itself
// holds (RunByID: a job's run). No read by an id alone takes an id from a
// request.
//
// Getters are named by what they read:
//
//	GetX(ctx, programID, id)   one row of a program, by its id, filtered by the program
//	                           (GetSpecVersion by spec and number beside GetSpecVersionByID)
//	RunX, HostX, ProgramX      a part of one run, host or program, by its id (RunFacts,
//	(ctx, id, …)               RunMeasurements, RunLatestEvaluation, HostLease,
//	                           ProgramDecisionChain); the caller holds the object
//	XFor(ctx, userID, …)       what a user may see, filtered by membership
//	XByKey(ctx, key)           one row by a key that is not a program's scope: an id Accord
//	                           holds (RunByID, WatchByID, DeliveryByID) or a natural key
//	                           (UserByEmail, RunByIdempotencyKey, RunArtifactByPath)
//	ListX(ctx, …)              the rows of a kind (of a program when given its id)
//
// The rest are queries named for what they find (RunsInExecution,
// LatestJudgedRun, ProbesLeftBehind) and writes named for what they do.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is returned when a row does not exist or is not visible to the caller.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a unique constraint refuses a write.
var ErrConflict = errors.New("already exists")

// Store runs queries on the pool shared with River, or, inside InTx, on one
// transaction (so that a handler can insert a row and its River job
// together).
type Store struct {
	Pool *pgxpool.Pool
	db   DBTX
	tx   pgx.Tx
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{Pool: pool, db: pool} }

// WithTx returns a Store whose queries run in tx.
func (s *Store) WithTx(tx pgx.Tx) *Store { return &Store{Pool: s.Pool, db: tx, tx: tx} }

// Tx is the transaction of a Store made by WithTx or InTx (nil otherwise),
// for River's InsertTx.
func (s *Store) Tx() pgx.Tx { return s.tx }

// Open connects a pool with an explicit size and checks the connection.
func Open(ctx context.Context, databaseURL string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("store: parse DATABASE_URL: %w", err)
	}
	cfg.MaxConns = maxConns
	cfg.ConnConfig.RuntimeParams["application_name"] = "accord"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: ping %s: %w", cfg.ConnConfig.Host, err)
	}
	return pool, nil
}

// InTx runs fn with a Store bound to a new transaction, committing when fn
// returns nil and rolling back otherwise. Inside a transaction already, it
// uses a savepoint.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	var begin func(context.Context) (pgx.Tx, error)
	if s.tx != nil {
		begin = s.tx.Begin
	} else {
		begin = s.Pool.Begin
	}
	tx, err := begin(ctx)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit this is a no-op
	if err := fn(s.WithTx(tx)); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// notFound turns pgx.ErrNoRows into ErrNotFound, with context.
func notFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	if isUniqueViolation(err) {
		return fmt.Errorf("store: %s: %w", what, ErrConflict)
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// oneRow checks that a write by id found its row: no row is ErrNotFound.
func oneRow(tag pgconn.CommandTag, err error, what string) error {
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	return nil
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// DBTX is what both a pool and a transaction offer, so that a method can
// run inside the caller's transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// nullID stores a zero id as NULL (system actions have no user).
func nullID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}
