// Command probecmd is a probe-only stand-in for the accord binary, which the
// probe's tests build when the module's main package does not build.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/accordlab/accord/runners/probe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 || os.Args[1] != "probe" {
		fmt.Fprintln(os.Stderr, "usage: probecmd probe COMMAND ...")
		os.Exit(2)
	}
	os.Exit(probe.Main(ctx, os.Args[2:], os.Stdout, os.Stderr))
}
