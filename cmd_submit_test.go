package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/attest/attesttest"
	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/internal/freeport"
	"github.com/accordlab/accord/internal/testparallel"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
	"github.com/accordlab/accord/submit"
	"github.com/accordlab/accord/submit/submittest"
	"github.com/accordlab/accord/web/browsertest"
)

// TestMain removes the accord binary sshtest builds as the lab host's probe.
func TestMain(m *testing.M) {
	// Most of this package's tests wait for runs (the demo's, a lab
	// host's): more of them at once than the default.
	testparallel.Default(6)
	code := m.Run()
	sshtest.RemoveBuild()
	browsertest.Close()
	os.Exit(code)
}

// submitBundle is a running Accord (web server and River workers, as
// `accord serve` runs them) with a real sshd lab host, a program, a quick
// profile, gate sets that pass, fail and cannot decide, and API tokens.
type submitBundle struct {
	base      string
	store     *store.Store
	programID int64
	token     string           // engineer: read and run
	viewer    string           // viewer: read and run scopes, but the viewer role
	work      string           // the lab host's folder for fio's file
	versionID map[string]int64 // profile or gate set name → its version 1's id
}

func setupSubmit(t *testing.T) *submitBundle {
	t.Helper()
	ctx := context.Background()
	dbURL := storetest.NewDatabase(t)
	b := &submitBundle{work: t.TempDir(), versionID: map[string]int64{}}

	// The server's secret, as a key file holds it (hex text).
	dataDir := t.TempDir()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	secret := []byte(hex.EncodeToString(raw))
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "secret.key"), append(secret, '\n'), 0o400))

	// serve takes probe binaries from ACCORD_PROBE_DIR by architecture.
	probeDir := t.TempDir()
	require.NoError(t, os.Symlink(sshtest.BuildAccord(t), filepath.Join(probeDir, "accord-linux-amd64")))

	addr := fmt.Sprintf("127.0.0.1:%d", freeport.Port(t))
	b.base = "http://" + addr
	cfg, err := loadConfig(envMap(map[string]string{
		"ACCORD_LISTEN": addr, "ACCORD_BASE_URL": b.base, "DATABASE_URL": dbURL, "ACCORD_DATA_DIR": dataDir,
		"ACCORD_PROBE_DIR": probeDir, "ACCORD_REMOTE_DIR": t.TempDir(), "ACCORD_SHUTDOWN_TIMEOUT": "10s", "ACCORD_DB_MAX_CONNS": "10",
	}))
	require.NoError(t, err)

	srvCtx, stop := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(srvCtx, cfg, quietLog(), true, ready) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve stopped: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})

	pool, err := store.Open(ctx, dbURL, 3)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b.store = store.New(pool)

	vendor, err := b.store.CreateOrganization(ctx, "Array Vendor", "vendor")
	require.NoError(t, err)
	customer, err := b.store.CreateOrganization(ctx, "GPU Customer", "customer")
	require.NoError(t, err)
	b.programID, err = b.store.CreateProgram(ctx, "Array X × GPU farm", "", vendor, customer, nil)
	require.NoError(t, err)
	// A second program the engineer cannot see.
	_, err = b.store.CreateProgram(ctx, "Other", "", vendor, customer, nil)
	require.NoError(t, err)

	keys, err := auth.NewKeys(secret)
	require.NoError(t, err)
	member := func(email string, org int64, role store.Role) string {
		uid, err := b.store.CreateUser(ctx, store.NewUser{Email: email, DisplayName: email, OrganizationID: &org})
		require.NoError(t, err)
		_, err = b.store.SetMember(ctx, b.programID, uid, role)
		require.NoError(t, err)
		now := time.Now()
		tok := store.APIToken{ID: auth.NewID(), UserID: uid, Name: "ci", Scopes: []string{auth.ScopeRead, auth.ScopeRun}, ExpiresAt: now.Add(24 * time.Hour)}
		text, err := keys.Issue(auth.AudienceAPI, uid, tok.ID, tok.Scopes, now, tok.ExpiresAt)
		require.NoError(t, err)
		require.NoError(t, b.store.CreateAPIToken(ctx, tok))
		return text
	}
	b.token = member("eng@vendor.example", vendor, store.RoleEngineer)
	b.viewer = member("view@customer.example", customer, store.RoleViewer)

	// The lab host: a real sshd on loopback, its key sealed under the
	// server's secret and its host key pinned.
	sshd := sshtest.StartSSHD(t, sshtest.Options{})
	hostID, err := b.store.CreateHost(ctx, b.programID, store.NewHost{Name: "lab-1", Address: sshd.Addr, Port: sshd.Port, Username: sshd.User, AuthMethod: "key", PublicKey: "test",
		WritePlaces: []string{b.work}}) // fio's files are in b.work
	require.NoError(t, err)
	sealer, err := runners.NewSealer(secret)
	require.NoError(t, err)
	sealed, err := sealer.Seal(sshd.ClientKeyPEM, labhost.SealLabel(hostID))
	require.NoError(t, err)
	require.NoError(t, b.store.SetHostSealedKey(ctx, hostID, sealed))
	require.NoError(t, b.store.PinHostKeys(ctx, b.programID, hostID, sshrun.AuthorizedKey(sshd.HostKey), sshrun.Fingerprint(sshd.HostKey), nil))

	b.saveProfile(t, b.profile("quick read", 200*time.Millisecond))
	b.saveProfile(t, b.profile("slow read", time.Minute))
	b.saveProfile(t, b.profile("paused read", 4*time.Second))
	b.saveGates(t, gates("latency budget", acceptance.Criterion{Name: "read-latency", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99,
		Mode: acceptance.Absolute, Comparator: acceptance.LessOrEqual, Threshold: 1, Unit: "s", Severity: acceptance.Blocking}))
	b.saveGates(t, gates("impossible latency", acceptance.Criterion{Name: "read-latency", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99,
		Mode: acceptance.Absolute, Comparator: acceptance.LessOrEqual, Threshold: 1, Unit: "us", Severity: acceptance.Blocking}))
	// A rate has one value per repetition: with one repetition no interval
	// can decide it.
	b.saveGates(t, gates("iops floor", acceptance.Criterion{Name: "read-iops", Metric: acceptance.MetricReadIOPS, Statistic: acceptance.StatRate,
		Mode: acceptance.Absolute, Comparator: acceptance.GreaterOrEqual, Threshold: 1, Unit: "IOPS", Severity: acceptance.Blocking}))
	return b
}

// profile pauses, then reads a small file with fio for a second.
func (b *submitBundle) profile(name string, pause time.Duration) acceptance.ProfileSpec {
	return acceptance.ProfileSpec{
		Name: name, Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe},
		Repetitions: 1,
		Steps: []acceptance.StepSpec{
			{Name: "settle", Kind: acceptance.StepPause, Pause: &acceptance.PauseStep{Duration: acceptance.Duration(pause)}},
			{Name: "read", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: "randread", BlockSize: 4 << 10, IODepth: 1, NumJobs: 1,
				Size: 16 << 20, Runtime: acceptance.Duration(time.Second), IOEngine: "psync", Target: filepath.Join(b.work, "fio.dat")}},
		},
	}.Normalized()
}

func gates(name string, c acceptance.Criterion) acceptance.GateSetSpec {
	return acceptance.GateSetSpec{Name: name, Criteria: []acceptance.Criterion{c}}.Normalized()
}

func (b *submitBundle) saveProfile(t *testing.T, p acceptance.ProfileSpec) {
	t.Helper()
	require.Empty(t, acceptance.ValidateProfile(p))
	canon, err := acceptance.ProfileCanonicalJSON(p)
	require.NoError(t, err)
	digest, err := acceptance.ProfileDigest(p)
	require.NoError(t, err)
	_, sv, err := b.store.CreateSpec(context.Background(), store.KindProfile, b.programID, store.NewSpecVersion{Name: p.Name, Spec: canon, Digest: digest})
	require.NoError(t, err)
	b.versionID[p.Name] = sv.ID
}

func (b *submitBundle) saveGates(t *testing.T, g acceptance.GateSetSpec) {
	t.Helper()
	require.Empty(t, acceptance.ValidateGateSet(g))
	canon, err := acceptance.GateSetCanonicalJSON(g)
	require.NoError(t, err)
	digest, err := acceptance.GateSetDigest(g)
	require.NoError(t, err)
	_, sv, err := b.store.CreateSpec(context.Background(), store.KindGateSet, b.programID, store.NewSpecVersion{Name: g.Name, Spec: canon, Digest: digest})
	require.NoError(t, err)
	b.versionID[g.Name] = sv.ID
}

type submitResult struct {
	code           int
	stdout, stderr string
}

// submit runs `accord submit` with the server and token in the
// environment, as a pipeline would.
func (b *submitBundle) submit(t *testing.T, ctx context.Context, token string, args ...string) submitResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := envMap(map[string]string{"ACCORD_SERVER": b.base, "ACCORD_TOKEN": token})
	code := cmdSubmit(ctx, append([]string{"--poll", "200ms"}, args...), env, &stdout, &stderr)
	r := submitResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
	require.NotContains(t, r.stdout+r.stderr, token, "the token is never printed")
	if os.Getenv("SHOWSUBMIT") != "" {
		t.Logf("%s", r)
	}
	return r
}

func (r submitResult) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

func TestEndToEndSubmitFollowsRunsToTheirVerdict(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("xmllint"); err != nil {
		t.Fatal("xmllint is needed to validate JUnit XML: apt-get install libxml2-utils")
	}
	b := setupSubmit(t)
	ctx := context.Background()
	dir := t.TempDir()
	// The loopback lab host has no NVMe controller: its blocking readiness
	// checks fail, and the pipeline confirms it runs anyway.
	common := []string{"--program", "Array X × GPU farm", "--host", "lab-1", "--report-wait", "30s", "--confirm-readiness"}

	t.Run("pass on a terminal", func(t *testing.T) {
		junit, report := filepath.Join(dir, "pass.xml"), filepath.Join(dir, "pass.tar.gz")
		r := b.submit(t, ctx, b.token, append(common, "--profile", "quick read@v1", "--gate-set", "latency budget", "--label", "commit 1a2b",
			"--progress", "tty", "--junit", junit, "--report", report, "--require-report")...)
		require.Equal(t, submit.ExitPass, r.code, r)

		// One line redrawn in place, with a progress bar.
		require.Contains(t, r.stderr, "\r\x1b[2K", r)
		require.Regexp(t, `\r\x1b\[2K\[\d+s\] running +\[[#-]{20}\] +\d+%  Step `, r.stderr)
		require.Contains(t, r.stderr, "submitted run")

		require.Regexp(t, `(?m)^PASS  run \d+ · quick read v1 × lab-1 · "commit 1a2b" · gate set latency budget v1$`, r.stdout)
		require.Regexp(t, `(?m)^  PASS +read-latency  read_clat p99 <= 1 s$`, r.stdout)
		require.Regexp(t, `(?m)^report: `+regexp.QuoteMeta(report)+` \(\d+ bytes, sha256 [0-9a-f]{64}\)$`, r.stdout)
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(b.base)+`/programs/\d+/runs/\d+$`, r.stdout)

		// The signed report is the server's bundle, byte for byte.
		bundle, err := os.ReadFile(report)
		require.NoError(t, err)
		sum := sha256.Sum256(bundle)
		require.Contains(t, r.stdout, hex.EncodeToString(sum[:]))
		_, err = gzip.NewReader(bytes.NewReader(bundle))
		require.NoError(t, err)

		doc := submittest.ReadJUnit(t, junit)
		s := doc.Suites[0]
		require.Equal(t, "quick read v1 × lab-1", s.Name)
		require.Equal(t, 1, s.Tests)
		require.Zero(t, s.Failures+s.Errors+s.Skipped)
		require.Len(t, s.Cases, 1)
		require.Equal(t, "read-latency", s.Cases[0].Name)
		require.Equal(t, "latency budget v1", s.Cases[0].Classname)
		require.Nil(t, s.Cases[0].Failure)
		require.Contains(t, s.Cases[0].SystemOut, "read_clat p99 <= 1 s")
		require.Equal(t, "PASS", doc.Prop("accord.verdict"))
		require.Regexp(t, `^\d+$`, doc.Prop("accord.run_id"))
		require.Contains(t, doc.Prop("accord.url"), "/runs/"+doc.Prop("accord.run_id"))
		require.Regexp(t, `^sha256:[0-9a-f]{64}$`, doc.Prop("accord.evaluation_digest"))
		require.NotEmpty(t, doc.Prop("accord.candidate_digest"))
		require.Equal(t, hex.EncodeToString(sum[:]), doc.Prop("accord.report_sha256"))
		// Timestamps and durations from the run.
		require.NotEmpty(t, s.Timestamp)
		require.NotEqual(t, "0.000", s.Time, "the suite lasts as long as the run")
	})

	t.Run("fail in a CI log", func(t *testing.T) {
		// Versions named by id, as a pipeline that pins them would.
		junit := filepath.Join(dir, "fail.xml")
		r := b.submit(t, ctx, b.token, append(common, "--profile-version", fmt.Sprint(b.versionID["quick read"]),
			"--gate-set-version", fmt.Sprint(b.versionID["impossible latency"]), "--progress", "plain", "--junit", junit)...)
		require.Equal(t, submit.ExitFail, r.code, r)
		require.NotContains(t, r.stderr, "\r", "no redrawing in a log")
		require.Regexp(t, `(?m)^\[\d+s\] run \d+ running \d+%: `, r.stderr)
		require.Regexp(t, `(?m)^FAIL  run \d+ · quick read v1 × lab-1 · gate set impossible latency v1$`, r.stdout)
		require.Regexp(t, `(?m)^  FAIL +read-latency  read_clat p99 <= 1 us$`, r.stdout)

		doc := submittest.ReadJUnit(t, junit)
		s := doc.Suites[0]
		require.Equal(t, 1, s.Failures)
		require.Equal(t, 1, doc.Failures)
		f := s.Cases[0].Failure
		require.NotNil(t, f)
		require.Equal(t, "FAIL", f.Type)
		require.Contains(t, f.Message, "read_clat p99 <= 1 us")
		require.NotEmpty(t, strings.TrimSpace(f.Text), "the failure carries the explanation")
		require.Contains(t, r.stdout, strings.TrimSpace(strings.Split(f.Text, "\n")[0]), "the same explanation on the terminal")
		require.Equal(t, "FAIL", doc.Prop("accord.verdict"))
	})

	t.Run("inconclusive", func(t *testing.T) {
		junit := filepath.Join(dir, "inconclusive.xml")
		r := b.submit(t, ctx, b.token, append(common, "--profile", "quick read", "--gate-set", "iops floor@v1", "--progress", "off", "--junit", junit)...)
		require.Equal(t, submit.ExitUndecided, r.code, r)
		require.Empty(t, r.stderr, "--progress off")
		require.Regexp(t, `(?m)^INCONCLUSIVE  run \d+ `, r.stdout)
		require.Contains(t, r.stdout, "at least 2", "the explanation says what would decide")

		doc := submittest.ReadJUnit(t, junit)
		s := doc.Suites[0]
		require.Equal(t, 1, s.Skipped)
		require.Zero(t, s.Failures)
		require.NotNil(t, s.Cases[0].Skipped)
		require.Contains(t, s.Cases[0].Skipped.Message, "INCONCLUSIVE")
		require.Equal(t, "INCONCLUSIVE", doc.Prop("accord.verdict"))
	})

	t.Run("errors", func(t *testing.T) {
		// Errors before anything is submitted still leave a JUnit report
		// with the error, so the pipeline shows why.
		junit := filepath.Join(dir, "error.xml")
		r := b.submit(t, ctx, "not-a-token", append(common, "--profile", "quick read", "--junit", junit)...)
		require.Equal(t, submit.ExitError, r.code, r)
		require.Contains(t, r.stderr, "accord submit: the server refused the API token (HTTP 401")
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one clear line:\n%s", r.stderr)
		doc := submittest.ReadJUnit(t, junit)
		require.Equal(t, 1, doc.Errors)
		require.Contains(t, doc.Suites[0].Cases[0].Error.Message, "refused the API token")

		r = b.submit(t, ctx, b.token, append(common, "--profile", "no such profile")...)
		require.Equal(t, submit.ExitError, r.code, r)
		require.Contains(t, r.stderr, `accord submit: no profile named "no such profile" in program "Array X × GPU farm" (profiles: `)

		// A version id the program does not have is refused before
		// anything is submitted.
		r = b.submit(t, ctx, b.token, append(common, "--profile-version", "999999")...)
		require.Equal(t, submit.ExitError, r.code, r)
		require.Contains(t, r.stderr, `accord submit: no profile version with id 999999 in program "Array X × GPU farm"`)
		r = b.submit(t, ctx, b.token, append(common, "--profile", "quick read", "--gate-set-version", "999998")...)
		require.Equal(t, submit.ExitError, r.code, r)
		require.Contains(t, r.stderr, `no gate set version with id 999998`)

		r = b.submit(t, ctx, b.token, append(common, "--profile", "quick read@v7")...)
		require.Equal(t, submit.ExitError, r.code, r)
		require.Contains(t, r.stderr, `profile "quick read" has versions v1 to v1, not v7`)

		r = b.submit(t, ctx, b.token, "--program", "Other", "--host", "lab-1", "--profile", "quick read")
		require.Equal(t, submit.ExitError, r.code, r)
		require.Contains(t, r.stderr, `no program "Other"`)

		r = b.submit(t, ctx, b.token, append(common, "--profile", "quick read", "--host", "lab-9")...)
		require.Equal(t, submit.ExitError, r.code, r)
		require.Contains(t, r.stderr, `no lab host "lab-9"`)

		// The server's own validation comes back with the flag to fix.
		r = b.submit(t, ctx, b.token, append(common, "--profile", "quick read", "--baseline", "999999")...)
		require.Equal(t, submit.ExitError, r.code, r)
		require.Contains(t, r.stderr, "the server refused the run: --baseline: ")

		r = b.submit(t, ctx, b.viewer, append(common, "--profile", "quick read")...)
		require.Equal(t, submit.ExitError, r.code, r)
		require.Contains(t, r.stderr, "HTTP 403")

		r = b.submit(t, ctx, b.token, "--profile", "quick read")
		require.Equal(t, submit.ExitError, r.code, r)
		require.Contains(t, r.stderr, "--host NAME or ID is required")
	})

	t.Run("outage while following", func(t *testing.T) {
		// The pipeline reaches the server through a proxy that goes away
		// for a while during the run, as in a server restart.
		target := strings.TrimPrefix(b.base, "http://")
		proxy := newTCPProxy(t, target)
		w := &lockedBuffer{}
		var out bytes.Buffer
		exited := make(chan int, 1)
		go func() {
			env := envMap(map[string]string{"ACCORD_SERVER": "http://" + proxy.addr, "ACCORD_TOKEN": b.token})
			exited <- cmdSubmit(ctx, append([]string{"--poll", "200ms", "--progress", "plain"},
				append(common, "--profile", "paused read", "--gate-set", "latency budget")...), env, &out, w)
		}()
		require.Eventually(t, func() bool { return strings.Contains(w.String(), " running ") }, time.Minute, 50*time.Millisecond, "the run starts:\n%s", w.String())
		proxy.stop()
		require.Eventually(t, func() bool { return strings.Contains(w.String(), "progress request failed, retrying") }, 10*time.Second, 50*time.Millisecond)
		time.Sleep(time.Second)
		proxy.start(t, proxy.addr)
		select {
		case code := <-exited:
			require.Equal(t, submit.ExitPass, code, "%s\n%s", out.String(), w.String())
		case <-time.After(time.Minute):
			t.Fatalf("accord submit did not finish:\n%s", w.String())
		}
		require.Contains(t, w.String(), "the server answers again after ")
		require.Equal(t, 1, strings.Count(w.String(), "progress request failed"), "one line per outage, not per poll:\n%s", w.String())
		require.Regexp(t, `(?m)^PASS  run \d+ · paused read v1 × lab-1`, out.String())
	})

	t.Run("the answer to the submission is lost", func(t *testing.T) {
		// A proxy passes the first run request on to the server but
		// answers the pipeline 502, as when a connection breaks after the
		// server acted. Sent again with the same key, it gets that run.
		backend, err := url.Parse(b.base)
		require.NoError(t, err)
		forward := httputil.NewSingleHostReverseProxy(backend)
		var mu sync.Mutex
		var keys []string
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/runs") {
				forward.ServeHTTP(w, r)
				return
			}
			mu.Lock()
			keys = append(keys, r.Header.Get("Idempotency-Key"))
			first := len(keys) == 1
			mu.Unlock()
			if !first {
				forward.ServeHTTP(w, r)
				return
			}
			lost := httptest.NewRecorder()
			forward.ServeHTTP(lost, r)
			if lost.Code != http.StatusCreated {
				t.Errorf("the server answered the first run request %d: %s", lost.Code, lost.Body.String())
			}
			http.Error(w, "upstream connection reset", http.StatusBadGateway)
		}))
		defer proxy.Close()
		var stdout, stderr bytes.Buffer
		env := envMap(map[string]string{"ACCORD_SERVER": proxy.URL, "ACCORD_TOKEN": b.token})
		code := cmdSubmit(ctx, append([]string{"--poll", "200ms", "--progress", "plain"},
			append(common, "--profile", "quick read", "--gate-set", "latency budget", "--label", "answer lost")...), env, &stdout, &stderr)
		require.Equal(t, submit.ExitPass, code, "%s\n%s", stdout.String(), stderr.String())
		require.Contains(t, stderr.String(), "submitting the run failed, sending it again (same Idempotency-Key)")
		require.Len(t, keys, 2)
		require.Regexp(t, `^accord-submit-[0-9a-f]{32}$`, keys[0])
		require.Equal(t, keys[0], keys[1])
		var n int
		require.NoError(t, b.store.Pool.QueryRow(ctx, `SELECT count(*) FROM runs WHERE label = 'answer lost'`).Scan(&n))
		require.Equal(t, 1, n, "one run, not two")
	})

	t.Run("no gate set, signed as it is", func(t *testing.T) {
		// A run without a gate set is not judged, and is signed as it is:
		// its bundle verifies against the installation's published keys,
		// holds profile.json and no gate set, and sha256sum of profile.json
		// is the profile version's digest.
		report := filepath.Join(dir, "ungated.tar.gz")
		r := b.submit(t, ctx, b.token, append(common, "--profile", "quick read", "--report", report, "--require-report", "--progress", "off")...)
		require.Equal(t, submit.ExitPass, r.code, r)
		require.Contains(t, r.stderr, "no --gate-set: the run will get no verdict")
		require.Regexp(t, `(?m)^DONE  run \d+ · quick read v1 × lab-1: finished, no gate set, no verdict$`, r.stdout)
		resp, err := http.Get(b.base + "/.well-known/accord/keys.json")
		require.NoError(t, err)
		keysJSON, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		keysFile := filepath.Join(dir, "keys.json")
		require.NoError(t, os.WriteFile(keysFile, keysJSON, 0o600))
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, cmdVerify(ctx, []string{report, "--keys", keysFile}, &stdout, &stderr), stderr.String())
		require.Contains(t, stdout.String(), "profile.json hashes to the digest the benchmark statement names (the run had no gate set)")
		bundle, err := os.ReadFile(report)
		require.NoError(t, err)
		unpacked := attesttest.Extract(t, bundle)
		require.NoFileExists(t, filepath.Join(unpacked, attest.FileGateSet))
		sum, err := attesttest.Run(unpacked, "sha256sum "+attest.FileProfile)
		require.NoError(t, err)
		var digest string
		require.NoError(t, b.store.Pool.QueryRow(ctx, `SELECT digest FROM profile_versions WHERE id = $1`, b.versionID["quick read"]).Scan(&digest))
		require.Equal(t, strings.TrimPrefix(digest, "sha256:")+"  "+attest.FileProfile+"\n", sum)
		out, err := attesttest.Run(unpacked, attest.RunAllCommand)
		require.NoError(t, err)
		require.True(t, strings.HasSuffix(out, "All checks passed.\n"), out)
	})

	t.Run("no signed report yet", func(t *testing.T) {
		// While no report can be stored (a test transaction holds
		// run_reports in SHARE mode: reads go on, the signing's insert
		// waits), the report's 404 is said plainly and does not change the
		// exit code...
		hold, err := b.store.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = hold.Rollback(ctx) }()
		_, err = hold.Exec(ctx, `LOCK TABLE run_reports IN SHARE MODE`)
		require.NoError(t, err)
		report := filepath.Join(dir, "none.tar.gz")
		r := b.submit(t, ctx, b.token, append(common, "--profile", "quick read", "--report", report, "--report-wait", "1s", "--progress", "off")...)
		require.Equal(t, submit.ExitPass, r.code, r)
		require.Regexp(t, `(?m)^DONE  run \d+ · quick read v1 × lab-1: finished, no gate set, no verdict$`, r.stdout)
		require.Contains(t, r.stdout, "report: no signed report yet (the server answered 404 for /api/v1/programs/")
		require.NoFileExists(t, report)

		// ...unless the pipeline requires the report.
		junit := filepath.Join(dir, "none.xml")
		r = b.submit(t, ctx, b.token, append(common, "--profile", "quick read", "--report", report, "--report-wait", "1s", "--require-report",
			"--progress", "off", "--junit", junit)...)
		require.Equal(t, submit.ExitError, r.code, r)
		require.Regexp(t, `accord submit: no signed report for run \d+ \(--require-report\): no signed report yet`, r.stderr)
		doc := submittest.ReadJUnit(t, junit)
		require.Equal(t, 2, doc.Tests, "the run and the missing report")
		require.Equal(t, 1, doc.Errors)
		require.Equal(t, "signed report", doc.Suites[0].Cases[1].Name)
		require.Equal(t, "done", doc.Prop("accord.state"))
	})

	// Stopping early: --timeout (with --cancel-on-interrupt the run is
	// cancelled on the server), then Ctrl-C (the run goes on).
	t.Run("timeout cancels when asked", func(t *testing.T) {
		junit := filepath.Join(dir, "timeout.xml")
		r := b.submit(t, ctx, b.token, append(common, "--profile", "slow read", "--timeout", "4s", "--cancel-on-interrupt", "--junit", junit, "--progress", "plain")...)
		require.Equal(t, submit.ExitError, r.code, r)
		require.Regexp(t, `accord submit: --timeout 4s reached: cancelled run (\d+)`, r.stderr)
		doc := submittest.ReadJUnit(t, junit)
		require.Equal(t, 1, doc.Errors)
		runID := doc.Prop("accord.run_id")
		require.NotEmpty(t, runID)
		b.waitForState(t, runID, store.RunCancelled)
		// The cancel went through the API's handler to the host: the probe
		// was stopped there and nothing of the run is left running.
		var reason string
		require.NoError(t, b.store.Pool.QueryRow(ctx, `SELECT reason FROM runs WHERE id = $1`, runID).Scan(&reason))
		require.Contains(t, reason, "the probe was stopped")
		require.Eventually(t, func() bool { return len(runProcesses(t, runID)) == 0 }, 10*time.Second, 100*time.Millisecond,
			"no process of run %s is left on the host", runID)
	})

	t.Run("interrupt stops following", func(t *testing.T) {
		ictx, interrupt := context.WithCancel(ctx)
		defer interrupt()
		var out bytes.Buffer
		w := &lockedBuffer{}
		exited := make(chan int, 1)
		go func() {
			env := envMap(map[string]string{"ACCORD_SERVER": b.base, "ACCORD_TOKEN": b.token})
			exited <- cmdSubmit(ictx, append([]string{"--poll", "200ms", "--progress", "plain"}, append(common, "--profile", "slow read")...), env, &out, w)
		}()
		deadline := time.After(time.Minute)
		for !strings.Contains(w.String(), " running ") {
			select {
			case code := <-exited:
				t.Fatalf("accord submit exited (%d) before the run started:\n%s", code, w.String())
			case <-deadline:
				t.Fatalf("the run did not start:\n%s", w.String())
			case <-time.After(100 * time.Millisecond):
			}
		}
		interrupt()
		code := <-exited
		require.Equal(t, submit.ExitError, code, w.String())
		require.Regexp(t, `accord submit: interrupted: stopped following run \d+ \(state running\); it continues on the server`, w.String())
		m := regexpFind(`stopped following run (\d+)`, w.String())
		run := b.runState(t, m)
		require.Equal(t, store.RunRunning, run, "Ctrl-C does not cancel the run")
		require.Eventually(t, func() bool { return len(runProcesses(t, m)) > 0 }, 30*time.Second, 100*time.Millisecond,
			"the probe of run %s runs on the host", m)

		// Cancel it through the API, so that nothing outlives the test; the
		// probe is stopped on the host.
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/v1/programs/%d/runs/%s/cancel", b.base, b.programID, m), nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+b.token)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusAccepted, res.StatusCode)
		b.waitForState(t, m, store.RunCancelled)
		require.Eventually(t, func() bool { return len(runProcesses(t, m)) == 0 }, 10*time.Second, 100*time.Millisecond,
			"no process of run %s is left on the host: %v", m, runProcesses(t, m))
	})
}

func (b *submitBundle) runState(t *testing.T, runID string) string {
	t.Helper()
	var id int64
	_, err := fmt.Sscan(runID, &id)
	require.NoError(t, err)
	run, err := b.store.GetRun(context.Background(), b.programID, id)
	require.NoError(t, err)
	return run.State
}

func (b *submitBundle) waitForState(t *testing.T, runID, state string) {
	t.Helper()
	require.Eventually(t, func() bool { return b.runState(t, runID) == state }, 30*time.Second, 100*time.Millisecond, "run %s becomes %s", runID, state)
}

// lockedBuffer is written by the command and read by the test at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func regexpFind(pattern, s string) string {
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if len(m) < 2 {
		return ""
	}
	return m[1]
}

// runProcesses lists the probe's processes of a run on the loopback host.
func runProcesses(t *testing.T, runID string) []string {
	t.Helper()
	return sshtest.Processes(t, " probe ", "/runs/"+runID+"-")
}
