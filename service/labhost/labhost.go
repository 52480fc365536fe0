// Package labhost reaches a lab host as its row describes it: the SSH
// target with its unsealed key, pinned host keys and jump chain, the
// label that binds a sealed key to its row, and the host check that
// connects and takes its facts.
package labhost

import (
	"fmt"

	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/store"
)

// Target turns a host row into an SSH target: its key unsealed, its
// pinned host keys parsed, its jump chain with the same credentials.
// A host whose key was never confirmed is refused: unknown keys are never
// accepted.
func Target(h store.Host, sealer *runners.Sealer) (sshrun.Target, error) {
	if !h.Pinned() {
		return sshrun.Target{}, &runners.PermanentError{Err: fmt.Errorf("the host key of %s is not confirmed yet: scan it and confirm the fingerprint on the host's page", h.Name)}
	}
	auth := sshrun.Auth{AgentSock: h.AgentSocket}
	if h.AuthMethod == "key" {
		key, err := sealer.Open(h.SealedPrivateKey, SealLabel(h.ID))
		if err != nil {
			return sshrun.Target{}, &runners.PermanentError{Err: fmt.Errorf("host %s: %w", h.Name, err)}
		}
		auth = sshrun.Auth{PrivateKey: key}
	}
	hostKey, err := sshrun.ParseHostKey(h.HostKey)
	if err != nil {
		return sshrun.Target{}, &runners.PermanentError{Err: fmt.Errorf("host %s: pinned key: %w", h.Name, err)}
	}
	t := sshrun.Target{Addr: h.Address, Port: h.Port, User: h.Username, Auth: auth, HostKey: hostKey}
	for i, j := range h.JumpChain {
		k, err := sshrun.ParseHostKey(j.HostKey)
		if err != nil {
			return sshrun.Target{}, &runners.PermanentError{Err: fmt.Errorf("host %s: jump host %d: pinned key: %w", h.Name, i+1, err)}
		}
		t.Jumps = append(t.Jumps, sshrun.Target{Addr: j.Address, Port: j.Port, User: j.Username, Auth: auth, HostKey: k})
	}
	return t, nil
}

// SealLabel binds a sealed private key to its host row.
func SealLabel(hostID int64) string { return fmt.Sprintf("host:%d", hostID) }
