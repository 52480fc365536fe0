package probe

import (
	"context"
	"fmt"
	"io"
)

// Main runs `accord probe ARGS...` and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "accord probe: not implemented yet")
	return 2
}
