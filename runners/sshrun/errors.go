package sshrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"golang.org/x/crypto/ssh"
)

// Errors a caller acts on. Permanent ones must fail the run at once;
// retryable ones may be retried before the probe is launched (Retry does
// that) and mean "reconnect and resume" once it runs.
var (
	// ErrHostKeyChanged: the host presented a key other than the pinned one.
	// Never retried: it is either a reinstalled host, which an engineer must
	// confirm, or someone in the middle. The error is a *HostKeyChangedError.
	ErrHostKeyChanged = errors.New("sshrun: host key changed")
	// ErrHostKeyNotPinned: the target has no pinned host key.
	ErrHostKeyNotPinned = errors.New("sshrun: no pinned host key (scan the host and confirm its key first)")
	// ErrAuthFailed: the host refused our key.
	ErrAuthFailed = errors.New("sshrun: authentication failed")
	// ErrBadTarget: the target or options are unusable (bad key, no auth...).
	ErrBadTarget = errors.New("sshrun: invalid target")

	// ErrHandshakeTimeout: the TCP connection was made but the SSH handshake
	// did not finish within Options.HandshakeTimeout.
	ErrHandshakeTimeout = errors.New("sshrun: handshake timed out")
	// ErrKeepaliveTimeout: the host stopped answering keepalives and the
	// connection was closed.
	ErrKeepaliveTimeout = errors.New("sshrun: keepalive timed out")
	// ErrConnectionLost: the connection ended under a running command.
	ErrConnectionLost = errors.New("sshrun: connection lost")
)

// HostKeyChangedError names the pinned and the presented key.
type HostKeyChangedError struct {
	Host      string // host:port as dialled
	Pinned    string // SHA256 fingerprint of the pinned key
	Presented string // SHA256 fingerprint of the key the host presented ("" if it could not be learnt)
	// PresentedKey is the host's key, for an engineer to confirm and pin.
	PresentedKey ssh.PublicKey
}

func (e *HostKeyChangedError) Error() string {
	presented := e.Presented
	if presented == "" {
		presented = "a key of another type"
	}
	return fmt.Sprintf("sshrun: host key changed for %s: pinned %s, host presented %s (not retried; confirm the new key before pinning it)",
		e.Host, e.Pinned, presented)
}

// Is makes errors.Is(err, ErrHostKeyChanged) true.
func (e *HostKeyChangedError) Is(target error) bool { return target == ErrHostKeyChanged }

// IsRetryable reports whether err is a transient failure worth another
// attempt: refused, reset or timed-out connections, handshake and keepalive
// timeouts, a connection that dropped. Host key changes, authentication
// failures, invalid targets, a cancelled context and anything unknown are
// not.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	switch {
	case errors.Is(err, ErrHostKeyChanged), errors.Is(err, ErrHostKeyNotPinned),
		errors.Is(err, ErrAuthFailed), errors.Is(err, ErrBadTarget),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, ErrHandshakeTimeout), errors.Is(err, ErrKeepaliveTimeout), errors.Is(err, ErrDialTimeout),
		errors.Is(err, ErrConnectionLost):
		return true
	}
	for _, errno := range []syscall.Errno{
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.ETIMEDOUT,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EHOSTDOWN, syscall.ENETDOWN, syscall.EPIPE,
	} {
		if errors.Is(err, errno) {
			return true
		}
	}
	// A peer that closes during the handshake (sshd restarting, MaxStartups).
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oce *ssh.OpenChannelError
	if errors.As(err, &oce) && oce.Reason == ssh.ConnectionFailed {
		return true // a jump host could not reach the next hop
	}
	return false
}
