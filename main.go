// Command accord is the whole of Accord in one binary: the web server, the
// River worker, migrations, the probe that runs on lab hosts, the inference
// emulator, the offline verifier and the pipeline client. This file only
// parses the subcommand; the wiring of each lives in cmd_*.go.
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

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: accord COMMAND [ARGS]

server:
  serve              run the web server (and River workers unless ACCORD_WORKERS=false)
  worker             run River workers only
  migrate up|status  apply or show database migrations
  user create        create an account (the first one with --admin)
  version            print the version

lab hosts and tools:
  probe              the lab host's side of a run (facts, run, launch, tail, status, stop, pack)
  emulate            an OpenAI-compatible inference emulator doing real storage reads
  submit             submit a run through the API, follow it, exit by its verdict (pipelines)
  verify FILE        check a signed report bundle or an exported decision log, offline

  help config        the configuration variables
`

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, getenv, stdout, stderr, true)
	case "worker":
		return cmdServe(ctx, getenv, stdout, stderr, false)
	case "migrate":
		return cmdMigrate(ctx, args[1:], getenv, stdout, stderr)
	case "user":
		return cmdUser(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "accord", version)
		return 0
	case "probe":
		return probe.Main(ctx, args[1:], stdout, stderr)
	case "emulate":
		return emulator.Main(ctx, args[1:], stdout, stderr)
	case "submit":
		return cmdSubmit(ctx, args[1:], getenv, stdout, stderr)
	case "verify":
		return cmdVerify(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		if len(args) > 1 && args[1] == "config" {
			printConfigHelp(stdout)
			return 0
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "accord: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func printConfigHelp(w io.Writer) {
	for _, v := range envVars {
		def := v.Default
		if def == "" {
			def = "(empty)"
		}
		fmt.Fprintf(w, "%-26s %-40s %s\n", v.Name, def, v.Help)
	}
}
