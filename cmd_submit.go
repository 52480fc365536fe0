package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/handlers"
)

// accord submit: the pipeline client. It submits a run through the JSON API
// with a bearer token, follows it until it is settled, prints the verdict of
// every gate criterion, optionally downloads the signed report and writes
// JUnit XML, and exits by the verdict so that any CI system can gate on it.

// Exit codes of accord submit.
const (
	exitPass      = 0
	exitFail      = 1
	exitUndecided = 2 // INCONCLUSIVE or INCOMPARABLE
	exitError     = 3
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

func cmdSubmit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	opts, code, ok := parseSubmitFlags(args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	s := &submitter{
		opts:   opts,
		stdout: stdout,
		stderr: stderr,
		api:    newAPIClient(opts.server, opts.token),
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
		return o, exitError, false
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

// ---------------------------------------------------------------------------
// The API client.

// apiClient calls Accord's JSON API with a bearer token. Errors never
// contain the token.
type apiClient struct {
	base  *url.URL
	token string
	http  *http.Client
	// requestTimeout bounds one API call (downloads are bounded by the
	// caller's context only).
	requestTimeout time.Duration
}

func newAPIClient(base *url.URL, token string) *apiClient {
	return &apiClient{base: base, token: token, http: &http.Client{}, requestTimeout: 30 * time.Second}
}

// apiStatusError is a non-2xx answer of the API.
type apiStatusError struct {
	Method, Path string
	Status       int
	Message      string            // the API's error text, or a description of the body
	Fields       map[string]string // field errors of a 422
	RequestID    string
}

func (e *apiStatusError) Error() string {
	msg := fmt.Sprintf("%s %s: HTTP %d", e.Method, e.Path, e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RequestID != "" {
		msg += " (request id " + e.RequestID + ")"
	}
	return msg
}

// transient reports whether retrying later may help (the server restarts,
// a proxy in front of it hiccups).
func (e *apiStatusError) transient() bool {
	switch e.Status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests, http.StatusInternalServerError:
		return true
	}
	return false
}

func (c *apiClient) endpoint(parts ...string) string {
	segs := append([]string{"api", "v1"}, parts...)
	for i, p := range segs {
		segs[i] = url.PathEscape(p)
	}
	u := *c.base
	u.Path = c.base.Path + "/" + strings.Join(segs, "/")
	u.RawPath = ""
	return u.String()
}

func (c *apiClient) do(ctx context.Context, method string, parts []string, body any, out any) error {
	return c.doWithHeader(ctx, method, parts, body, out, nil)
}

// doWithHeader is do with extra request headers.
func (c *apiClient) doWithHeader(ctx context.Context, method string, parts []string, body any, out any, header http.Header) error {
	ctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	path := "/api/v1/" + strings.Join(parts, "/")
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint(parts...), rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	c.authorize(req)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, scrubURLError(err))
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return statusError(method, path, res, raw)
	}
	if !isJSON(res.Header.Get("Content-Type")) {
		return fmt.Errorf("%s %s: the server answered %s instead of JSON: is --server the Accord server?", method, path, mediaType(res.Header.Get("Content-Type")))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return nil
}

func (c *apiClient) authorize(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("User-Agent", "accord-submit/"+version)
}

func statusError(method, path string, res *http.Response, raw []byte) error {
	e := &apiStatusError{Method: method, Path: path, Status: res.StatusCode}
	var body struct {
		Error     string            `json:"error"`
		Fields    map[string]string `json:"fields"`
		RequestID string            `json:"request_id"`
	}
	if isJSON(res.Header.Get("Content-Type")) && json.Unmarshal(raw, &body) == nil && body.Error != "" {
		e.Message, e.Fields, e.RequestID = body.Error, body.Fields, body.RequestID
	} else {
		e.Message = fmt.Sprintf("%s (%s, not the Accord API's JSON)", http.StatusText(res.StatusCode), mediaType(res.Header.Get("Content-Type")))
	}
	return e
}

func isJSON(contentType string) bool { return mediaType(contentType) == "application/json" }

func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	if mt == "" {
		return "no content type"
	}
	return mt
}

// scrubURLError keeps the operation and cause of a transport error; the
// URL in it is ours (no credentials: --server refuses them).
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// API types, as the client reads them.

type clientProgram struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Vendor   string `json:"vendor"`
	Customer string `json:"customer"`
	Role     string `json:"role"`
}

type clientHost struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	Pinned bool   `json:"host_key_pinned"`
}

type clientSpec struct {
	ID            int64  `json:"id"`
	Name          string `json:"name"`
	LatestVersion int    `json:"latest_version"`
}

type clientSpecVersion struct {
	SpecID    int64  `json:"spec_id"`
	VersionID int64  `json:"version_id"`
	Version   int    `json:"version"`
	Digest    string `json:"digest"`
}

type clientRun = handlers.APIRun

// ---------------------------------------------------------------------------
// The command.

type submitter struct {
	opts   submitOptions
	stdout io.Writer
	stderr io.Writer
	api    *apiClient
	prog   *progressPrinter
	now    func() time.Time

	program clientProgram
	run     clientRun
	eval    *acceptance.Evaluation
	report  *savedReport
	// reportNote says why there is no report (when report is nil);
	// reportErr is set when that fails the command (--require-report).
	reportNote string
	reportErr  error
}

type savedReport struct {
	File   string
	Bytes  int64
	SHA256 string
}

func (s *submitter) execute(ctx context.Context) int {
	// The overall limit covers submitting, following and downloading.
	tctx, cancel := context.WithTimeout(ctx, s.opts.timeout)
	defer cancel()
	s.warnCleartext()

	code, err := s.submitAndFollow(tctx)
	s.prog.finish()
	if err != nil {
		err = s.explainStop(ctx, tctx, err)
		fmt.Fprintln(s.stderr, "accord submit: "+oneLine(err.Error()))
		if s.run.URL != "" {
			fmt.Fprintln(s.stderr, "run:", s.run.URL)
		}
		s.writeJUnitOrComplain(err)
		return exitError
	}
	return code
}

// explainStop turns a stop of the context into the user's words, and
// cancels the run when asked to.
func (s *submitter) explainStop(parent, tctx context.Context, err error) error {
	var why string
	switch {
	case parent.Err() != nil:
		why = "interrupted"
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		why = fmt.Sprintf("--timeout %s reached", s.opts.timeout)
	default:
		return err
	}
	switch {
	case s.run.ID == 0:
		return userErrorf("%s before the server confirmed a run", why)
	case s.run.Final:
		return userErrorf("%s while fetching the results of run %d (state %s)", why, s.run.ID, s.run.State)
	case !s.opts.cancelOnInterrupt:
		return userErrorf("%s: stopped following run %d (state %s); it continues on the server (--cancel-on-interrupt cancels it)", why, s.run.ID, s.run.State)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 15*time.Second)
	defer cancel()
	var after clientRun
	if cerr := s.api.do(cctx, http.MethodPost, s.runPath("cancel"), nil, &after); cerr != nil {
		return userErrorf("%s: stopped following run %d, and could not cancel it: %v", why, s.run.ID, cerr)
	}
	s.run = after
	return userErrorf("%s: cancelled run %d (state %s)", why, s.run.ID, after.State)
}

func (s *submitter) warnCleartext() {
	if s.opts.server.Scheme != "http" {
		return
	}
	host := s.opts.server.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return
	}
	fmt.Fprintf(s.stderr, "accord submit: warning: %s is plain http: the token crosses the network unencrypted\n", s.opts.server.Redacted())
}

func (s *submitter) submitAndFollow(ctx context.Context) (int, error) {
	req, err := s.resolve(ctx)
	if err != nil {
		return 0, err
	}
	if err := s.submit(ctx, req); err != nil {
		return 0, err
	}
	if err := s.follow(ctx); err != nil {
		return 0, err
	}
	return s.conclude(ctx)
}

// resolve turns names into the ids a RunRequest carries.
func (s *submitter) resolve(ctx context.Context) (handlers.RunRequest, error) {
	req := handlers.RunRequest{Label: strings.TrimSpace(s.opts.label), ConfirmReadiness: s.opts.confirmReadiness, BaselineRunID: s.opts.baseline}
	p, err := s.resolveProgram(ctx)
	if err != nil {
		return req, err
	}
	s.program = p
	pid := strconv.FormatInt(p.ID, 10)

	var profile clientSpecVersion
	if s.opts.profileVersion != 0 {
		profile, err = s.specVersionByID(ctx, pid, "profile", s.opts.profileVersion)
	} else {
		profile, err = s.resolveSpec(ctx, pid, "profiles", "profile", s.opts.profile, "--profile-version")
	}
	if err != nil {
		return req, err
	}
	req.ProfileVersionID = profile.VersionID
	h, err := s.resolveHost(ctx, pid)
	if err != nil {
		return req, err
	}
	req.HostID = h.ID
	switch {
	case s.opts.gateSetVersion != 0:
		sv, err := s.specVersionByID(ctx, pid, "gate set", s.opts.gateSetVersion)
		if err != nil {
			return req, err
		}
		req.GateSetVersionID = sv.VersionID
	case s.opts.gateSet != "":
		sv, err := s.resolveSpec(ctx, pid, "gatesets", "gate set", s.opts.gateSet, "--gate-set-version")
		if err != nil {
			return req, err
		}
		req.GateSetVersionID = sv.VersionID
	default:
		fmt.Fprintln(s.stderr, "accord submit: no --gate-set: the run will get no verdict; the exit code says only whether it finished")
	}
	return req, nil
}

func (s *submitter) resolveProgram(ctx context.Context) (clientProgram, error) {
	var list struct {
		Programs []clientProgram `json:"programs"`
	}
	if err := s.api.do(ctx, http.MethodGet, []string{"programs"}, nil, &list); err != nil {
		return clientProgram{}, s.explainAPIError(err, "list programs")
	}
	want := strings.TrimSpace(s.opts.program)
	if want == "" {
		if len(list.Programs) == 1 {
			return list.Programs[0], nil
		}
		return clientProgram{}, userErrorf("--program is required: the token sees %d programs (%s)", len(list.Programs), programNames(list.Programs))
	}
	if id, err := strconv.ParseInt(want, 10, 64); err == nil {
		for _, p := range list.Programs {
			if p.ID == id {
				return p, nil
			}
		}
	}
	var byName []clientProgram
	for _, p := range list.Programs {
		if p.Name == want {
			byName = append(byName, p)
		}
	}
	if len(byName) == 0 {
		for _, p := range list.Programs {
			if strings.EqualFold(p.Name, want) {
				byName = append(byName, p)
			}
		}
	}
	switch len(byName) {
	case 1:
		return byName[0], nil
	case 0:
		return clientProgram{}, userErrorf("no program %q among the %d the token's user may see (%s)", want, len(list.Programs), programNames(list.Programs))
	default:
		return clientProgram{}, userErrorf("%d programs are named %q: give --program by id (%s)", len(byName), want, programNames(byName))
	}
}

func programNames(ps []clientProgram) string {
	if len(ps) == 0 {
		return "none: is the user a member of a program?"
	}
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d %q", p.ID, p.Name))
	}
	return strings.Join(out, ", ")
}

func (s *submitter) resolveHost(ctx context.Context, pid string) (clientHost, error) {
	var list struct {
		Hosts []clientHost `json:"hosts"`
	}
	if err := s.api.do(ctx, http.MethodGet, []string{"programs", pid, "hosts"}, nil, &list); err != nil {
		return clientHost{}, s.explainAPIError(err, "list lab hosts")
	}
	want := strings.TrimSpace(s.opts.host)
	var found []clientHost
	for _, h := range list.Hosts {
		if h.Name == want {
			found = append(found, h)
		}
	}
	if len(found) == 0 {
		if id, err := strconv.ParseInt(want, 10, 64); err == nil {
			for _, h := range list.Hosts {
				if h.ID == id {
					found = append(found, h)
				}
			}
		}
	}
	if len(found) == 0 {
		var names []string
		for _, h := range list.Hosts {
			names = append(names, fmt.Sprintf("%d %q", h.ID, h.Name))
		}
		if len(names) == 0 {
			names = []string{"none"}
		}
		return clientHost{}, userErrorf("no lab host %q in program %q (hosts: %s)", want, s.program.Name, strings.Join(names, ", "))
	}
	h := found[0]
	if !h.Pinned {
		return h, userErrorf("lab host %q has no confirmed host key yet: scan and confirm it on the host's page first", h.Name)
	}
	return h, nil
}

// resolveSpec finds a profile or gate set version by NAME[@vN].
// specVersionByID checks that a version named by its id exists in the
// program and is of the expected kind, before anything is submitted.
func (s *submitter) specVersionByID(ctx context.Context, pid, noun string, id int64) (clientSpecVersion, error) {
	var sv clientSpecVersion
	path := strings.ReplaceAll(noun, " ", "") + "-versions"
	err := s.api.do(ctx, http.MethodGet, []string{"programs", pid, path, strconv.FormatInt(id, 10)}, nil, &sv)
	var se *apiStatusError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return sv, userErrorf("no %s version with id %d in program %q", noun, id, s.program.Name)
	}
	if err != nil {
		return sv, s.explainAPIError(err, fmt.Sprintf("load %s version %d", noun, id))
	}
	return sv, nil
}

func (s *submitter) resolveSpec(ctx context.Context, pid, path, noun, ref, idFlag string) (clientSpecVersion, error) {
	name, version, err := parseSpecRef(ref)
	if err != nil {
		return clientSpecVersion{}, userErrorf("%s: %v", noun, err)
	}
	var list map[string][]clientSpec
	if err := s.api.do(ctx, http.MethodGet, []string{"programs", pid, path}, nil, &list); err != nil {
		return clientSpecVersion{}, s.explainAPIError(err, "list "+noun+"s")
	}
	specs := list[path]
	var found []clientSpec
	for _, sp := range specs {
		if sp.Name == name {
			found = append(found, sp)
		}
	}
	if len(found) == 0 {
		for _, sp := range specs {
			if strings.EqualFold(sp.Name, name) {
				found = append(found, sp)
			}
		}
	}
	switch {
	case len(found) == 0:
		var names []string
		for _, sp := range specs {
			names = append(names, fmt.Sprintf("%q", sp.Name))
		}
		if len(names) == 0 {
			names = []string{"none"}
		}
		return clientSpecVersion{}, userErrorf("no %s named %q in program %q (%ss: %s)", noun, name, s.program.Name, noun, strings.Join(names, ", "))
	case len(found) > 1:
		return clientSpecVersion{}, userErrorf("%d %ss are named %q in program %q: choose one by version id with %s", len(found), noun, name, s.program.Name, idFlag)
	}
	sp := found[0]
	if version == 0 {
		version = sp.LatestVersion
	}
	if version > sp.LatestVersion {
		return clientSpecVersion{}, userErrorf("%s %q has versions v1 to v%d, not v%d", noun, sp.Name, sp.LatestVersion, version)
	}
	var sv clientSpecVersion
	err = s.api.do(ctx, http.MethodGet, []string{"programs", pid, path, strconv.FormatInt(sp.ID, 10), "versions", strconv.Itoa(version)}, nil, &sv)
	if err != nil {
		return sv, s.explainAPIError(err, fmt.Sprintf("load %s %q v%d", noun, sp.Name, version))
	}
	return sv, nil
}

// submit posts the run request.
func (s *submitter) submit(ctx context.Context, req handlers.RunRequest) error {
	pid := strconv.FormatInt(s.program.ID, 10)
	// The request carries a key of its own, so that sending it again after
	// a lost answer gets the run it started instead of a second run.
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	header := http.Header{"Idempotency-Key": {"accord-submit-" + hex.EncodeToString(key)}}
	var outageSince time.Time
	var err error
	for {
		err = s.api.doWithHeader(ctx, http.MethodPost, []string{"programs", pid, "runs"}, req, &s.run, header)
		if err == nil || !isTransient(err) || ctx.Err() != nil {
			break
		}
		if outageSince.IsZero() {
			outageSince = s.now()
			s.prog.line(fmt.Sprintf("submitting the run failed, sending it again (same Idempotency-Key) for up to %s: %s", outageTolerance, oneLine(err.Error())))
		}
		if s.now().Sub(outageSince) > outageTolerance {
			break
		}
		if sleepCtx(ctx, s.opts.poll) != nil {
			break
		}
	}
	if err != nil {
		var se *apiStatusError
		if errors.As(err, &se) && se.Status == http.StatusUnprocessableEntity && len(se.Fields) > 0 {
			return userErrorf("the server refused the run: %s", describeFields(se.Fields))
		}
		return s.explainAPIError(err, "submit the run")
	}
	what := s.run.Profile + " × " + s.run.Host
	if s.run.GateSet != "" {
		what += ", gate set " + s.run.GateSet
	}
	if s.run.BaselineRunID != nil {
		what += fmt.Sprintf(", baseline run %d", *s.run.BaselineRunID)
	}
	s.prog.line(fmt.Sprintf("submitted run %d: %s", s.run.ID, what))
	if s.run.URL != "" {
		s.prog.line("  " + s.run.URL)
	}
	return nil
}

// describeFields lists a 422's field errors, with the flag that sets each.
func describeFields(fields map[string]string) string {
	flags := map[string]string{
		"profile_version": "--profile", "profile_version_id": "--profile",
		"host": "--host", "host_id": "--host",
		"gate_set_version": "--gate-set", "gate_set_version_id": "--gate-set",
		"baseline": "--baseline", "baseline_run_id": "--baseline",
		"label": "--label", "confirm_readiness": "--confirm-readiness",
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		name := k
		if f, ok := flags[k]; ok {
			name = f
		}
		parts = append(parts, name+": "+fields[k])
	}
	return strings.Join(parts, "; ")
}

// explainAPIError phrases the errors a user can act on.
func (s *submitter) explainAPIError(err error, doing string) error {
	var se *apiStatusError
	if !errors.As(err, &se) {
		return fmt.Errorf("%s: %w", doing, err)
	}
	switch se.Status {
	case http.StatusUnauthorized:
		return userErrorf("the server refused the API token (HTTP 401: %s): check ACCORD_TOKEN", se.Message)
	case http.StatusForbidden:
		return userErrorf("%s: the token may not do this (HTTP 403: %s): it needs the read and run scopes, and the user the engineer role in the program", doing, se.Message)
	case http.StatusNotFound:
		return userErrorf("%s: not found (HTTP 404 for %s): wrong --server, or not visible to the token's user", doing, se.Path)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

func (s *submitter) runPath(rest ...string) []string {
	p := []string{"programs", strconv.FormatInt(s.program.ID, 10), "runs", strconv.FormatInt(s.run.ID, 10)}
	return append(p, rest...)
}

// outageTolerance is how long progress requests may fail in a row for
// transient reasons (network, 5xx) before following gives up: a server
// restart or a proxy's hiccup must not fail a pipeline whose run goes on.
const outageTolerance = 2 * time.Minute

// follow polls the run until it is settled: final, and judged when it has
// a gate set.
func (s *submitter) follow(ctx context.Context) error {
	s.prog.update(s.run)
	var outageSince time.Time // zero while the server answers
	lastErr := ""
	for !s.run.Settled {
		if err := sleepCtx(ctx, s.opts.poll); err != nil {
			return err
		}
		var r clientRun
		err := s.api.do(ctx, http.MethodGet, s.runPath(), nil, &r)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			now := s.now()
			if outageSince.IsZero() {
				outageSince = now
			}
			if !isTransient(err) || now.Sub(outageSince) > outageTolerance {
				return s.explainAPIError(err, fmt.Sprintf("follow run %d", s.run.ID))
			}
			// One line per different error, not one per poll.
			if msg := oneLine(err.Error()); msg != lastErr {
				s.prog.line(fmt.Sprintf("progress request failed, retrying for up to %s: %s", outageTolerance, msg))
				lastErr = msg
			}
			continue
		}
		if !outageSince.IsZero() {
			s.prog.line(fmt.Sprintf("the server answers again after %s", s.now().Sub(outageSince).Round(time.Second)))
			outageSince, lastErr = time.Time{}, ""
		}
		s.run = r
		s.prog.update(r)
	}
	return nil
}

func isTransient(err error) bool {
	var se *apiStatusError
	if errors.As(err, &se) {
		return se.transient()
	}
	// Transport errors: refused connections, resets, timeouts of one call.
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// conclude loads the evaluation and the report, prints the result, writes
// JUnit and returns the exit code.
func (s *submitter) conclude(ctx context.Context) (int, error) {
	switch s.run.State {
	case "failed", "cancelled":
		reason := s.run.Reason
		if reason == "" {
			reason = "no reason given"
		}
		return 0, userErrorf("run %d %s without a verdict: %s", s.run.ID, s.run.State, reason)
	case "done":
	default:
		return 0, fmt.Errorf("run %d is settled in the unexpected state %q", s.run.ID, s.run.State)
	}
	if s.run.GateSetVersionID != nil {
		var ev acceptance.Evaluation
		if err := s.api.do(ctx, http.MethodGet, s.runPath("evaluation"), nil, &ev); err != nil {
			return 0, s.explainAPIError(err, fmt.Sprintf("load the evaluation of run %d", s.run.ID))
		}
		s.eval = &ev
	}
	if s.opts.report != "" {
		if err := s.downloadReport(ctx); err != nil {
			return 0, err
		}
	}
	code := exitCode(s.verdict())
	if s.opts.requireReport && s.report == nil {
		s.reportErr = userErrorf("no signed report for run %d (--require-report): %s", s.run.ID, s.reportNote)
		code = exitError
	}
	s.printResult()
	if s.opts.junit != "" {
		if err := writeFileAtomic(s.opts.junit, s.junitDocument(nil)); err != nil {
			return 0, fmt.Errorf("--junit: %w", err)
		}
		fmt.Fprintf(s.stdout, "junit: %s\n", s.opts.junit)
	}
	if s.reportErr != nil {
		fmt.Fprintln(s.stderr, "accord submit: "+s.reportErr.Error())
	}
	return code, nil
}

// verdict is the run's verdict: the evaluation's when there is one.
func (s *submitter) verdict() string {
	if s.eval != nil && s.eval.Verdict != "" {
		return string(s.eval.Verdict)
	}
	return s.run.Verdict
}

func exitCode(verdict string) int {
	switch acceptance.Verdict(verdict) {
	case acceptance.Pass, "":
		return exitPass // "" only for a finished run without a gate set
	case acceptance.Fail:
		return exitFail
	case acceptance.Inconclusive, acceptance.Incomparable:
		return exitUndecided
	}
	return exitError
}

// downloadReport fetches the signed bundle. Signing follows the verdict,
// so a 404 is retried for --report-wait before it counts as "no signed
// report yet" (not an error unless --require-report).
func (s *submitter) downloadReport(ctx context.Context) error {
	deadline := s.now().Add(s.opts.reportWait)
	for {
		err := s.fetchReport(ctx)
		var se *apiStatusError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &se) && se.Status == http.StatusNotFound:
			if s.now().Before(deadline) {
				if err := sleepCtx(ctx, min(s.opts.poll, time.Until(deadline)+time.Millisecond)); err != nil {
					return err
				}
				continue
			}
			s.reportNote = fmt.Sprintf("no signed report yet (the server answered 404 for %s after waiting %s)", se.Path, s.opts.reportWait)
			return nil
		case errors.As(err, &se):
			return s.explainAPIError(err, "download the signed report")
		default:
			return fmt.Errorf("download the signed report: %w", err)
		}
	}
}

func (s *submitter) fetchReport(ctx context.Context) error {
	parts := s.runPath("report.tar.gz")
	path := "/api/v1/" + strings.Join(parts, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.api.endpoint(parts...), nil)
	if err != nil {
		return err
	}
	s.api.authorize(req)
	res, err := s.api.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, scrubURLError(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return statusError(http.MethodGet, path, res, raw)
	}
	dir := filepath.Dir(s.opts.report)
	tmp, err := os.CreateTemp(dir, ".accord-report-*")
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), res.Body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("GET %s: save to %s: %w", path, s.opts.report, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if want := strings.ToLower(strings.TrimSpace(res.Header.Get("X-Content-SHA256"))); want != "" && want != sum {
		return fmt.Errorf("GET %s: the bundle's SHA-256 is %s, the server announced %s: the download is damaged", path, sum, want)
	}
	if err := checkGzip(tmp.Name()); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), s.opts.report); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	s.report = &savedReport{File: s.opts.report, Bytes: n, SHA256: sum}
	return nil
}

// checkGzip refuses a body that is not a gzip stream (a proxy's page, say).
func checkGzip(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	magic := make([]byte, 2)
	if _, err := io.ReadFull(f, magic); err != nil || magic[0] != 0x1f || magic[1] != 0x8b {
		return errors.New("the answer is not a gzip-compressed bundle")
	}
	return nil
}

// printResult writes the verdict, every criterion and the URL to stdout.
func (s *submitter) printResult() {
	w := s.stdout
	v := s.verdict()
	title := fmt.Sprintf("run %d · %s × %s", s.run.ID, s.run.Profile, s.run.Host)
	if s.run.Label != "" {
		title += fmt.Sprintf(" · %q", s.run.Label)
	}
	if s.eval == nil {
		fmt.Fprintf(w, "DONE  %s: finished, no gate set, no verdict\n", title)
	} else {
		fmt.Fprintf(w, "%s  %s · gate set %s\n", v, title, s.run.GateSet)
		width := 0
		for _, c := range s.eval.Criteria {
			width = max(width, utf8.RuneCountInString(c.Name))
		}
		for _, c := range s.eval.Criteria {
			sev := ""
			if c.Severity == acceptance.Advisory {
				sev = " (advisory)"
			}
			fmt.Fprintf(w, "  %-12s %-*s  %s%s\n", c.Verdict, width, c.Name, criterionRule(c), sev)
			for _, line := range strings.Split(strings.TrimSpace(c.Explanation), "\n") {
				fmt.Fprintf(w, "  %-12s %-*s    %s\n", "", width, "", line)
			}
		}
		if s.eval.Explanation != "" {
			fmt.Fprintf(w, "%s\n", oneLine(s.eval.Explanation))
		}
	}
	switch {
	case s.report != nil:
		fmt.Fprintf(w, "report: %s (%d bytes, sha256 %s)\n", s.report.File, s.report.Bytes, s.report.SHA256)
	case s.opts.report != "":
		fmt.Fprintf(w, "report: %s\n", s.reportNote)
	}
	if s.run.URL != "" {
		fmt.Fprintln(w, s.run.URL)
	}
}

// criterionRule is a criterion in one line: "read_clat p99 <= 1 s".
func criterionRule(c acceptance.CriterionResult) string {
	unit := c.ThresholdUnit
	if unit == "" {
		unit = c.Unit
	}
	rule := fmt.Sprintf("%s %s %s %s", c.Metric, c.Statistic, c.Comparator, strconv.FormatFloat(c.Threshold, 'g', -1, 64))
	if unit != "" {
		rule += " " + unit
	}
	if c.Mode == acceptance.Relative {
		rule += " vs baseline"
	}
	return rule
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func writeFileAtomic(file string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".accord-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

func (s *submitter) writeJUnitOrComplain(cause error) {
	if s.opts.junit == "" {
		return
	}
	if err := writeFileAtomic(s.opts.junit, s.junitDocument(cause)); err != nil {
		fmt.Fprintf(s.stderr, "accord submit: --junit: %v\n", err)
	}
}

// ---------------------------------------------------------------------------
// Progress on standard error.

// progressPrinter shows the run's progress: on a terminal one line redrawn
// in place, otherwise one line per change (CI logs keep every line).
type progressPrinter struct {
	w     io.Writer
	live  bool // redraw one line
	off   bool
	width int
	start time.Time
	now   func() time.Time

	drawn     bool   // a live line is on screen
	lastLine  string // the live line drawn last
	lastKey   string
	lastPct   int
	lastPrint time.Time
}

// heartbeat is the longest a plain log stays silent while a run goes on
// (some CI systems kill jobs that print nothing for minutes).
const heartbeat = time.Minute

func newProgressPrinter(w io.Writer, mode string, getenv func(string) string) *progressPrinter {
	p := &progressPrinter{w: w, width: 80, now: time.Now}
	p.start = p.now()
	if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n >= 20 {
		p.width = n
	}
	switch mode {
	case "off":
		p.off = true
	case "tty":
		p.live = true
	case "auto":
		p.live = isTerminal(w) && getenv("TERM") != "dumb"
	}
	return p
}

// isTerminal reports whether w is a character device other than /dev/null.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

func (p *progressPrinter) elapsed() string {
	d := p.now().Sub(p.start).Round(time.Second)
	return fmt.Sprintf("[%s]", d)
}

// line prints a message on its own line (above the live line, if any).
func (p *progressPrinter) line(msg string) {
	if p.off {
		return
	}
	p.clear()
	fmt.Fprintf(p.w, "%s %s\n", p.elapsed(), msg)
}

func (p *progressPrinter) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[2K")
		p.drawn = false
	}
}

func stateLabel(state string) string {
	if state == "waiting_for_host" {
		return "waiting for host"
	}
	return state
}

func (p *progressPrinter) update(r clientRun) {
	if p.off {
		return
	}
	pct := int(r.Progress*100 + 0.5)
	pct = max(0, min(100, pct))
	text := oneLine(r.ProgressText)
	if p.live {
		line := truncateRunes(fmt.Sprintf("%s %-10s %s %3d%%  %s", p.elapsed(), stateLabel(r.State), progressBar(r.Progress, 20), pct, text), p.width-1)
		if line != p.lastLine || !p.drawn {
			fmt.Fprint(p.w, "\r\x1b[2K"+line)
			p.lastLine, p.drawn = line, true
		}
		return
	}
	// One line per change: the state, the step (the text before its
	// elapsed-time part), or ten more percent; and a heartbeat.
	key, _, _ := strings.Cut(text, " · ")
	key = r.State + "|" + key
	now := p.now()
	if key == p.lastKey && pct/10 == p.lastPct/10 && now.Sub(p.lastPrint) < heartbeat {
		return
	}
	p.lastKey, p.lastPct, p.lastPrint = key, pct, now
	fmt.Fprintf(p.w, "%s run %d %s %d%%: %s\n", p.elapsed(), r.ID, stateLabel(r.State), pct, text)
}

// finish ends the live line.
func (p *progressPrinter) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

func progressBar(f float64, width int) string {
	f = max(0, min(1, f))
	n := int(f*float64(width) + 0.5)
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", width-n) + "]"
}

func truncateRunes(s string, n int) string {
	if n < 1 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// ---------------------------------------------------------------------------
// JUnit XML.

// The commonly used JUnit format (Ant's, as Jenkins, GitLab, GitHub
// reporters, Azure and Buildkite read it): testsuites > testsuite >
// properties, testcase (failure | error | skipped, system-out), system-out.
type junitTestSuites struct {
	XMLName  xml.Name         `xml:"testsuites"`
	Name     string           `xml:"name,attr"`
	Tests    int              `xml:"tests,attr"`
	Failures int              `xml:"failures,attr"`
	Errors   int              `xml:"errors,attr"`
	Skipped  int              `xml:"skipped,attr"`
	Time     string           `xml:"time,attr"`
	Suites   []junitTestSuite `xml:"testsuite"`
}

type junitTestSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	ID         int             `xml:"id,attr"`
	Package    string          `xml:"package,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitTestCase `xml:"testcase"`
	SystemOut  *junitText      `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitTestCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// junitText is multi-line output, kept readable as CDATA.
type junitText struct {
	Text string `xml:",cdata"`
}

func cdata(s string) *junitText { return &junitText{Text: xmlText(s)} }

// xmlText replaces what XML 1.0 cannot carry (control characters, invalid
// UTF-8) with U+FFFD: CDATA sections are written unescaped.
func xmlText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20, r >= 0xD800 && r <= 0xDFFF, r == 0xFFFE, r == 0xFFFF, r == utf8.RuneError:
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// junitTimestamp is the form the strict Ant schema accepts: no zone; the
// time is UTC (the properties carry it with its zone).
const junitTimestamp = "2006-01-02T15:04:05"

// junitDocument describes the run (or, with cause, the error that stopped
// the command) as JUnit XML.
func (s *submitter) junitDocument(cause error) []byte {
	suite := junitTestSuite{Name: "accord submit", Package: "accord"}
	if s.run.ID != 0 {
		suite.Name = s.run.Profile + " × " + s.run.Host
		suite.Hostname = s.run.Host
		start := s.run.CreatedAt
		if s.run.StartedAt != nil {
			start = *s.run.StartedAt
		}
		suite.Timestamp = start.UTC().Format(junitTimestamp)
		if s.run.FinishedAt != nil {
			suite.Time = seconds(s.run.FinishedAt.Sub(start))
		}
	}
	suite.Properties = s.junitProperties()
	classname := "accord"
	if s.run.GateSet != "" {
		classname = s.run.GateSet
	}

	switch {
	case cause != nil:
		name := "submit"
		if s.run.ID != 0 {
			name = fmt.Sprintf("run %d", s.run.ID)
		}
		msg := oneLine(cause.Error())
		suite.Cases = append(suite.Cases, junitTestCase{Name: name, Classname: classname, Time: seconds(0),
			Error: &junitProblem{Message: msg, Type: "error", Text: xmlText(msg)}})
	case s.eval == nil:
		suite.Cases = append(suite.Cases, junitTestCase{Name: fmt.Sprintf("run %d", s.run.ID), Classname: classname, Time: seconds(0),
			SystemOut: cdata("The run finished; it had no gate set, so no criterion was judged.")})
	default:
		for _, c := range s.eval.Criteria {
			suite.Cases = append(suite.Cases, s.junitCase(classname, c))
		}
		suite.SystemOut = cdata(s.junitSuiteOut())
	}
	if cause == nil && s.reportErr != nil {
		msg := s.reportErr.Error()
		suite.Cases = append(suite.Cases, junitTestCase{Name: "signed report", Classname: classname, Time: seconds(0),
			Error: &junitProblem{Message: msg, Type: "error", Text: xmlText(msg)}})
	}
	for _, c := range suite.Cases {
		suite.Tests++
		switch {
		case c.Failure != nil:
			suite.Failures++
		case c.Error != nil:
			suite.Errors++
		case c.Skipped != nil:
			suite.Skipped++
		}
	}
	if suite.Time == "" {
		suite.Time = seconds(0)
	}
	doc := junitTestSuites{Name: "accord", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Skipped: suite.Skipped,
		Time: suite.Time, Suites: []junitTestSuite{suite}}
	out, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		// Only unsupported types fail to marshal; ours are strings and ints.
		panic(fmt.Sprintf("junit: %v", err))
	}
	return append(append([]byte(xml.Header), out...), '\n')
}

func (s *submitter) junitProperties() []junitProperty {
	var props []junitProperty
	add := func(name, value string) {
		if value != "" {
			props = append(props, junitProperty{Name: "accord." + name, Value: value})
		}
	}
	add("server", s.opts.server.Redacted())
	if s.program.ID != 0 {
		add("program", fmt.Sprintf("%d %s", s.program.ID, s.program.Name))
	}
	if s.run.ID == 0 {
		return props
	}
	add("run_id", strconv.FormatInt(s.run.ID, 10))
	add("state", s.run.State)
	add("verdict", s.verdict())
	add("url", s.run.URL)
	add("profile", s.run.Profile)
	add("host", s.run.Host)
	add("gate_set", s.run.GateSet)
	add("label", s.run.Label)
	if s.run.BaselineRunID != nil {
		add("baseline_run_id", strconv.FormatInt(*s.run.BaselineRunID, 10))
	}
	add("created_at", s.run.CreatedAt.Format(time.RFC3339Nano))
	if s.run.StartedAt != nil {
		add("started_at", s.run.StartedAt.Format(time.RFC3339Nano))
	}
	if s.run.FinishedAt != nil {
		add("finished_at", s.run.FinishedAt.Format(time.RFC3339Nano))
	}
	if s.eval != nil {
		in := s.eval.Inputs
		add("engine_version", s.eval.EngineVersion)
		add("evaluation_digest", in.Digest)
		add("profile_digest", in.ProfileDigest)
		add("gate_digest", in.GateDigest)
		add("candidate_digest", in.CandidateDigest)
		add("candidate_facts_digest", in.CandidateFactsDigest)
		add("baseline_digest", in.BaselineDigest)
		add("baseline_facts_digest", in.BaselineFactsDigest)
	}
	if s.report != nil {
		add("report_file", s.report.File)
		add("report_sha256", s.report.SHA256)
	} else if s.reportNote != "" {
		add("report", s.reportNote)
	}
	return props
}

// junitCase maps one criterion: PASS passes, FAIL is a failure, and
// INCONCLUSIVE or INCOMPARABLE are skipped (or failures with
// --junit-undecided=failure); an advisory criterion never fails the suite.
func (s *submitter) junitCase(classname string, c acceptance.CriterionResult) junitTestCase {
	tc := junitTestCase{Name: c.Name, Classname: classname, Time: seconds(0), SystemOut: cdata(criterionDetails(c))}
	rule := criterionRule(c)
	explanation := strings.TrimSpace(c.Explanation)
	msg := fmt.Sprintf("%s: %s: %s", c.Verdict, rule, oneLine(explanation))
	switch {
	case c.Verdict == acceptance.Pass:
	case c.Severity == acceptance.Advisory:
		tc.Skipped = &junitSkipped{Message: "advisory criterion (does not decide the verdict): " + msg}
	case c.Verdict == acceptance.Fail:
		tc.Failure = &junitProblem{Message: msg, Type: string(c.Verdict), Text: xmlText(explanation)}
	case s.opts.junitUndecided == "failure":
		tc.Failure = &junitProblem{Message: msg, Type: string(c.Verdict), Text: xmlText(explanation)}
	default:
		tc.Skipped = &junitSkipped{Message: msg}
	}
	return tc
}

// criterionDetails is a criterion's numbers for the test case's output.
func criterionDetails(c acceptance.CriterionResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s (%s, %s", c.Verdict, criterionRule(c), c.Mode, c.Severity)
	if c.Confidence > 0 {
		fmt.Fprintf(&b, ", confidence %g", c.Confidence)
	}
	b.WriteString(")\n")
	if c.Unit != "" {
		fmt.Fprintf(&b, "limit: %g %s\n", c.Limit, c.Unit)
	}
	if c.PValue != nil {
		fmt.Fprintf(&b, "p-value: %.4g\n", *c.PValue)
	}
	for _, sr := range c.Series {
		series := sr.Step
		if sr.Level != "" {
			series += " level " + sr.Level
		}
		fmt.Fprintf(&b, "- %s: %s (%s)", series, sr.Verdict, sr.Reason)
		if sr.Estimate != nil {
			fmt.Fprintf(&b, " estimate %.6g", *sr.Estimate)
		}
		if sr.Lower != nil || sr.Upper != nil {
			fmt.Fprintf(&b, " bounds [%s, %s] (%s)", optNum(sr.Lower), optNum(sr.Upper), sr.Interval)
		}
		fmt.Fprintf(&b, " n=%d repetitions=%d\n", sr.Candidate.N, sr.Candidate.Repetitions)
		if sr.Explanation != "" {
			fmt.Fprintf(&b, "  %s\n", oneLine(sr.Explanation))
		}
	}
	if c.Explanation != "" {
		fmt.Fprintf(&b, "%s\n", strings.TrimSpace(c.Explanation))
	}
	return b.String()
}

func optNum(f *float64) string {
	if f == nil {
		return "–"
	}
	return fmt.Sprintf("%.6g", *f)
}

func (s *submitter) junitSuiteOut() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %d: %s\n", s.run.ID, s.verdict())
	if s.eval.Explanation != "" {
		fmt.Fprintf(&b, "%s\n", strings.TrimSpace(s.eval.Explanation))
	}
	if cmp := s.eval.Comparability; cmp.Checked && !cmp.Comparable {
		b.WriteString("The hosts' facts differ:\n")
		for _, d := range cmp.Differences {
			fmt.Fprintf(&b, "- %+v\n", d)
		}
	}
	if s.run.URL != "" {
		fmt.Fprintf(&b, "%s\n", s.run.URL)
	}
	return b.String()
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(max(d, 0).Seconds(), 'f', 3, 64)
}
