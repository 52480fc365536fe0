package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/store/storetest"
)

// A rescue delay shorter than River accepts stops `accord serve` before it
// touches the database, with one line naming the variable and its minimum
// (River would otherwise refuse it in its own words, after migrating).
func TestServeRefusesAShortRescueDelay(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewEmptyDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sshtest.BuildAccord(t), "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "ACCORD_DATA_DIR="+t.TempDir(), "ACCORD_LISTEN=127.0.0.1:0",
		"ACCORD_MIGRATE_ON_START=true", "ACCORD_RESCUE_AFTER=30s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "serve exits with an error: %v", err)
	require.Equal(t, 2, exit.ExitCode(), "a configuration error")
	msg := strings.TrimSpace(stderr.String())
	require.Equal(t, 1, strings.Count(msg, "\n")+1, "one line: %s", msg)
	require.Contains(t, msg, `ACCORD_RESCUE_AFTER="30s"`)
	require.Contains(t, msg, "at least 1m:")
	require.NotContains(t, msg, "RescueStuckJobsAfter", "our words, not River's")

	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var tables int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`).Scan(&tables))
	require.Zero(t, tables, "nothing was migrated")
}
