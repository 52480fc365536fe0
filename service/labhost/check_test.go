package labhost_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/service/servicetest"
	"github.com/accordlab/accord/store"
)

// fakeChecker answers a check with a result or an error, and counts the
// checks it was asked for.
type fakeChecker struct {
	res   runners.CheckResult
	err   error
	calls int
}

func (f *fakeChecker) Check(context.Context, sshrun.Target) (runners.CheckResult, error) {
	f.calls++
	return f.res, f.err
}

// checkBundle is a program with a lab host reached through an agent.
type checkBundle struct {
	st      *store.Store
	program servicetest.Program
	host    int64
}

func setupCheck(t *testing.T, pinned bool) *checkBundle {
	t.Helper()
	ctx := context.Background()
	st := servicetest.Store(t)
	b := &checkBundle{st: st, program: servicetest.NewProgram(t, st)}
	var err error
	b.host, err = st.CreateHost(ctx, b.program.ID, store.NewHost{Name: "gpu-07", Address: "127.0.0.1", Port: 9, Username: "lab",
		AuthMethod: "agent", AgentSocket: "/run/accord/agent.sock"})
	require.NoError(t, err)
	if pinned {
		line, _ := hostKey(t)
		require.NoError(t, st.PinHostKeys(ctx, b.program.ID, b.host, line, "SHA256:test", nil))
	}
	return b
}

func (b *checkBundle) check(t *testing.T, runner labhost.Checker) store.Host {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, labhost.Check(ctx, b.st, labhost.CheckEnv{Runner: runner}, b.program.ID, b.host))
	h, err := b.st.GetHost(ctx, b.program.ID, b.host)
	require.NoError(t, err)
	return h
}

// A check that reaches the host keeps the facts it took and notes the
// round-trip time on the host's row.
func TestCheckKeepsTheFactsItTook(t *testing.T) {
	t.Parallel()
	b := setupCheck(t, true)
	runner := &fakeChecker{res: runners.CheckResult{Facts: []byte(`{"hostname":"gpu-07"}`), RTT: 1500 * time.Microsecond,
		Probe: sshrun.Probe{Arch: "amd64"}}}
	h := b.check(t, runner)
	require.True(t, *h.LastCheckOK)
	require.Equal(t, "connected; probe amd64 ready; facts taken", h.LastCheckMessage)
	require.InDelta(t, 1.5, *h.LastRTTMs, 1e-9)
	history, err := b.st.HostFactsHistory(context.Background(), b.host, 5)
	require.NoError(t, err)
	require.Len(t, history, 1)
	require.JSONEq(t, `{"hostname":"gpu-07"}`, string(history[0].Facts))
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, history[0].Digest)
}

// A check that fails is noted on the row, saying no more than it should:
// a host never pinned is not dialled; a failed connection says only that
// (its socket error would tell what listens where).
func TestCheckNotesWhyItFailed(t *testing.T) {
	t.Parallel()
	unpinned := setupCheck(t, false)
	runner := &fakeChecker{}
	h := unpinned.check(t, runner)
	require.False(t, *h.LastCheckOK)
	require.Contains(t, h.LastCheckMessage, "the host key of gpu-07 is not confirmed yet")
	require.Zero(t, runner.calls, "an unpinned host is not dialled")

	b := setupCheck(t, true)
	for err, says := range map[error]string{
		&sshrun.ConnectError{Addr: "127.0.0.1:9", Err: errors.New("connection refused")}: "could not connect",
		errors.New("probe upload: disk full"):                                            "could not reach the host: probe upload: disk full",
		&runners.PermanentError{Err: errors.New("the probe does not run here")}:          "the probe does not run here",
	} {
		h := b.check(t, &fakeChecker{err: err})
		require.False(t, *h.LastCheckOK)
		require.Equal(t, says, h.LastCheckMessage)
	}
	history, err := b.st.HostFactsHistory(context.Background(), b.host, 5)
	require.NoError(t, err)
	require.Empty(t, history, "a failed check takes no facts")
}
