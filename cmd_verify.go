package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/accordlab/accord/attest"
)

// cmdVerify checks a report bundle or an exported decision log offline:
// `accord verify FILE [--keys KEYS] [--head HEAD]`. Without --keys, the
// file's own keys are used, which proves integrity but not origin.
func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keysFile := fs.String("keys", "", "trusted keys: an allowed_signers file, a PEM file or keys.json (for example from /.well-known/accord/)")
	headFile := fs.String("head", "", "the program's published decision log head (…/decisions/head.json): says whether the log is behind it")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: accord verify FILE [--keys KEYS] [--head HEAD]\n\nChecks a signed report bundle (.tar.gz) or an exported decision log (.json) offline;\nwith --head, also whether its decision log is behind the installation's published head.")
		fs.PrintDefaults()
	}
	// Accept the file before or after the flags.
	var file string
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	}
	if file == "" {
		fs.Usage()
		return 2
	}
	var trusted *attest.KeySet
	if *keysFile != "" {
		b, err := os.ReadFile(*keysFile)
		if err != nil {
			fmt.Fprintln(stderr, "accord verify:", err)
			return 2
		}
		if trusted, err = attest.ParseTrustedKeys(b); err != nil {
			fmt.Fprintln(stderr, "accord verify:", err)
			return 2
		}
	}
	var head *attest.LogHead
	if *headFile != "" {
		b, err := os.ReadFile(*headFile)
		if err != nil {
			fmt.Fprintln(stderr, "accord verify:", err)
			return 2
		}
		if head, err = attest.ParseLogHead(b); err != nil {
			fmt.Fprintln(stderr, "accord verify:", err)
			return 2
		}
	}
	if err := attest.VerifyFileWithHead(ctx, file, trusted, head, stdout); err != nil {
		fmt.Fprintln(stderr, "accord verify: NOT VERIFIED:", err)
		return 1
	}
	return 0
}
