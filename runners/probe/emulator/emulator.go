// Package emulator is `accord emulate`: an OpenAI-compatible streaming server
// standing in for a GPU inference server, whose TTFT depends on real reads
// from the storage under test.
package emulator

import (
	"context"
	"fmt"
	"io"
)

// Main runs `accord emulate ARGS...` and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "accord emulate: not implemented yet")
	return 2
}
