// Package storetest gives tests their own PostgreSQL databases.
//
// A template database is migrated once per set of migration files (its name
// carries their digest); every test that commits gets a database of its own
// in the template's state: a clone of it (CREATE DATABASE ... TEMPLATE), or
// one an earlier test of the same process used and that was recycled to that
// state (see recycle). Tests that only need a rolled-back transaction use Tx
// on one shared clone.
//
// The server is found through TEST_DATABASE_URL (any database on it; the
// default is postgres://127.0.0.1:5432/postgres).
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/accordlab/accord/migrations"
	"github.com/accordlab/accord/store"
)

// AdminURL is the server's maintenance connection.
func AdminURL() string {
	if v := os.Getenv("TEST_DATABASE_URL"); v != "" {
		return v
	}
	return "postgres://127.0.0.1:5432/postgres?sslmode=disable"
}

// URLFor returns the connection URL of database name on the test server.
func URLFor(name string) string {
	u, err := url.Parse(AdminURL())
	if err != nil {
		panic(fmt.Sprintf("storetest: TEST_DATABASE_URL: %v", err))
	}
	u.Path = "/" + name
	return u.String()
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// templateDB creates (once per set of migrations, across processes) the
// migrated template and returns its name.
func templateDB(ctx context.Context) (string, error) {
	templateOnce.Do(func() {
		all, err := store.LoadMigrations(migrations.FS)
		if err != nil {
			templateErr = err
			return
		}
		h := sha256.New()
		for _, m := range all {
			h.Write([]byte(m.Name + m.Checksum))
		}
		templateName = "accord_tpl_" + hex.EncodeToString(h.Sum(nil))[:16]
		templateErr = ensureTemplate(ctx, templateName)
		DropStale()
	})
	return templateName, templateErr
}

func ensureTemplate(ctx context.Context, name string) error {
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return fmt.Errorf("storetest: connect to %s (is PostgreSQL running? see README): %w", AdminURL(), err)
	}
	defer admin.Close(ctx)
	// Serialise template creation between test processes.
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(7262002)`); err != nil {
		return err
	}
	defer admin.Exec(context.Background(), `SELECT pg_advisory_unlock(7262002)`) //nolint:errcheck
	var ready bool
	err = admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)`, name).Scan(&ready)
	if err != nil || ready {
		return err
	}
	// A half-made template from a crashed run is dropped and made again.
	if _, err := admin.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("storetest: drop stale template: %w", err)
	}
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("storetest: create template: %w", err)
	}
	pool, err := pgxpool.New(ctx, URLFor(name))
	if err != nil {
		return err
	}
	_, err = store.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		return fmt.Errorf("storetest: migrate template: %w", err)
	}
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` WITH is_template = true ALLOW_CONNECTIONS = false`); err != nil {
		return fmt.Errorf("storetest: mark template: %w", err)
	}
	return nil
}

// NewDatabase gives t a migrated database in the template's state and
// returns its URL. When the test ends the database is recycled for a later
// test of this process, or dropped.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name, err := takeDatabase(ctx)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() { recycle(name) })
	return URLFor(name)
}

// NewPool creates a fresh migrated database for t and a pool on it, closed
// (and the database dropped) when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dbURL := NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	cfg.MaxConns = 5
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(pool.Close) // runs before the drop registered earlier
	return pool
}

// NewEmptyDatabase creates an empty database (no migrations) for t and
// returns its URL; it is dropped when the test ends.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := adminPool(ctx)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	name := newName()
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("storetest: create database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(name) })
	return URLFor(name)
}

func cloneTemplate(ctx context.Context, tpl, name string) error {
	admin, err := adminPool(ctx)
	if err != nil {
		return err
	}
	// FILE_COPY copies the template's files (after a checkpoint) where
	// PostgreSQL 15's default, WAL_LOG, writes every block through the WAL:
	// measured here, 0.2 against 0.66 CPU-seconds a clone, and a test run
	// makes hundreds. PostgreSQL before 15 has no STRATEGY and copies files.
	sql := `CREATE DATABASE ` + pgx.Identifier{name}.Sanitize() + ` TEMPLATE ` + pgx.Identifier{tpl}.Sanitize() + ` STRATEGY FILE_COPY`
	for attempt := 0; ; attempt++ {
		_, err = admin.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if err != nil && errors.As(err, &pgErr) && pgErr.Code == "42601" && strings.HasSuffix(sql, " STRATEGY FILE_COPY") {
			sql = strings.TrimSuffix(sql, " STRATEGY FILE_COPY") // before PostgreSQL 15
			continue
		}
		// Concurrent clones of one template can collide briefly; retry.
		if err != nil && errors.As(err, &pgErr) && pgErr.Code == "55006" && attempt < 50 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("clone template: %w", err)
		}
		return nil
	}
}

func dropDatabase(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := adminPool(ctx)
	if err != nil {
		return
	}
	_, _ = admin.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
}

var (
	adminOnce sync.Once
	admin     *pgxpool.Pool
	adminErr  error
)

// adminPool is the process's connections to the maintenance database,
// which clone, rename and drop the tests' databases. A connection each
// time cost a server process start, about 25 ms of CPU, twice a test.
func adminPool(ctx context.Context) (*pgxpool.Pool, error) {
	adminOnce.Do(func() {
		cfg, err := pgxpool.ParseConfig(AdminURL())
		if err != nil {
			adminErr = fmt.Errorf("TEST_DATABASE_URL: %w", err)
			return
		}
		// Few, and closed when idle: test processes run side by side
		// under the server's max_connections.
		cfg.MaxConns = 2
		cfg.MaxConnIdleTime = 5 * time.Second
		cfg.HealthCheckPeriod = 5 * time.Second
		admin, adminErr = pgxpool.NewWithConfig(context.Background(), cfg)
		if adminErr == nil {
			if err := admin.Ping(ctx); err != nil {
				adminErr = fmt.Errorf("connect to %s (is PostgreSQL running? see README): %w", AdminURL(), err)
			}
		}
	})
	return admin, adminErr
}

var (
	sharedOnce sync.Once
	sharedPool *pgxpool.Pool
	sharedErr  error
)

// Tx returns a transaction on a shared migrated database, rolled back when
// the test ends: for store tests that need no commit.
func Tx(t testing.TB) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	sharedOnce.Do(func() {
		tpl, err := templateDB(ctx)
		if err != nil {
			sharedErr = err
			return
		}
		name := "accord_shared_" + nameSuffix()
		if sharedErr = cloneTemplate(ctx, tpl, name); sharedErr != nil {
			return
		}
		sharedPool, sharedErr = pgxpool.New(ctx, URLFor(name))
		// The shared database lives as long as the test process; stale
		// ones are removed by DropStale.
	})
	if sharedErr != nil {
		t.Fatalf("storetest: %v", sharedErr)
	}
	tx, err := sharedPool.Begin(ctx)
	if err != nil {
		t.Fatalf("storetest: begin: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// DropStale removes databases that earlier test processes left behind and
// nobody is connected to: those of a process that has ended (when the
// server runs on this machine, where its process ids mean something), and
// any more than two hours old.
func DropStale() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := adminPool(ctx)
	if err != nil {
		return
	}
	rows, err := admin.Query(ctx, `SELECT datname FROM pg_database
		WHERE (datname LIKE 'accord\_shared\_%' OR datname LIKE 'accord\_test\_%')
		  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = pg_database.datname)`)
	if err != nil {
		return
	}
	names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	cutoff := time.Now().Add(-2 * time.Hour).Unix()
	local := serverIsLocal()
	for _, n := range names {
		created, pid, ok := parseName(n)
		if !ok || (created > cutoff && !(local && processGone(pid))) {
			continue
		}
		_, _ = admin.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{n}.Sanitize())
	}
}

// newName names a test's database: accord_test_ and nameSuffix.
func newName() string { return "accord_test_" + nameSuffix() }

// nameSuffix is the creation time, the process id and a random part, so
// that DropStale can tell a database a dead process left behind from one a
// running test uses or keeps for its next test.
func nameSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%d_%d_%s", time.Now().Unix(), os.Getpid(), hex.EncodeToString(b))
}

// parseName reads what nameSuffix put in a database's name.
func parseName(name string) (created int64, pid int, ok bool) {
	parts := strings.Split(name, "_")
	if len(parts) < 4 {
		return 0, 0, false
	}
	created, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if len(parts) >= 5 { // names from before the process id have none
		pid, _ = strconv.Atoi(parts[3])
	}
	return created, pid, true
}

// processGone says that no process pid runs on this machine.
func processGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// serverIsLocal says that the test server is on this machine.
func serverIsLocal() bool {
	cfg, err := pgconn.ParseConfig(AdminURL())
	if err != nil {
		return false
	}
	switch {
	case strings.HasPrefix(cfg.Host, "/"): // a Unix socket
		return true
	case cfg.Host == "localhost":
		return true
	}
	ip := net.ParseIP(cfg.Host)
	return ip != nil && ip.IsLoopback()
}
