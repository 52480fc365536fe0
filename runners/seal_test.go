package runners

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSealerRoundTripAndRefusals(t *testing.T) {
	t.Parallel()
	secret := bytes.Repeat([]byte{7}, 32)
	s, err := NewSealer(secret)
	require.NoError(t, err)
	key := []byte("-----BEGIN OPENSSH PRIVATE KEY----- ...")
	sealed, err := s.Seal(key, "host:1")
	require.NoError(t, err)
	require.NotContains(t, string(sealed), "OPENSSH")
	got, err := s.Open(sealed, "host:1")
	require.NoError(t, err)
	require.Equal(t, key, got)

	_, err = s.Open(sealed, "host:2")
	require.ErrorIs(t, err, ErrUnseal, "bound to the host")
	other, _ := NewSealer(bytes.Repeat([]byte{8}, 32))
	_, err = other.Open(sealed, "host:1")
	require.ErrorIs(t, err, ErrUnseal, "another secret does not open it")
	sealed[len(sealed)-1] ^= 1
	_, err = s.Open(sealed, "host:1")
	require.ErrorIs(t, err, ErrUnseal, "tampering is detected")
	_, err = s.Open([]byte{1, 2}, "host:1")
	require.ErrorIs(t, err, ErrUnseal)
	_, err = NewSealer([]byte("short"))
	require.Error(t, err)
}
