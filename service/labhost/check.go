package labhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/store"
)

// Checker connects to a target and takes its facts (runners.Config).
type Checker interface {
	Check(ctx context.Context, target sshrun.Target) (runners.CheckResult, error)
}

// CheckEnv is what a host check needs besides the store.
type CheckEnv struct {
	Sealer *runners.Sealer
	Runner Checker
	// Log receives what the host's page does not say (a failed
	// connection's own error).
	Log *slog.Logger
}

// Check connects to a host ("Check host" on its page) and records the
// outcome on its row: the facts it took and the round-trip time, or why
// the host could not be checked. Only a store error is returned.
func Check(ctx context.Context, st *store.Store, env CheckEnv, programID, hostID int64) error {
	host, err := st.GetHost(ctx, programID, hostID)
	if err != nil {
		return fmt.Errorf("check host %d: %w", hostID, err)
	}
	res, err := reach(ctx, host, env)
	if err != nil {
		// Recorded even when the caller's context ended with the check.
		return st.RecordHostCheck(context.WithoutCancel(ctx), host.ID, false, checkFailure(host, err, env.Log), nil)
	}
	return recordFacts(ctx, st, host.ID, res)
}

// reach connects to the host as its row describes it.
func reach(ctx context.Context, host store.Host, env CheckEnv) (runners.CheckResult, error) {
	target, err := Target(host, env.Sealer)
	if err != nil {
		return runners.CheckResult{}, err
	}
	return env.Runner.Check(ctx, target)
}

// checkFailure is what the host's page says of a failed check.
func checkFailure(host store.Host, err error, log *slog.Logger) string {
	var perm *runners.PermanentError
	switch {
	case sshrun.IsConnectFailure(err):
		// The socket's own error (refused, timed out, not SSH) would tell
		// what listens where: the page says only this, the log the rest.
		if log != nil {
			log.Info("host check could not connect", "host_id", host.ID, "err", err)
		}
		return "could not connect"
	case errors.As(err, &perm):
		return err.Error()
	default:
		return "could not reach the host: " + err.Error()
	}
}

// recordFacts keeps the facts a check took and notes the check, together.
func recordFacts(ctx context.Context, st *store.Store, hostID int64, res runners.CheckResult) error {
	sum := sha256.Sum256(res.Facts)
	rttMs := float64(res.RTT.Microseconds()) / 1000
	return st.InTx(ctx, func(tx *store.Store) error {
		if _, err := tx.AddHostFacts(ctx, hostID, nil, res.Facts, "sha256:"+hex.EncodeToString(sum[:])); err != nil {
			return err
		}
		return tx.RecordHostCheck(ctx, hostID, true, fmt.Sprintf("connected; probe %s ready; facts taken", res.Probe.Arch), &rttMs)
	})
}
