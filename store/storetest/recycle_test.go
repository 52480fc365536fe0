package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// A recycled database is in the template's state: the rows a test wrote
// are gone, even in the append-only tables, and ids start again.
func TestRecycledDatabaseIsAsTheTemplate(t *testing.T) {
	ctx := context.Background()
	first := databaseName(useDatabase(t, func(url string) {
		conn := connect(t, url)
		var org int64
		require.NoError(t, conn.QueryRow(ctx, `INSERT INTO organizations (name, kind) VALUES ('Vendor', 'vendor') RETURNING id`).Scan(&org))
		require.EqualValues(t, 1, org)
		_, err := conn.Exec(ctx, `INSERT INTO audit_log (actor_label, action) VALUES ('test', 'test')`)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `SELECT nextval('host_lease_token')`)
		require.NoError(t, err)
	}))
	second := NewDatabase(t)
	require.NotEqual(t, first, databaseName(second), "a recycled database has a new name")
	conn := connect(t, second)
	var orgs, audit int
	require.NoError(t, conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM organizations), (SELECT count(*) FROM audit_log)`).Scan(&orgs, &audit))
	require.Zero(t, orgs+audit)
	var org, token int64
	require.NoError(t, conn.QueryRow(ctx, `INSERT INTO organizations (name, kind) VALUES ('Vendor', 'vendor') RETURNING id`).Scan(&org))
	require.NoError(t, conn.QueryRow(ctx, `SELECT nextval('host_lease_token')`).Scan(&token))
	require.EqualValues(t, []int64{1, 1}, []int64{org, token}, "ids start again")
}

// A database whose schema a test changed is dropped, not kept.
func TestDatabaseWithAChangedSchemaIsDropped(t *testing.T) {
	ctx := context.Background()
	for name, ddl := range map[string]string{
		"a trigger disabled": `ALTER TABLE decisions DISABLE TRIGGER decisions_append_only`,
		"a table added":      `CREATE TABLE kept AS SELECT 1 AS x`,
		"a function changed": `CREATE OR REPLACE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`,
	} {
		t.Run(name, func(t *testing.T) {
			before := spares()
			useDatabase(t, func(url string) {
				_, err := connect(t, url).Exec(ctx, ddl)
				require.NoError(t, err)
			})
			after := spares()
			require.Subset(t, before, after, "no database was added to the spares")
			for _, n := range after {
				require.Equal(t, spare.reference, fingerprintOf(t, n), "every spare has the template's schema")
			}
		})
	}
}

func spares() []string {
	spare.Lock()
	defer spare.Unlock()
	return append([]string(nil), spare.names...)
}

// What a test left running cannot reach its database once the test ended:
// its sessions are closed and its name is gone.
func TestLateSessionCannotReachARecycledDatabase(t *testing.T) {
	ctx := context.Background()
	var late *pgx.Conn
	url := useDatabase(t, func(url string) { late = connectUnclosed(t, url) })
	defer late.Close(ctx)
	_, err := late.Exec(ctx, `SELECT 1`)
	require.Error(t, err, "the session was closed")
	_, err = pgx.Connect(ctx, url)
	require.Error(t, err)
	require.Contains(t, err.Error(), "does not exist")
}

// useDatabase runs use on a database of a subtest of its own, and
// returns the database's URL once the subtest ended (the database
// recycled).
func useDatabase(t *testing.T, use func(url string)) string {
	var url string
	t.Run("use", func(t *testing.T) {
		url = NewDatabase(t)
		use(url)
	})
	return url
}

func connect(t *testing.T, url string) *pgx.Conn {
	conn := connectUnclosed(t, url)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func connectUnclosed(t *testing.T, url string) *pgx.Conn {
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	return conn
}

func databaseName(url string) string {
	return url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
}

func fingerprintOf(t *testing.T, name string) string {
	conn := connect(t, URLFor(name))
	fp, err := fingerprint(context.Background(), conn)
	require.NoError(t, err)
	return fp
}
