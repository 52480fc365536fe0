package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

func TestHosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st             *store.Store
		program, other int64
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		p := newProgram(t, st)
		other := p.another(t, st)
		return &testBundle{st: st, program: p.ID, other: other}
	}

	t.Run("AHostComesBackAsRegistered", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		jumps := []store.JumpHop{{Address: "bastion.example", Port: 2222, Username: "jump"}}
		id, err := b.st.CreateHost(ctx, b.program, store.NewHost{Name: "gpu-07", Address: "10.0.0.7", Port: 22, Username: "lab",
			Labels: map[string]string{"rack": "r12"}, JumpChain: jumps, AuthMethod: "agent", AgentSocket: "/run/agent.sock", AllowDestructive: true, Emulated: true})
		require.NoError(t, err)
		h, err := b.st.GetHost(ctx, b.program, id)
		require.NoError(t, err)
		require.Equal(t, "gpu-07", h.Name)
		require.Equal(t, map[string]string{"rack": "r12"}, h.Labels)
		require.Equal(t, jumps, h.JumpChain)
		require.Equal(t, "agent", h.AuthMethod)
		require.True(t, h.AllowDestructive)
		require.True(t, h.Emulated)
		require.False(t, h.Pinned())
		require.Nil(t, h.LastCheckAt)

		bare, err := b.st.GetHost(ctx, b.program, newHost(t, b.st, b.program, "bare"))
		require.NoError(t, err)
		require.Equal(t, map[string]string{}, bare.Labels, "no labels are an empty map, not null")
		require.Equal(t, []store.JumpHop{}, bare.JumpChain)
	})

	t.Run("NamesAreUniqueWithinAProgram", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		newHost(t, b.st, b.program, "lab")
		err := inSavepoint(b.st, func(tx *store.Store) error {
			_, err := tx.CreateHost(ctx, b.program, store.NewHost{Name: "lab", Address: "10.0.0.8", Port: 22, Username: "root", AuthMethod: "key"})
			return err
		})
		require.ErrorIs(t, err, store.ErrConflict)
		newHost(t, b.st, b.other, "lab") // another program may use the name
	})

	t.Run("ThePortAndAuthMethodAreChecked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, h := range []store.NewHost{
			{Name: "p0", Address: "x", Port: 0, Username: "root", AuthMethod: "key"},
			{Name: "p1", Address: "x", Port: 65536, Username: "root", AuthMethod: "key"},
			{Name: "pw", Address: "x", Port: 22, Username: "root", AuthMethod: "password"},
			{Name: strings.Repeat("n", 101), Address: "x", Port: 22, Username: "root", AuthMethod: "key"},
		} {
			err := inSavepoint(b.st, func(tx *store.Store) error {
				_, err := tx.CreateHost(ctx, b.program, h)
				return err
			})
			require.ErrorContains(t, err, "violates check constraint", h.Name)
		}
	})

	t.Run("AnotherProgramsHostIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := newHost(t, b.st, b.program, "lab")
		_, err := b.st.GetHost(ctx, b.other, id)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.ErrorIs(t, b.st.PinHostKeys(ctx, b.other, id, "ssh-ed25519 AAAA", "SHA256:x", nil), store.ErrNotFound)
		h, err := b.st.GetHost(ctx, b.program, id)
		require.NoError(t, err)
		require.False(t, h.Pinned(), "the refused pin changed nothing")
		list, err := b.st.ListHosts(ctx, b.other)
		require.NoError(t, err)
		require.Empty(t, list)
	})

	t.Run("HostsAreListedByName", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, n := range []string{"gpu-b", "GPU-a", "cpu"} {
			newHost(t, b.st, b.program, n)
		}
		list, err := b.st.ListHosts(ctx, b.program)
		require.NoError(t, err)
		require.Equal(t, []string{"cpu", "GPU-a", "gpu-b"}, []string{list[0].Name, list[1].Name, list[2].Name})
	})

	t.Run("PinnedMeansEveryHop", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := newHost(t, b.st, b.program, "behind a bastion")
		hops := []store.JumpHop{{Address: "bastion", Port: 22, Username: "j", HostKey: "ssh-ed25519 BBBB", HostKeySHA256: "SHA256:b"}, {Address: "inner", Port: 22, Username: "j"}}
		require.NoError(t, b.st.PinHostKeys(ctx, b.program, id, "ssh-ed25519 AAAA", "SHA256:a", hops))
		h, err := b.st.GetHost(ctx, b.program, id)
		require.NoError(t, err)
		require.Equal(t, "SHA256:a", h.HostKeySHA256)
		require.NotNil(t, h.HostKeyPinnedAt)
		require.False(t, h.Pinned(), "the inner hop's key is not confirmed")
		hops[1].HostKey = "ssh-ed25519 CCCC"
		require.NoError(t, b.st.PinHostKeys(ctx, b.program, id, "ssh-ed25519 AAAA", "SHA256:a", hops))
		h, err = b.st.GetHost(ctx, b.program, id)
		require.NoError(t, err)
		require.True(t, h.Pinned())
		require.Equal(t, hops, h.JumpChain)
	})

	t.Run("ChecksAndSealedKeysNeedTheHost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := newHost(t, b.st, b.program, "lab")
		rtt := 0.8
		// 2001 bytes: the cut falls inside a two-byte character.
		require.NoError(t, b.st.RecordHostCheck(ctx, id, false, "a"+strings.Repeat("é", 1000), &rtt))
		require.NoError(t, b.st.SetHostSealedKey(ctx, id, []byte("sealed")))
		h, err := b.st.GetHost(ctx, b.program, id)
		require.NoError(t, err)
		require.False(t, *h.LastCheckOK)
		require.Equal(t, "a"+strings.Repeat("é", 999), h.LastCheckMessage, "cut to at most 2000 bytes, between characters")
		require.Equal(t, 0.8, *h.LastRTTMs)
		require.Equal(t, []byte("sealed"), h.SealedPrivateKey)

		require.ErrorIs(t, b.st.RecordHostCheck(ctx, -1, true, "", nil), store.ErrNotFound)
		require.ErrorIs(t, b.st.SetHostSealedKey(ctx, -1, []byte("x")), store.ErrNotFound)
	})

	t.Run("FactsAreKeptAsHistory", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		f := newRunFixture(t, b.st)
		run := f.run(t, b.st)
		_, err := b.st.RunFacts(ctx, run)
		require.ErrorIs(t, err, store.ErrNotFound)
		var ids []int64
		for i, facts := range []string{`{"kernel":"6.1"}`, `{"kernel":"6.6"}`, `{"kernel":"6.8"}`} {
			var runID *int64
			if i > 0 {
				runID = &run
			}
			id, err := b.st.AddHostFacts(ctx, f.Host, runID, json.RawMessage(facts), "sha256:"+facts)
			require.NoError(t, err)
			ids = append(ids, id)
		}
		history, err := b.st.HostFactsHistory(ctx, f.Host, 2)
		require.NoError(t, err)
		require.Equal(t, []int64{ids[2], ids[1]}, []int64{history[0].ID, history[1].ID}, "newest first, at most the limit")
		got, err := b.st.RunFacts(ctx, run)
		require.NoError(t, err)
		require.Equal(t, ids[2], got.ID, "the run's latest capture")
		require.JSONEq(t, `{"kernel":"6.8"}`, string(got.Facts))
	})
}
