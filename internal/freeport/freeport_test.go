package freeport

import (
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPortsAreFreeAndBelowTheEphemeralRange(t *testing.T) {
	first := ephemeralStart()
	if first <= lowest+100 {
		t.Skipf("the ephemeral range starts at %d: no room below it", first)
	}
	seen := map[int]bool{}
	for range 50 {
		p := Port(t)
		require.GreaterOrEqual(t, p, lowest)
		require.Less(t, p, first, "outside the range outgoing connections take ports from")
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		require.NoError(t, err, "the port is free")
		require.NoError(t, ln.Close())
		seen[p] = true
	}
	require.Greater(t, len(seen), 40, "ports are spread, not handed out in order")
}
