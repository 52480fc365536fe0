package sshrun_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/accordlab/accord/runners/sshrun"
)

// deafServer is an SSH server on loopback that never answers a global
// request (so never a keepalive) and whose every session writes a line
// every interval until told to stop: a host too busy to answer
// keepalives while it still sends bytes.
type deafServer struct {
	target  sshrun.Target
	writing atomic.Bool
}

func startDeafServer(t *testing.T, interval time.Duration) *deafServer {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	require.NoError(t, err)
	_, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(clientPriv)
	require.NoError(t, err)
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil }}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	s := &deafServer{target: sshrun.Target{Addr: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, User: "deaf",
		Auth:    sshrun.Auth{PrivateKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})},
		HostKey: hostSigner.PublicKey()}}
	s.writing.Store(true)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = nc.Close() })
			go s.serve(nc, cfg, interval)
		}
	}()
	return s
}

func (s *deafServer) serve(nc net.Conn, cfg *ssh.ServerConfig, interval time.Duration) {
	_, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		return
	}
	go func() {
		for range reqs { // read, never answered
		}
	}()
	for nch := range chans {
		ch, chReqs, err := nch.Accept()
		if err != nil {
			return
		}
		go func() {
			for r := range chReqs {
				_ = r.Reply(r.Type == "exec", nil)
			}
		}()
		go func() {
			for range time.Tick(interval) {
				if s.writing.Load() {
					if _, err := ch.Write([]byte("still working\n")); err != nil {
						return
					}
				}
			}
		}()
	}
}

// Bytes from the host show it alive as a keepalive's reply does: a host
// that answers no keepalive but keeps sending output stays connected, and
// once it sends nothing either the connection is closed within the bound.
func TestKeepaliveCountsAnyBytesFromTheHost(t *testing.T) {
	t.Parallel()
	s := startDeafServer(t, 100*time.Millisecond)
	opts := testOpts
	opts.KeepaliveInterval, opts.KeepaliveCountMax = 300*time.Millisecond, 3
	c := dial(t, s.target, opts)
	go func() { _, _ = c.Stream(context.Background(), []string{"work"}, nil, nil, nil) }()

	time.Sleep(4 * opts.KeepaliveBound())
	select {
	case <-c.Done():
		t.Fatalf("a host sending output was dropped: %v", c.Err())
	default:
	}

	s.writing.Store(false)
	silenced := time.Now()
	select {
	case <-c.Done():
	case <-time.After(10 * opts.KeepaliveBound()):
		t.Fatal("a host sending nothing and answering no keepalive was not dropped")
	}
	require.ErrorIs(t, c.Err(), sshrun.ErrKeepaliveTimeout)
	require.GreaterOrEqual(t, time.Since(silenced), opts.KeepaliveInterval*time.Duration(opts.KeepaliveCountMax-1))
}
