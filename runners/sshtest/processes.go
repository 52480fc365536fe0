package sshtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Processes lists the processes on this machine (the loopback lab host)
// whose command line contains every one of parts, as "pid: command line":
// tests use it to see a probe run on the host, and to see it gone.
func Processes(t testing.TB, parts ...string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		line := strings.ReplaceAll(string(cmd), "\x00", " ")
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, e.Name()+": "+line)
		}
	}
	return out
}
