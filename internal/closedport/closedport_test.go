package closedport

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConnectionsAreRefusedAndThePortStaysTaken(t *testing.T) {
	addr := Addr(t)
	for range 3 {
		_, err := net.DialTimeout("tcp", addr, 2*time.Second)
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
	}
	_, err := net.Listen("tcp", addr)
	require.ErrorIs(t, err, syscall.EADDRINUSE, "another listener cannot take the port")
}
