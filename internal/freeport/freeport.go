// Package freeport picks loopback ports for servers a test starts later,
// in another process or after a delay.
//
// A port from net.Listen("127.0.0.1:0") comes from the kernel's ephemeral
// range, the same range every outgoing connection takes its local port
// from: between the test closing its listener and the server binding the
// port, a client connection anywhere on the machine (the test suite opens
// thousands, to PostgreSQL alone) may take it. Ports below that range are
// never handed out that way, so a port picked there stays free unless
// someone asks for it by number.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"testing"
)

// lowest is the first port considered: well clear of the registered
// services below it.
const lowest = 20000

// Port returns a loopback port that was free a moment ago and lies outside
// the ephemeral range (or from it, when the range leaves no room below).
func Port(t testing.TB) int {
	t.Helper()
	first := ephemeralStart()
	for range 100 {
		p := 0
		if first > lowest+100 {
			p = lowest + rand.IntN(first-lowest)
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue // taken: try another
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if err := ln.Close(); err != nil {
			t.Fatalf("freeport: %v", err)
		}
		return port
	}
	t.Fatalf("freeport: no free port found below %d", first)
	return 0
}

// ephemeralStart is the first port of the kernel's ephemeral range (Linux's
// default, 32768, where it cannot be read).
func ephemeralStart() int {
	var lo, hi int
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if _, err := fmt.Sscanf(string(data), "%d %d", &lo, &hi); err == nil && lo > 0 {
			return lo
		}
	}
	return 32768
}
