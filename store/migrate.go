package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/accordlab/accord/migrations"
)

// Migration is one numbered SQL file.
type Migration struct {
	Version  int
	Name     string // file name
	SQL      string
	Checksum string // hex SHA-256 of the file
}

// AppliedMigration is a row of schema_migrations.
type AppliedMigration struct {
	Version   int
	Name      string
	Checksum  string
	AppliedAt time.Time
}

// MigrationStatus says what is applied and what is pending, for Accord's
// own files and for River's.
type MigrationStatus struct {
	Applied      []AppliedMigration
	Pending      []Migration
	RiverPending []int
}

// Current reports whether nothing is pending.
func (s MigrationStatus) Current() bool { return len(s.Pending) == 0 && len(s.RiverPending) == 0 }

var migrationName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// migrationLock serialises migrating processes (a transaction-level
// advisory lock, released with each step's transaction).
const migrationLock = 7_262_001

// LoadMigrations reads the numbered files from fsys in order.
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("store: read migrations: %w", err)
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "migrations.go" {
			continue
		}
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			if len(e.Name()) > 4 && e.Name()[len(e.Name())-4:] == ".sql" {
				return nil, fmt.Errorf("store: migration file %q is not named NNNN_name.sql", e.Name())
			}
			continue
		}
		version, _ := strconv.Atoi(m[1])
		if prev, dup := seen[version]; dup {
			return nil, fmt.Errorf("store: migrations %q and %q share version %d", prev, e.Name(), version)
		}
		seen[version] = e.Name()
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("store: read %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(body)
		out = append(out, Migration{Version: version, Name: e.Name(), SQL: string(body), Checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// Migrate applies River's migrations and then every pending file of ours,
// each in its own transaction. It returns the files it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]Migration, error) {
	return migrateFS(ctx, pool, migrations.FS)
}

func migrateFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) ([]Migration, error) {
	all, err := LoadMigrations(fsys)
	if err != nil {
		return nil, err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, fmt.Errorf("store: river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("store: river migrations: %w", err)
	}
	if _, err := pool.Exec(ctx, createMigrationsTable); err != nil {
		return nil, fmt.Errorf("store: create schema_migrations: %w", err)
	}
	applied, err := appliedMigrations(ctx, pool)
	if err != nil {
		return nil, err
	}
	if err := checkChecksums(all, applied); err != nil {
		return nil, err
	}
	var done []Migration
	for _, m := range all {
		if _, ok := applied[m.Version]; ok {
			continue
		}
		ran, err := applyOne(ctx, pool, m)
		if err != nil {
			return done, err
		}
		if ran {
			done = append(done, m)
		}
	}
	return done, nil
}

// applyOne runs one file and records it in the same transaction. Another
// process may have applied it meanwhile: then it does nothing.
func applyOne(ctx context.Context, pool *pgxpool.Pool, m Migration) (bool, error) {
	ran := false
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.Version).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return nil
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)`, m.Version, m.Name, m.Checksum); err != nil {
			return err
		}
		ran = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: apply migration %s: %w", m.Name, err)
	}
	return ran, nil
}

func appliedMigrations(ctx context.Context, db DBTX) (map[int]AppliedMigration, error) {
	rows, err := db.Query(ctx, `SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("store: read schema_migrations: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AppliedMigration, error) {
		var a AppliedMigration
		err := r.Scan(&a.Version, &a.Name, &a.Checksum, &a.AppliedAt)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: read schema_migrations: %w", err)
	}
	out := make(map[int]AppliedMigration, len(list))
	for _, a := range list {
		out[a.Version] = a
	}
	return out, nil
}

// checkChecksums refuses to go on when an applied file was changed since.
func checkChecksums(all []Migration, applied map[int]AppliedMigration) error {
	for _, m := range all {
		a, ok := applied[m.Version]
		if ok && a.Checksum != m.Checksum {
			return fmt.Errorf("store: migration %s was changed after it was applied (recorded checksum %.12s…, file %.12s…): add a new migration instead", m.Name, a.Checksum, m.Checksum)
		}
	}
	return nil
}

// Status reports applied and pending migrations, and fails on a changed
// checksum.
func Status(ctx context.Context, pool *pgxpool.Pool) (MigrationStatus, error) {
	return statusFS(ctx, pool, migrations.FS)
}

func statusFS(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) (MigrationStatus, error) {
	var st MigrationStatus
	all, err := LoadMigrations(fsys)
	if err != nil {
		return st, err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return st, fmt.Errorf("store: river migrator: %w", err)
	}
	res, err := migrator.Validate(ctx, nil)
	if err != nil {
		return st, fmt.Errorf("store: river migration status: %w", err)
	}
	if !res.OK {
		// Validate names the missing versions in its messages; count them.
		for _, v := range migrator.AllVersions() {
			st.RiverPending = append(st.RiverPending, v.Version)
		}
		existing, err := migrator.ExistingVersions(ctx)
		if err == nil {
			have := map[int]bool{}
			for _, e := range existing {
				have[e.Version] = true
			}
			pending := st.RiverPending[:0]
			for _, v := range st.RiverPending {
				if !have[v] {
					pending = append(pending, v)
				}
			}
			st.RiverPending = pending
		}
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return st, fmt.Errorf("store: migration status: %w", err)
	}
	applied := map[int]AppliedMigration{}
	if exists {
		if applied, err = appliedMigrations(ctx, pool); err != nil {
			return st, err
		}
	}
	if err := checkChecksums(all, applied); err != nil {
		return st, err
	}
	for _, m := range all {
		if a, ok := applied[m.Version]; ok {
			st.Applied = append(st.Applied, a)
		} else {
			st.Pending = append(st.Pending, m)
		}
	}
	return st, nil
}
