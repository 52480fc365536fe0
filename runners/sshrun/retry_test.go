package sshrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoffWait(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: -1}
	require.Equal(t, 100*time.Millisecond, b.Wait(1))
	require.Equal(t, 200*time.Millisecond, b.Wait(2))
	require.Equal(t, 800*time.Millisecond, b.Wait(4))
	require.Equal(t, time.Second, b.Wait(5))
	require.Equal(t, time.Second, b.Wait(50))

	j := Backoff{Initial: time.Second, Jitter: 0.2}
	for range 100 {
		w := j.Wait(1)
		require.GreaterOrEqual(t, w, 800*time.Millisecond)
		require.LessOrEqual(t, w, 1200*time.Millisecond)
	}
}

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	retryable := []error{
		&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED},
		fmt.Errorf("x: %w", syscall.ECONNRESET),
		fmt.Errorf("handshake: %w", io.EOF),
		ErrHandshakeTimeout, ErrKeepaliveTimeout, ErrDialTimeout,
		fmt.Errorf("follow: %w", ErrConnectionLost),
	}
	for _, err := range retryable {
		require.True(t, IsRetryable(err), "%v", err)
	}
	permanent := []error{
		nil,
		&HostKeyChangedError{Host: "h:22", Pinned: "SHA256:a", Presented: "SHA256:b"},
		fmt.Errorf("dial: %w", ErrAuthFailed),
		ErrHostKeyNotPinned, ErrBadTarget,
		context.Canceled, context.DeadlineExceeded,
		// A host key change is permanent even if something retryable is
		// wrapped beside it.
		errors.Join(io.EOF, &HostKeyChangedError{}),
		errors.New("something unknown"),
	}
	for _, err := range permanent {
		require.False(t, IsRetryable(err), "%v", err)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := Backoff{Initial: time.Millisecond, Attempts: 4, Jitter: -1}

	n := 0
	err := Retry(ctx, b, func(context.Context) error {
		n++
		if n < 3 {
			return ErrHandshakeTimeout
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, n)

	n = 0
	err = Retry(ctx, b, func(context.Context) error { n++; return ErrKeepaliveTimeout })
	require.ErrorIs(t, err, ErrKeepaliveTimeout)
	require.ErrorContains(t, err, "gave up after 4 attempts")
	require.Equal(t, 4, n)

	n = 0
	err = Retry(ctx, b, func(context.Context) error { n++; return &HostKeyChangedError{} })
	require.ErrorIs(t, err, ErrHostKeyChanged)
	require.Equal(t, 1, n, "never retried")

	cctx, cancel := context.WithCancel(ctx)
	n = 0
	err = Retry(cctx, Backoff{Initial: time.Hour}, func(context.Context) error { n++; cancel(); return ErrDialTimeout })
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, n)
}
