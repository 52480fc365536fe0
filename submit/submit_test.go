package submit

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/apiclient"
	"github.com/accordlab/accord/internal/closedport"
	"github.com/accordlab/accord/submit/submittest"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Flags are checked before anything is sent; each mistake is one line and
// exit 3, and the token never appears.
func TestSubmitRefusesBadFlags(t *testing.T) {
	t.Parallel()
	env := envMap(map[string]string{"ACCORD_SERVER": "http://127.0.0.1:1", "ACCORD_TOKEN": "secret-token-text"})
	cases := map[string]struct {
		args []string
		env  func(string) string
		want string
	}{
		"no server":             {[]string{"--profile", "p", "--host", "h"}, envMap(map[string]string{"ACCORD_TOKEN": "t"}), "--server (or ACCORD_SERVER) is required"},
		"server not http":       {[]string{"--server", "ftp://x", "--profile", "p", "--host", "h"}, env, "--server must be an http(s) URL"},
		"credentials in server": {[]string{"--server", "https://u:pw@x", "--profile", "p", "--host", "h"}, env, "must not carry credentials"},
		"no token":              {[]string{"--profile", "p", "--host", "h"}, envMap(map[string]string{"ACCORD_SERVER": "http://x"}), "an API token is required"},
		"no profile":            {[]string{"--host", "h"}, env, "--profile NAME[@vN] or --profile-version ID is required"},
		"both profiles":         {[]string{"--profile", "p", "--profile-version", "3", "--host", "h"}, env, "not both"},
		"bad version":           {[]string{"--profile", "p@v0", "--host", "h"}, env, "versions start at v1"},
		"no host":               {[]string{"--profile", "p"}, env, "--host NAME or ID is required"},
		"unknown flag":          {[]string{"--profile", "p", "--host", "h", "--colour"}, env, "flag provided but not defined: -colour"},
		"stray argument":        {[]string{"--profile", "p", "--host", "h", "extra"}, env, `unexpected argument "extra"`},
		"report needed":         {[]string{"--profile", "p", "--host", "h", "--require-report"}, env, "--require-report needs --report FILE"},
		"junit mapping":         {[]string{"--profile", "p", "--host", "h", "--junit-undecided", "error"}, env, "--junit-undecided must be skipped or failure"},
		"progress":              {[]string{"--profile", "p", "--host", "h", "--progress", "fancy"}, env, "--progress must be auto, tty, plain or off"},
		"poll":                  {[]string{"--profile", "p", "--host", "h", "--poll", "1ms"}, env, "--poll must be at least 100ms"},
	}
	for name, tc := range cases {
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), tc.args, tc.env, &stdout, &stderr, "test")
		require.Equal(t, ExitError, code, name)
		require.Contains(t, stderr.String(), tc.want, name)
		require.True(t, strings.HasPrefix(stderr.String(), "accord submit: "), name)
		require.NotContains(t, stdout.String()+stderr.String(), "secret-token-text", name)
	}

	// -h documents the flags and the exit codes.
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, Main(context.Background(), []string{"-h"}, env, &stdout, &stderr, "test"))
	for _, want := range []string{"-server", "-token", "-program", "-profile", "-host", "-gate-set", "-baseline", "-label", "-confirm-readiness",
		"-timeout", "-poll", "-report", "-junit", "-cancel-on-interrupt", "2  INCONCLUSIVE or INCOMPARABLE", "3  error"} {
		require.Contains(t, stdout.String(), want)
	}
}

// A server that cannot be reached, or a page that is not the API, is one
// line and exit 3.
func TestSubmitReportsUnreachableAndForeignServers(t *testing.T) {
	t.Parallel()
	closed := "http://" + closedport.Addr(t)

	foreign := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>a wiki</html>")
	})}
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = foreign.Serve(fl) }()
	t.Cleanup(func() { _ = foreign.Close() })

	for server, want := range map[string]string{
		closed:                         "connection refused",
		"http://" + fl.Addr().String(): "answered text/html instead of JSON",
	} {
		var stdout, stderr bytes.Buffer
		env := envMap(map[string]string{"ACCORD_SERVER": server, "ACCORD_TOKEN": "tok"})
		code := Main(context.Background(), []string{"--profile", "p", "--host", "h"}, env, &stdout, &stderr, "test")
		require.Equal(t, ExitError, code)
		require.Contains(t, stderr.String(), want)
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), stderr.String())
	}
}

func TestParseSpecRef(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]struct {
		name    string
		version int
	}{
		"KV-cache lookups":    {"KV-cache lookups", 0},
		"KV-cache lookups@v3": {"KV-cache lookups", 3},
		"p99 budget@2":        {"p99 budget", 2},
		"team@lab":            {"team@lab", 0},
		"a@b@v12":             {"a@b", 12},
		" spaced @v1 ":        {"spaced", 1},
	} {
		name, version, err := parseSpecRef(in)
		require.NoError(t, err, in)
		require.Equal(t, want.name, name, in)
		require.Equal(t, want.version, version, in)
	}
	for _, bad := range []string{"", "@v1", "x@v0", "  "} {
		_, _, err := parseSpecRef(bad)
		require.Error(t, err, bad)
	}
}

func FuzzParseSpecRef(f *testing.F) {
	for _, s := range []string{"name", "name@v3", "a@b", "@v1", "x@v0", "x@-1", "x@+1", "x@v", "x@V7", "é@v٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, version, err := parseSpecRef(s)
		if err != nil {
			return
		}
		if name == "" || version < 0 {
			t.Fatalf("%q: name %q version %d", s, name, version)
		}
		// What it parsed reads back the same.
		ref := name
		if version > 0 {
			ref = fmt.Sprintf("%s@v%d", name, version)
		}
		n2, v2, err := parseSpecRef(ref)
		if err != nil || n2 != name || v2 != version {
			t.Fatalf("%q → %q v%d → %q → %q v%d (%v)", s, name, version, ref, n2, v2, err)
		}
	})
}

// Every verdict's JUnit mapping, with hostile text, against the schema.
func TestJUnitMappingOfEveryVerdict(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse("https://accord.example.com")
	started := time.Date(2025, 3, 1, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	finished := started.Add(95500 * time.Millisecond)
	gid := int64(4)
	ev := &acceptance.Evaluation{EngineVersion: acceptance.EngineVersion, Verdict: acceptance.Fail, Explanation: "read-p99 fails.",
		Inputs: acceptance.EvaluationInputs{Digest: strings.Repeat("a", 64), CandidateDigest: "sha256:c"}}
	crit := func(name string, v acceptance.Verdict, sev acceptance.Severity) acceptance.CriterionResult {
		return acceptance.CriterionResult{Name: name, Metric: "read_clat", Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
			Comparator: acceptance.LessOrEqual, Threshold: 500, ThresholdUnit: "us", Unit: "us", Severity: sev, Verdict: v,
			Explanation: "p99 is 612 µs <&> \"limit\" ]]> 500 µs\x01\xff (n=1200)."}
	}
	ev.Criteria = []acceptance.CriterionResult{
		crit("pass", acceptance.Pass, acceptance.Blocking), crit("fail", acceptance.Fail, acceptance.Blocking),
		crit("inconclusive", acceptance.Inconclusive, acceptance.Blocking), crit("incomparable", acceptance.Incomparable, acceptance.Blocking),
		crit("advisory-fail", acceptance.Fail, acceptance.Advisory),
	}
	for _, undecided := range []string{"skipped", "failure"} {
		s := &submitter{
			opts:    submitOptions{server: u, junitUndecided: undecided},
			program: apiclient.Program{ID: 1, Name: "P"},
			run: apiclient.Run{ID: 7, State: "done", Verdict: "FAIL", Profile: "kv v3", Host: "gpu-07", GateSet: "budget v2", GateSetVersionID: &gid,
				CreatedAt: started.Add(-time.Second), StartedAt: &started, FinishedAt: &finished, URL: "https://accord.example.com/programs/1/runs/7"},
			eval: ev,
		}
		file := filepath.Join(t.TempDir(), "junit.xml")
		require.NoError(t, os.WriteFile(file, s.junitDocument(nil), 0o644))
		doc := submittest.ReadJUnit(t, file)
		suite := doc.Suites[0]
		require.Equal(t, "kv v3 × gpu-07", suite.Name)
		require.Equal(t, "95.500", suite.Time)
		require.Equal(t, "2025-03-01T09:00:00", suite.Timestamp, "UTC")
		require.Equal(t, 5, suite.Tests)
		byName := map[string]int{}
		for i, c := range suite.Cases {
			byName[c.Name] = i
			require.Equal(t, "budget v2", c.Classname)
		}
		cs := suite.Cases
		require.Nil(t, cs[byName["pass"]].Failure)
		require.Nil(t, cs[byName["pass"]].Skipped)
		require.Equal(t, "FAIL", cs[byName["fail"]].Failure.Type)
		require.Contains(t, cs[byName["fail"]].Failure.Text, `<&> "limit" ]]> 500 µs`+"\uFFFD\uFFFD", "kept, or replaced where XML cannot carry it")
		require.NotNil(t, cs[byName["advisory-fail"]].Skipped, "an advisory criterion does not fail the suite")
		require.Contains(t, cs[byName["advisory-fail"]].Skipped.Message, "advisory")
		if undecided == "skipped" {
			require.Equal(t, 1, suite.Failures)
			require.Equal(t, 3, suite.Skipped)
			require.NotNil(t, cs[byName["inconclusive"]].Skipped)
			require.NotNil(t, cs[byName["incomparable"]].Skipped)
		} else {
			require.Equal(t, 3, suite.Failures)
			require.Equal(t, 1, suite.Skipped)
			require.Equal(t, "INCONCLUSIVE", cs[byName["inconclusive"]].Failure.Type)
			require.Equal(t, "INCOMPARABLE", cs[byName["incomparable"]].Failure.Type)
		}
		require.Equal(t, "7", doc.Prop("accord.run_id"))
		require.Equal(t, "FAIL", doc.Prop("accord.verdict"))
		require.Equal(t, strings.Repeat("a", 64), doc.Prop("accord.evaluation_digest"))
	}

	// The schema is not a rubber stamp: a test case without a name, or a
	// negative count, is refused.
	for _, bad := range []string{
		`<testsuites><testsuite name="s" tests="1"><testcase classname="c"/></testsuite></testsuites>`,
		`<testsuites><testsuite name="s" tests="-1"/></testsuites>`,
		`<testsuites><testsuite name="s" tests="1"><testcase name="n"><failure/><skipped/></testcase></testsuite></testsuites>`,
	} {
		file := filepath.Join(t.TempDir(), "bad.xml")
		require.NoError(t, os.WriteFile(file, []byte(bad), 0o644))
		out, err := exec.Command("xmllint", "--noout", "--schema", submittest.SchemaFile(t), file).CombinedOutput()
		var exitErr *exec.ExitError
		require.True(t, errors.As(err, &exitErr), "xmllint refuses %s:\n%s", bad, out)
	}
}

// Whatever text a criterion carries, the JUnit document stays well-formed
// XML and carries the text back (less what XML 1.0 cannot hold).
func FuzzJUnitDocument(f *testing.F) {
	for _, s := range []string{"plain", "a <b> & \"c\"", "]]>", "x]]]]>>y", "\x00\x01\ud7ff", "\xff\xfe", "line\r\nline\rline", "\uFFFE\uFFFF"} {
		f.Add(s, s)
	}
	u, _ := url.Parse("https://accord.example.com")
	f.Fuzz(func(t *testing.T, name, explanation string) {
		gid := int64(1)
		s := &submitter{
			opts: submitOptions{server: u, junitUndecided: "failure"},
			run:  apiclient.Run{ID: 1, State: "done", Profile: name, Host: "h", GateSet: "g v1", GateSetVersionID: &gid},
			eval: &acceptance.Evaluation{Verdict: acceptance.Fail, Explanation: explanation, Criteria: []acceptance.CriterionResult{
				{Name: name, Verdict: acceptance.Fail, Severity: acceptance.Blocking, Explanation: explanation},
			}},
		}
		var doc submittest.JUnit
		if err := xml.Unmarshal(s.junitDocument(nil), &doc); err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		if len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 1 || doc.Suites[0].Cases[0].Failure == nil {
			t.Fatalf("lost the test case: %+v", doc)
		}
		// XML parsers turn line ends into \n.
		norm := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n") }
		if got, want := norm(doc.Suites[0].Cases[0].Failure.Text), norm(xmlText(strings.TrimSpace(explanation))); got != want {
			t.Fatalf("failure text %q, want %q", got, want)
		}
	})
}
