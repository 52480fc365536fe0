package sshtest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, msg string, wait time.Duration) (string, error) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(wait)))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestProxy(t *testing.T) {
	t.Parallel()
	p := StartProxy(t, echoServer(t))

	c, err := net.Dial("tcp", p.HostPort())
	require.NoError(t, err)
	defer c.Close()
	got, err := roundTrip(t, c, "hello", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "hello\n", got)
	// The counters are added after each write, so the echo can reach the
	// client before its own bytes are counted: wait for both.
	require.Eventually(t, func() bool { return p.BytesUp() == 6 && p.BytesDown() == 6 }, time.Second, 10*time.Millisecond,
		"up %d, down %d", p.BytesUp(), p.BytesDown())

	// Silence: nothing comes back, the socket stays open; Resume delivers
	// what was held.
	p.Silence()
	_, err = roundTrip(t, c, "held", 300*time.Millisecond)
	require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "%v", err)
	p.Resume()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	got, err = bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "held\n", got)

	// Reset: the client sees a connection reset, and new connections work.
	p.Reset()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = c.Read(make([]byte, 1))
	require.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	c2, err := net.Dial("tcp", p.HostPort())
	require.NoError(t, err)
	defer c2.Close()
	got, err = roundTrip(t, c2, "again", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "again\n", got)

	// Blackhole: accepted, never answered.
	p.Blackhole()
	c3, err := net.Dial("tcp", p.HostPort())
	require.NoError(t, err)
	defer c3.Close()
	_, err = roundTrip(t, c3, "void", 300*time.Millisecond)
	require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "%v", err)
	require.EqualValues(t, 3, p.Accepted())
}

func TestSSHDRestartChangesHostKey(t *testing.T) {
	t.Parallel()
	s := StartSSHD(t, Options{})
	before, port := s.HostKey, s.Port
	require.Equal(t, "ssh-ed25519", before.Type())
	s.Restart(KeyECDSA)
	require.Equal(t, port, s.Port)
	require.Equal(t, "ecdsa-sha2-nistp256", s.HostKey.Type())
	require.Contains(t, s.Log(), "Server listening on 127.0.0.1")
}
