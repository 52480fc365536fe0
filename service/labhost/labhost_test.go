package labhost_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"

	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
)

// hostKey is a fresh host key in the authorized_keys form a host row pins.
func hostKey(t *testing.T) (string, ssh.PublicKey) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	k, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)
	return sshrun.AuthorizedKey(k), k
}

// clientKey is a fresh client private key in OpenSSH PEM, as Accord
// generates it for a host.
func clientKey(t *testing.T) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	return pem.EncodeToMemory(block)
}

func sealer(t *testing.T) *runners.Sealer {
	t.Helper()
	s, err := runners.NewSealer([]byte("0123456789abcdef0123456789abcdef-labhost"))
	require.NoError(t, err)
	return s
}

// A host row becomes the SSH target it describes: its own key unsealed,
// its pinned host key, its jump hosts with the same credentials and their
// own pinned keys.
func TestTargetIsTheHostRowsSSHTarget(t *testing.T) {
	t.Parallel()
	s := sealer(t)
	key := clientKey(t)
	sealed, err := s.Seal(key, labhost.SealLabel(7))
	require.NoError(t, err)
	line, pinned := hostKey(t)
	jumpLine, jumpKey := hostKey(t)
	h := store.Host{ID: 7, Name: "gpu-07", Address: "10.0.0.7", Port: 2222, Username: "lab", AuthMethod: "key", SealedPrivateKey: sealed, HostKey: line,
		JumpChain: []store.JumpHop{{Address: "bastion.example", Port: 22, Username: "jump", HostKey: jumpLine}}}
	target, err := labhost.Target(h, s)
	require.NoError(t, err)
	require.Equal(t, "10.0.0.7", target.Addr)
	require.Equal(t, 2222, target.Port)
	require.Equal(t, "lab", target.User)
	require.Equal(t, key, target.Auth.PrivateKey)
	require.Equal(t, pinned.Marshal(), target.HostKey.Marshal())
	require.Len(t, target.Jumps, 1)
	require.Equal(t, "bastion.example", target.Jumps[0].Addr)
	require.Equal(t, "jump", target.Jumps[0].User)
	require.Equal(t, key, target.Jumps[0].Auth.PrivateKey, "the jump host takes the same credentials")
	require.Equal(t, jumpKey.Marshal(), target.Jumps[0].HostKey.Marshal())

	// An agent host: its socket, no key.
	agent := store.Host{ID: 8, Name: "gpu-08", Address: "10.0.0.8", Username: "lab", AuthMethod: "agent", AgentSocket: "/run/accord/agent.sock", HostKey: line}
	target, err = labhost.Target(agent, s)
	require.NoError(t, err)
	require.Empty(t, target.Auth.PrivateKey)
	require.Equal(t, "/run/accord/agent.sock", target.Auth.AgentSock)
}

// What a host row cannot be trusted with is refused for good (a
// PermanentError: retrying cannot fix it): a host key never confirmed, on
// the host or a jump host; a sealed key that belongs to another row; a
// pinned key that does not parse.
func TestTargetRefusesWhatCannotBeTrusted(t *testing.T) {
	t.Parallel()
	s := sealer(t)
	sealed, err := s.Seal(clientKey(t), labhost.SealLabel(7))
	require.NoError(t, err)
	line, _ := hostKey(t)
	good := store.Host{ID: 7, Name: "gpu-07", Address: "10.0.0.7", Username: "lab", AuthMethod: "key", SealedPrivateKey: sealed, HostKey: line}

	for name, tc := range map[string]struct {
		change func(*store.Host)
		says   string
	}{
		"unconfirmed":       {func(h *store.Host) { h.HostKey = "" }, "the host key of gpu-07 is not confirmed yet"},
		"unconfirmed jump":  {func(h *store.Host) { h.JumpChain = []store.JumpHop{{Address: "bastion", Username: "j"}} }, "is not confirmed yet"},
		"another row's key": {func(h *store.Host) { h.ID = 8 }, "host gpu-07: "},
		"bad pinned key":    {func(h *store.Host) { h.HostKey = "ssh-ed25519 AAAAnot-a-key" }, "host gpu-07: pinned key"},
		"bad jump pinned key": {func(h *store.Host) {
			h.JumpChain = []store.JumpHop{{Address: "bastion", Username: "j", HostKey: "ssh-ed25519 AAAA"}}
		}, "jump host 1: pinned key"},
	} {
		h := good
		tc.change(&h)
		_, err := labhost.Target(h, s)
		var perm *runners.PermanentError
		require.ErrorAs(t, err, &perm, name)
		require.Contains(t, err.Error(), tc.says, name)
	}
}
