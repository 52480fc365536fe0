package store_test

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/migrations"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
)

func emptyPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), storetest.NewEmptyDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func TestMigrateAppliesAllOnEmptyDatabaseAndTwiceIsNoOp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)

	before, err := store.Status(ctx, pool)
	require.NoError(t, err)
	require.False(t, before.Current())
	all, err := store.LoadMigrations(migrations.FS)
	require.NoError(t, err)
	require.Len(t, before.Pending, len(all))
	require.NotEmpty(t, before.RiverPending)

	applied, err := store.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Len(t, applied, len(all))

	after, err := store.Status(ctx, pool)
	require.NoError(t, err)
	require.True(t, after.Current(), "pending after migrate: %+v", after)
	require.Len(t, after.Applied, len(all))

	again, err := store.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, again, "a second migrate must apply nothing")

	// River's tables exist too.
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&n))
}

func TestMigrateRefusesChangedChecksum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	original := fstest.MapFS{
		"0001_one.sql": {Data: []byte(`CREATE TABLE one (id int);`)},
	}
	_, err := store.MigrateFS(ctx, pool, original)
	require.NoError(t, err)

	tampered := fstest.MapFS{
		"0001_one.sql": {Data: []byte(`CREATE TABLE one (id bigint);`)},
		"0002_two.sql": {Data: []byte(`CREATE TABLE two (id int);`)},
	}
	_, err = store.MigrateFS(ctx, pool, tampered)
	require.ErrorContains(t, err, "0001_one.sql was changed after it was applied")
	_, err = store.StatusFS(ctx, pool, tampered)
	require.ErrorContains(t, err, "0001_one.sql was changed after it was applied")

	var exists bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('two') IS NOT NULL`).Scan(&exists))
	require.False(t, exists, "nothing after a tampered migration may be applied")
}

func TestMigrateRollsBackAFailingFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	files := fstest.MapFS{
		"0001_ok.sql":     {Data: []byte(`CREATE TABLE ok (id int);`)},
		"0002_broken.sql": {Data: []byte(`CREATE TABLE half (id int); SELECT no_such_function();`)},
	}
	applied, err := store.MigrateFS(ctx, pool, files)
	require.ErrorContains(t, err, "0002_broken.sql")
	require.Len(t, applied, 1)
	var exists bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('half') IS NOT NULL`).Scan(&exists))
	require.False(t, exists, "a failing migration leaves nothing behind")
	st, err := store.StatusFS(ctx, pool, files)
	require.NoError(t, err)
	require.Len(t, st.Pending, 1)
}

func TestLoadMigrationsRejectsBadNames(t *testing.T) {
	t.Parallel()
	_, err := store.LoadMigrations(fstest.MapFS{"1_bad.sql": {Data: []byte(`SELECT 1`)}})
	require.ErrorContains(t, err, "NNNN_name.sql")
	_, err = store.LoadMigrations(fstest.MapFS{
		"0001_a.sql": {Data: []byte(`SELECT 1`)},
		"0001_b.sql": {Data: []byte(`SELECT 1`)},
	})
	require.ErrorContains(t, err, "share version 1")
}
