// Package probe is the lab host's side of a run, run there as `accord probe`:
// host facts, the detached run with its steps (fio, inference load, the
// team's own commands, cache drops, pauses, network and path faults),
// telemetry, and the commands the runner uses to follow, stop and collect a
// run. The command line is specified in package wire.
//
// The probe imports nothing of the server: only acceptance's pure types,
// wire, loadgen, facts and the standard library.
package probe

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes of the probe's commands.
const (
	ExitOK       = 0
	ExitFailed   = 1 // the run ended failed (probe run)
	ExitUsage    = 2 // bad command line or plan
	ExitError    = 3 // the command could not do its job
	ExitLaunched = 4 // launch refused: this attempt was already launched
	ExitCrashed  = 5 // tail: the probe is gone without a status
	// Exit codes of `probe run` for the other end states.
	ExitTimeout   = 124
	ExitCancelled = 130
)

const usage = `usage: accord probe COMMAND [FLAGS]

commands:
  facts  [--out FILE]               host facts as JSON
  launch --dir DIR                  start the run detached, print {"pid":N}
  run    --dir DIR                  the run itself, in the foreground
  tail   --dir DIR [--offset N]     copy the event stream from byte N and follow it
  status --dir DIR                  where the run stands, as JSON
  stop   --dir DIR [--grace 5s]     stop the run and confirm nothing is left
  release --dir DIR --barrier N     release barrier N of a multi-host run
  pack   --dir DIR                  write MANIFEST.sha256, stream DIR as tar on stdout
  endpoint --url URL --model M [--api chat] [--timeout 15s]
                                    one small streaming request to an inference endpoint, as JSON
`

// Main runs `accord probe ARGS...` and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "facts":
		return cmdFacts(ctx, rest, stdout, stderr)
	case "launch":
		return cmdLaunch(ctx, rest, stdout, stderr)
	case "run":
		return cmdRun(ctx, rest, stdout, stderr)
	case "tail":
		return cmdTail(ctx, rest, stdout, stderr)
	case "status":
		return cmdStatus(ctx, rest, stdout, stderr)
	case "stop":
		return cmdStop(ctx, rest, stdout, stderr)
	case "release":
		return cmdRelease(ctx, rest, stdout, stderr)
	case "pack":
		return cmdPack(ctx, rest, stdout, stderr)
	case "endpoint":
		return cmdEndpoint(ctx, rest, stdout, stderr)
	case guardianCommand:
		// Internal: the fault guardian that the run starts in its own session.
		return cmdGuardian(ctx, rest, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	default:
		fmt.Fprintf(stderr, "accord probe: unknown command %q\n\n%s", cmd, usage)
		return ExitUsage
	}
}

// newFlags makes a flag set that reports errors to stderr without exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("accord probe "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses and refuses stray positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return nil
}

// fail prints one clear line on stderr and returns code.
func fail(stderr io.Writer, code int, format string, a ...any) int {
	msg := fmt.Sprintf(format, a...)
	fmt.Fprintf(stderr, "accord probe: %s\n", strings.TrimSpace(strings.ReplaceAll(msg, "\n", " ")))
	return code
}

func usageError(stderr io.Writer, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	return fail(stderr, ExitUsage, "%v", err)
}

// printJSON writes v as one JSON line.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
