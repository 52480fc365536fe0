// Command accord is the whole of Accord in one binary: the web server, the
// River worker, migrations, the probe that runs on lab hosts, the inference
// emulator and the offline verifier. This file only parses the subcommand
// and wires packages together.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/accordlab/accord/runners/probe"
	"github.com/accordlab/accord/runners/probe/emulator"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: accord COMMAND [ARGS]

commands:
  probe     the lab host's side of a run (facts, run, launch, tail, status, stop, pack)
  emulate   an OpenAI-compatible inference emulator doing real storage reads
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "probe":
		return probe.Main(ctx, args[1:], stdout, stderr)
	case "emulate":
		return emulator.Main(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "accord: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
