package main

import (
	"context"
	"io"

	"github.com/accordlab/accord/submit"
)

// cmdSubmit is `accord submit`, the pipeline client (package submit).
func cmdSubmit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return submit.Main(ctx, args, getenv, stdout, stderr, version)
}
