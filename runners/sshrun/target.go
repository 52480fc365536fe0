// Package sshrun is the server's SSH side of a run: it dials a lab host
// (handshake deadline, pinned host key, jump hosts, keepalive), uploads the
// probe binary into a cache keyed by its SHA-256, writes the plan, launches
// the probe detached, follows its event stream by byte offset, stops it, and
// collects the run folder with its manifest checked.
//
// Remote commands are argument vectors quoted by Quote and built only from
// constants, validated hex digests, integers and validated paths: no shell
// string is ever built from user input.
package sshrun

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Target is one SSH endpoint: where, who, how to authenticate, which host
// key to accept, and the jump hosts to go through (like ProxyJump: Jumps[0]
// is dialled directly, every later hop and then the target through the one
// before).
type Target struct {
	Addr string // host name or IP address
	Port int    // 22 when zero
	User string
	Auth Auth
	// HostKey is the pinned host key. A target without one is refused:
	// unknown keys are never accepted silently (use Scan to learn it).
	HostKey ssh.PublicKey
	Jumps   []Target
}

// Auth is how a target authenticates the client: an OpenSSH private key
// (the server unseals it from the database) or an ssh-agent socket.
type Auth struct {
	PrivateKey []byte // OpenSSH PEM (or any format ssh.ParsePrivateKey reads), unencrypted
	AgentSock  string // path of an ssh-agent socket, used when PrivateKey is empty
}

// HostPort is "addr:port" for net.Dial.
func (t Target) HostPort() string {
	port := t.Port
	if port == 0 {
		port = 22
	}
	return net.JoinHostPort(t.Addr, strconv.Itoa(port))
}

// String names the target for errors and logs, jumps included.
func (t Target) String() string {
	s := t.User + "@" + t.HostPort()
	for i := len(t.Jumps) - 1; i >= 0; i-- {
		s += " via " + t.Jumps[i].User + "@" + t.Jumps[i].HostPort()
	}
	return s
}

// ParseHostKey reads a host public key from an authorized_keys line
// ("ssh-ed25519 AAAA... comment") or a known_hosts line ("host ssh-ed25519
// AAAA...").
func ParseHostKey(line string) (ssh.PublicKey, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return nil, errors.New("sshrun: empty host key")
	}
	if k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line)); err == nil {
		return k, nil
	}
	_, _, k, _, _, err := ssh.ParseKnownHosts([]byte(line))
	if err != nil {
		return nil, fmt.Errorf("sshrun: parse host key: not an authorized_keys or known_hosts line: %w", err)
	}
	return k, nil
}

// AuthorizedKey renders a public key as one authorized_keys line without
// the trailing newline.
func AuthorizedKey(k ssh.PublicKey) string {
	return strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(k)), "\n")
}

// Fingerprint is the key's SHA256 fingerprint as OpenSSH prints it
// ("SHA256:...").
func Fingerprint(k ssh.PublicKey) string { return ssh.FingerprintSHA256(k) }

// KeyPair is a new client key: the private key in OpenSSH PEM form, to be
// sealed by the caller, and the public key as an authorized_keys line, to be
// installed on the lab host.
type KeyPair struct {
	PrivatePEM    []byte
	AuthorizedKey string
	Fingerprint   string
}

// GenerateKey makes a new ed25519 key pair. comment ends up in the public
// key's line (for example "accord@lab-host-3").
func GenerateKey(comment string) (KeyPair, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("sshrun: generate ed25519 key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return KeyPair{}, fmt.Errorf("sshrun: marshal private key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return KeyPair{}, fmt.Errorf("sshrun: public key: %w", err)
	}
	line := AuthorizedKey(sshPub)
	if comment = strings.TrimSpace(comment); comment != "" {
		line += " " + strings.Join(strings.Fields(comment), "_")
	}
	return KeyPair{
		PrivatePEM:    pem.EncodeToMemory(block),
		AuthorizedKey: line,
		Fingerprint:   Fingerprint(sshPub),
	}, nil
}
