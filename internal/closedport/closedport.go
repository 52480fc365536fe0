// Package closedport gives tests a loopback address where a connection is
// refused, every time.
//
// Closing a listener and dialling its old port is not enough: on a busy
// machine another process may take the port in between, and the dial then
// meets a stranger ("connection reset by peer" was seen in CI). Here the port
// stays bound to a socket that never listens, for the whole test: the kernel
// hands it to nobody else, and a connection to it is refused.
package closedport

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// Addr is "127.0.0.1:port" with nothing listening, reserved until the test ends.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Port(t)))
}

// Port is the port of Addr.
func Port(t testing.TB) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("closedport: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	// No SO_REUSEADDR: nobody else may bind the port while this socket holds it.
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("closedport: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("closedport: getsockname: %v", err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}
