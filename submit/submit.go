package submit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/apiclient"
)

// submitter is one execution of the command.

type submitter struct {
	opts   submitOptions
	stdout io.Writer
	stderr io.Writer
	api    *apiclient.Client
	prog   *progressPrinter
	now    func() time.Time

	program apiclient.Program
	run     apiclient.Run
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
		return ExitError
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
	after, cerr := s.api.CancelRun(cctx, s.program.ID, s.run.ID)
	if cerr != nil {
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
func (s *submitter) resolve(ctx context.Context) (apiclient.RunRequest, error) {
	req := apiclient.RunRequest{Label: strings.TrimSpace(s.opts.label), ConfirmReadiness: s.opts.confirmReadiness, BaselineRunID: s.opts.baseline}
	p, err := s.resolveProgram(ctx)
	if err != nil {
		return req, err
	}
	s.program = p

	var profile apiclient.SpecVersion
	if s.opts.profileVersion != 0 {
		profile, err = s.specVersionByID(ctx, apiclient.Profiles, "profile", s.opts.profileVersion)
	} else {
		profile, err = s.resolveSpec(ctx, apiclient.Profiles, "profile", s.opts.profile, "--profile-version")
	}
	if err != nil {
		return req, err
	}
	req.ProfileVersionID = profile.VersionID
	h, err := s.resolveHost(ctx)
	if err != nil {
		return req, err
	}
	req.HostID = h.ID
	switch {
	case s.opts.gateSetVersion != 0:
		sv, err := s.specVersionByID(ctx, apiclient.GateSets, "gate set", s.opts.gateSetVersion)
		if err != nil {
			return req, err
		}
		req.GateSetVersionID = sv.VersionID
	case s.opts.gateSet != "":
		sv, err := s.resolveSpec(ctx, apiclient.GateSets, "gate set", s.opts.gateSet, "--gate-set-version")
		if err != nil {
			return req, err
		}
		req.GateSetVersionID = sv.VersionID
	default:
		fmt.Fprintln(s.stderr, "accord submit: no --gate-set: the run will get no verdict; the exit code says only whether it finished")
	}
	return req, nil
}

func (s *submitter) resolveProgram(ctx context.Context) (apiclient.Program, error) {
	programs, err := s.api.Programs(ctx)
	if err != nil {
		return apiclient.Program{}, s.explainAPIError(err, "list programs")
	}
	want := strings.TrimSpace(s.opts.program)
	if want == "" {
		if len(programs) == 1 {
			return programs[0], nil
		}
		return apiclient.Program{}, userErrorf("--program is required: the token sees %d programs (%s)", len(programs), programNames(programs))
	}
	if id, err := strconv.ParseInt(want, 10, 64); err == nil {
		for _, p := range programs {
			if p.ID == id {
				return p, nil
			}
		}
	}
	var byName []apiclient.Program
	for _, p := range programs {
		if p.Name == want {
			byName = append(byName, p)
		}
	}
	if len(byName) == 0 {
		for _, p := range programs {
			if strings.EqualFold(p.Name, want) {
				byName = append(byName, p)
			}
		}
	}
	switch len(byName) {
	case 1:
		return byName[0], nil
	case 0:
		return apiclient.Program{}, userErrorf("no program %q among the %d the token's user may see (%s)", want, len(programs), programNames(programs))
	default:
		return apiclient.Program{}, userErrorf("%d programs are named %q: give --program by id (%s)", len(byName), want, programNames(byName))
	}
}

func programNames(ps []apiclient.Program) string {
	if len(ps) == 0 {
		return "none: is the user a member of a program?"
	}
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d %q", p.ID, p.Name))
	}
	return strings.Join(out, ", ")
}

func (s *submitter) resolveHost(ctx context.Context) (apiclient.Host, error) {
	hosts, err := s.api.Hosts(ctx, s.program.ID)
	if err != nil {
		return apiclient.Host{}, s.explainAPIError(err, "list lab hosts")
	}
	want := strings.TrimSpace(s.opts.host)
	var found []apiclient.Host
	for _, h := range hosts {
		if h.Name == want {
			found = append(found, h)
		}
	}
	if len(found) == 0 {
		if id, err := strconv.ParseInt(want, 10, 64); err == nil {
			for _, h := range hosts {
				if h.ID == id {
					found = append(found, h)
				}
			}
		}
	}
	if len(found) == 0 {
		var names []string
		for _, h := range hosts {
			names = append(names, fmt.Sprintf("%d %q", h.ID, h.Name))
		}
		if len(names) == 0 {
			names = []string{"none"}
		}
		return apiclient.Host{}, userErrorf("no lab host %q in program %q (hosts: %s)", want, s.program.Name, strings.Join(names, ", "))
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
func (s *submitter) specVersionByID(ctx context.Context, kind apiclient.SpecKind, noun string, id int64) (apiclient.SpecVersion, error) {
	sv, err := s.api.SpecVersionByID(ctx, s.program.ID, kind, id)
	if apiclient.IsNotFound(err) {
		return sv, userErrorf("no %s version with id %d in program %q", noun, id, s.program.Name)
	}
	if err != nil {
		return sv, s.explainAPIError(err, fmt.Sprintf("load %s version %d", noun, id))
	}
	return sv, nil
}

func (s *submitter) resolveSpec(ctx context.Context, kind apiclient.SpecKind, noun, ref, idFlag string) (apiclient.SpecVersion, error) {
	name, version, err := parseSpecRef(ref)
	if err != nil {
		return apiclient.SpecVersion{}, userErrorf("%s: %v", noun, err)
	}
	specs, err := s.api.Specs(ctx, s.program.ID, kind)
	if err != nil {
		return apiclient.SpecVersion{}, s.explainAPIError(err, "list "+noun+"s")
	}
	var found []apiclient.Spec
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
		return apiclient.SpecVersion{}, userErrorf("no %s named %q in program %q (%ss: %s)", noun, name, s.program.Name, noun, strings.Join(names, ", "))
	case len(found) > 1:
		return apiclient.SpecVersion{}, userErrorf("%d %ss are named %q in program %q: choose one by version id with %s", len(found), noun, name, s.program.Name, idFlag)
	}
	sp := found[0]
	if version == 0 {
		version = sp.LatestVersion
	}
	if version > sp.LatestVersion {
		return apiclient.SpecVersion{}, userErrorf("%s %q has versions v1 to v%d, not v%d", noun, sp.Name, sp.LatestVersion, version)
	}
	sv, err := s.api.SpecVersion(ctx, s.program.ID, kind, sp.ID, version)
	if err != nil {
		return sv, s.explainAPIError(err, fmt.Sprintf("load %s %q v%d", noun, sp.Name, version))
	}
	return sv, nil
}

// submit posts the run request.
func (s *submitter) submit(ctx context.Context, req apiclient.RunRequest) error {
	// The request carries a key of its own, so that sending it again after
	// a lost answer gets the run it started instead of a second run.
	key, err := apiclient.NewIdempotencyKey("accord-submit-")
	if err != nil {
		return err
	}
	var outageSince time.Time
	for {
		var run apiclient.Run
		run, err = s.api.CreateRun(ctx, s.program.ID, req, key)
		if err == nil {
			s.run = run
			break
		}
		if !apiclient.IsTransient(err) || ctx.Err() != nil {
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
		var se *apiclient.StatusError
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
	var nj *apiclient.NotJSONError
	if errors.As(err, &nj) {
		return fmt.Errorf("%s: %w: is --server the Accord server?", doing, err)
	}
	var se *apiclient.StatusError
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
		r, err := s.api.Run(ctx, s.program.ID, s.run.ID)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			now := s.now()
			if outageSince.IsZero() {
				outageSince = now
			}
			if !apiclient.IsTransient(err) || now.Sub(outageSince) > outageTolerance {
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
		ev, err := s.api.Evaluation(ctx, s.program.ID, s.run.ID)
		if err != nil {
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
		code = ExitError
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
		return ExitPass // "" only for a finished run without a gate set
	case acceptance.Fail:
		return ExitFail
	case acceptance.Inconclusive, acceptance.Incomparable:
		return ExitUndecided
	}
	return ExitError
}

// downloadReport fetches the signed bundle. Signing follows the verdict,
// so a 404 is retried for --report-wait before it counts as "no signed
// report yet" (not an error unless --require-report).
func (s *submitter) downloadReport(ctx context.Context) error {
	deadline := s.now().Add(s.opts.reportWait)
	for {
		err := s.fetchReport(ctx)
		var se *apiclient.StatusError
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
	rep, err := s.api.OpenReport(ctx, s.program.ID, s.run.ID)
	if err != nil {
		return err
	}
	defer rep.Body.Close()
	path := rep.Path
	dir := filepath.Dir(s.opts.report)
	tmp, err := os.CreateTemp(dir, ".accord-report-*")
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), rep.Body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("GET %s: save to %s: %w", path, s.opts.report, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if want := strings.ToLower(strings.TrimSpace(rep.SHA256)); want != "" && want != sum {
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
