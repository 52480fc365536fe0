// Package submit is `accord submit`, the pipeline client: it submits a
// run through the JSON API (package apiclient) with a bearer token,
// follows it until it is settled, prints the verdict of every gate
// criterion, optionally downloads the signed report and writes JUnit XML,
// and exits by the verdict so that any CI system can gate on it.
package submit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/accordlab/accord/apiclient"
)

// Exit codes of accord submit.
const (
	ExitPass      = 0
	ExitFail      = 1
	ExitUndecided = 2 // INCONCLUSIVE or INCOMPARABLE
	ExitError     = 3
)

const submitUsage = `usage: accord submit --server URL --program P --profile NAME[@vN] --host NAME [FLAGS]

Submits a run to an Accord server, follows it, prints every gate criterion's
verdict with its explanation, and exits by the run's verdict:

  0  PASS
  1  FAIL
  2  INCONCLUSIVE or INCOMPARABLE (more repetitions, or a comparable baseline, would decide)
  3  error: bad flags, HTTP or network errors, a refused token, a run that
     failed or was cancelled, --timeout, an interrupt (Ctrl-C)

Progress goes to standard error (one updating line on a terminal, one line
per change otherwise); the verdict, the criteria and the run's URL go to
standard output. The token is never printed.

flags:
`

const submitExamples = `
examples:
  export ACCORD_SERVER=https://accord.example.com ACCORD_TOKEN=...   # token with the read and run scopes
  accord submit --program "Array X × GPU farm" --profile "KV-cache lookups@v3" \
      --host gpu-07 --gate-set "p99 budget" --label "$CI_COMMIT_SHA" \
      --report report.tar.gz --junit accord-junit.xml

JUnit: one testsuite per run (name "PROFILE vN × HOST"), one testcase per gate
criterion (classname: the gate set, name: the criterion). FAIL is a <failure>
with the explanation; INCONCLUSIVE and INCOMPARABLE are <skipped> (neither
passed nor failed: more data would decide; the exit code 2 still stops the
pipeline), or <failure> with --junit-undecided=failure; an advisory criterion
that does not pass is <skipped> (it does not decide the verdict). A run that
fails, or any error, is one <error> test case. Properties carry the run id,
verdict, URL and the evaluation's digests.
`

// submitOptions are the parsed flags of accord submit.
type submitOptions struct {
	server            *url.URL
	token             string
	program           string
	profile           string
	profileVersion    int64
	host              string
	gateSet           string
	gateSetVersion    int64
	baseline          int64
	label             string
	confirmReadiness  bool
	timeout           time.Duration
	poll              time.Duration
	report            string
	reportWait        time.Duration
	requireReport     bool
	junit             string
	junitUndecided    string
	progress          string
	cancelOnInterrupt bool
}

// submitError is an error already phrased for the user (one line).
type submitError struct{ msg string }

func (e *submitError) Error() string { return e.msg }

func userErrorf(format string, args ...any) error {
	return &submitError{fmt.Sprintf(format, args...)}
}

// Main runs accord submit with its arguments (without "submit") and
// returns the exit code; version goes into the User-Agent.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, version string) int {
	opts, code, ok := parseSubmitFlags(args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	s := &submitter{
		opts:   opts,
		stdout: stdout,
		stderr: stderr,
		api:    apiclient.New(apiclient.Config{BaseURL: opts.server, Token: opts.token, UserAgent: "accord-submit/" + version}),
		prog:   newProgressPrinter(stderr, opts.progress, getenv),
		now:    time.Now,
	}
	return s.execute(ctx)
}

// parseSubmitFlags parses and checks the flags; ok is false when the
// command must stop with code (help: 0, bad flags: 3).
func parseSubmitFlags(args []string, getenv func(string) string, stdout, stderr io.Writer) (submitOptions, int, bool) {
	var o submitOptions
	fs := flag.NewFlagSet("accord submit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	server := fs.String("server", "", "Accord's base URL, such as https://accord.example.com (default $ACCORD_SERVER)")
	token := fs.String("token", "", "API token with the read and run scopes (default $ACCORD_TOKEN; prefer the variable or --token-file: arguments show in process lists)")
	tokenFile := fs.String("token-file", "", "read the API token from this file")
	fs.StringVar(&o.program, "program", "", "the program, by id or name (may be left out when the token sees one program)")
	fs.StringVar(&o.profile, "profile", "", "workload profile by name, optionally with a version: NAME@v3 (default: the latest version)")
	fs.Int64Var(&o.profileVersion, "profile-version", 0, "workload profile version by its id, instead of --profile")
	fs.StringVar(&o.host, "host", "", "lab host, by name or id")
	fs.StringVar(&o.gateSet, "gate-set", "", "gate set by name, optionally with a version: NAME@v2 (default: the latest version; without a gate set the run gets no verdict)")
	fs.Int64Var(&o.gateSetVersion, "gate-set-version", 0, "gate set version by its id, instead of --gate-set")
	fs.Int64Var(&o.baseline, "baseline", 0, "id of a finished run that relative criteria compare with")
	fs.StringVar(&o.label, "label", "", "label of the run, such as the commit or pipeline id")
	fs.BoolVar(&o.confirmReadiness, "confirm-readiness", false, "run although the host fails blocking readiness checks (recorded with the run)")
	fs.DurationVar(&o.timeout, "timeout", time.Hour, "overall time limit: submitting, following and downloading")
	fs.DurationVar(&o.poll, "poll", 2*time.Second, "interval between progress requests")
	fs.StringVar(&o.report, "report", "", "download the signed report bundle (tar.gz) to this file")
	fs.DurationVar(&o.reportWait, "report-wait", 20*time.Second, "how long to wait for the signed report once the run is judged (signing follows the verdict)")
	fs.BoolVar(&o.requireReport, "require-report", false, "exit 3 when no signed report can be downloaded (needs --report)")
	fs.StringVar(&o.junit, "junit", "", "write JUnit XML to this file: one test case per gate criterion")
	fs.StringVar(&o.junitUndecided, "junit-undecided", "skipped", "JUnit element for INCONCLUSIVE and INCOMPARABLE criteria: skipped or failure")
	fs.StringVar(&o.progress, "progress", "auto", "progress on standard error: auto (a live line on a terminal, else lines), tty, plain or off")
	fs.BoolVar(&o.cancelOnInterrupt, "cancel-on-interrupt", false, "cancel the run on the server when following stops early (Ctrl-C, SIGTERM, --timeout); by default the run goes on")

	fail := func(format string, args ...any) (submitOptions, int, bool) {
		fmt.Fprintf(stderr, "accord submit: "+format+"\n", args...)
		fmt.Fprintln(stderr, "(accord submit -h shows the flags)")
		return o, ExitError, false
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, submitUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			fmt.Fprint(stdout, submitExamples)
			return o, 0, false
		}
		return fail("%v", err)
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q: every input is a flag", fs.Arg(0))
	}

	rawServer := strings.TrimSpace(*server)
	if rawServer == "" {
		rawServer = strings.TrimSpace(getenv("ACCORD_SERVER"))
	}
	if rawServer == "" {
		return fail("--server (or ACCORD_SERVER) is required")
	}
	u, err := url.Parse(rawServer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fail("--server must be an http(s) URL such as https://accord.example.com")
	}
	if u.User != nil {
		return fail("--server must not carry credentials (%s): use --token or ACCORD_TOKEN", u.Redacted())
	}
	u.Path = strings.TrimRight(u.Path, "/")
	o.server = u

	switch {
	case *token != "" && *tokenFile != "":
		return fail("give --token or --token-file, not both")
	case *tokenFile != "":
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fail("--token-file: %v", err)
		}
		o.token = strings.TrimSpace(string(b))
	case *token != "":
		o.token = strings.TrimSpace(*token)
	default:
		o.token = strings.TrimSpace(getenv("ACCORD_TOKEN"))
	}
	if o.token == "" {
		return fail("an API token is required: set ACCORD_TOKEN, or give --token-file or --token (create one on the server's API tokens page, with the read and run scopes)")
	}
	if strings.ContainsAny(o.token, " \t\r\n") {
		return fail("the API token contains white space: check ACCORD_TOKEN, --token or --token-file")
	}

	switch {
	case o.profile == "" && o.profileVersion == 0:
		return fail("--profile NAME[@vN] or --profile-version ID is required")
	case o.profile != "" && o.profileVersion != 0:
		return fail("give --profile or --profile-version, not both")
	case o.profileVersion < 0:
		return fail("--profile-version must be a positive id")
	}
	if o.profile != "" {
		if _, _, err := parseSpecRef(o.profile); err != nil {
			return fail("--profile: %v", err)
		}
	}
	switch {
	case o.gateSet != "" && o.gateSetVersion != 0:
		return fail("give --gate-set or --gate-set-version, not both")
	case o.gateSetVersion < 0:
		return fail("--gate-set-version must be a positive id")
	}
	if o.gateSet != "" {
		if _, _, err := parseSpecRef(o.gateSet); err != nil {
			return fail("--gate-set: %v", err)
		}
	}
	if strings.TrimSpace(o.host) == "" {
		return fail("--host NAME or ID is required")
	}
	if o.baseline < 0 {
		return fail("--baseline must be a run id")
	}
	if len(o.label) > 200 {
		return fail("--label has %d characters; at most 200", len(o.label))
	}
	if o.timeout <= 0 {
		return fail("--timeout must be positive, such as 30m")
	}
	if o.poll < 100*time.Millisecond {
		return fail("--poll must be at least 100ms")
	}
	if o.reportWait < 0 {
		return fail("--report-wait must not be negative")
	}
	if o.requireReport && o.report == "" {
		return fail("--require-report needs --report FILE")
	}
	if o.junitUndecided != "skipped" && o.junitUndecided != "failure" {
		return fail("--junit-undecided must be skipped or failure, not %q", o.junitUndecided)
	}
	switch o.progress {
	case "auto", "tty", "plain", "off":
	default:
		return fail("--progress must be auto, tty, plain or off, not %q", o.progress)
	}
	return o, 0, true
}

// parseSpecRef splits "NAME" or "NAME@vN" (also "NAME@N"); version 0 means
// the latest. A name may itself contain "@" when no version follows it.
func parseSpecRef(s string) (name string, version int, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", 0, errors.New("empty name")
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		v := s[i+1:]
		if strings.HasPrefix(v, "v") || strings.HasPrefix(v, "V") {
			v = v[1:]
		}
		if n, convErr := strconv.Atoi(v); convErr == nil && v != "" && v[0] != '+' && v[0] != '-' {
			if n < 1 {
				return "", 0, fmt.Errorf("%q: versions start at v1", s)
			}
			name = strings.TrimSpace(s[:i])
			if name == "" {
				return "", 0, fmt.Errorf("%q: a name is needed before @", s)
			}
			return name, n, nil
		}
	}
	return s, 0, nil
}
