package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/internal/demo"
	"github.com/accordlab/accord/internal/freeport"
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

// The web port is taken before the demo lab starts: when ACCORD_LISTEN is
// in use, `accord serve` in dev mode stops with the port named, and no
// demo lab (sshd, emulators) was started for a server that never served,
// and no "Accord demo is up" was printed for an address that is not ours.
func TestServeWithItsPortTakenStartsNoDemoLab(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	dataDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sshtest.BuildAccord(t), "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+storetest.NewDatabase(t), "ACCORD_DATA_DIR="+dataDir, "ACCORD_DEV=true",
		"ACCORD_LISTEN="+taken.Addr().String(), "ACCORD_DEMO_SSH_PORT="+strconv.Itoa(freeport.Port(t)),
		fmt.Sprintf("ACCORD_DEMO_EMULATOR_PORTS=%d,%d", freeport.Port(t), freeport.Port(t)), "ACCORD_REMOTE_DIR="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Cleanup(func() { _ = demo.StopRecorded(dataDir) }) // what a failed test left running
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "serve exits with an error: %v\n%s", err, out.String())
	require.Contains(t, out.String(), "ACCORD_LISTEN="+taken.Addr().String())
	require.Contains(t, out.String(), "address already in use")
	require.NotContains(t, out.String(), "Accord demo is up")
	lab, err := demo.ReadLabState(filepath.Join(dataDir, "demo"))
	require.True(t, err != nil || len(lab) == 0, "no demo lab was started: %v", lab)
}
