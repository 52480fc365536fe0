package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/attest"
	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/internal/testparallel"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/store/storetest"
	"github.com/accordlab/accord/web"
)

func TestMain(m *testing.M) {
	// Most tests here wait for runs on the lab host.
	testparallel.Default(4)
	code := m.Run()
	sshtest.RemoveBuild()
	os.Exit(code)
}

// testBundle is one Accord installation (database, River, runner) and one
// lab host (a real sshd on loopback) with a program around them.
type testBundle struct {
	pool      *pgxpool.Pool
	store     *store.Store
	deps      Deps
	river     *river.Client[pgx.Tx]
	sshd      *sshtest.SSHD
	secret    []byte
	programID int64
	hostID    int64
	remote    string // the runner's folder on the host
	work      string // a folder on the host for fio targets
	proxy     *sshtest.Proxy
}

type setupOpts struct {
	viaProxy    bool // reach the host through a fault proxy (b.proxy)
	noRiver     bool // start no River client (the test starts its own)
	leaseTTL    time.Duration
	budget      time.Duration // attempt budget
	rescueAfter time.Duration
	keepalive   time.Duration
	sshdConfig  []string // lines for the lab host's sshd_config (they win over the defaults)
	// sshd and remote make another installation (its own database) that
	// drives the same lab host, its runs in the folder remote.
	sshd   *sshtest.SSHD
	remote string
}

func quietLogger() *slog.Logger {
	out := io.Discard
	if os.Getenv("ACCORD_TEST_LOG") != "" {
		out = os.Stderr
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func setup(t testing.TB, opts ...setupOpts) *testBundle {
	t.Helper()
	var o setupOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	ctx := context.Background()
	b := &testBundle{pool: storetest.NewPool(t)}
	b.store = store.New(b.pool)
	b.sshd = o.sshd
	if b.sshd == nil {
		b.sshd = sshtest.StartSSHD(t, sshtest.Options{ExtraConfig: o.sshdConfig})
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	// The secret as a key file holds it: hex text (a worker process started
	// by a test reads the same file).
	b.secret = []byte(hex.EncodeToString(raw))
	sealer, err := runners.NewSealer(b.secret)
	require.NoError(t, err)
	b.remote = o.remote
	if b.remote == "" {
		b.remote = t.TempDir()
	}
	// The probe is where an earlier run would have left it: these tests
	// are not about its upload (runners/sshrun's are).
	sshtest.SeedProbe(t, b.remote)
	b.work = t.TempDir()
	keepalive := o.keepalive
	if keepalive == 0 {
		keepalive = time.Second
	}
	b.deps = Deps{
		Log: quietLogger(), Store: b.store, Sealer: sealer, Holder: "test/" + t.Name(), Version: "test",
		LeaseTTL: o.leaseTTL, AttemptBudget: o.budget, Report: web.RenderReport,
		// Hook servers listen on loopback, which only an allow-list opens.
		Egress: egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, nil),
		Runner: runners.Config{
			Options: sshrun.Options{RemoteBase: b.remote, KeepaliveInterval: keepalive, KeepaliveCountMax: 2, HandshakeTimeout: 5 * time.Second},
			Backoff: sshrun.Backoff{Initial: 200 * time.Millisecond, Max: time.Second, Attempts: 8},
			Probe:   sshrun.ProbeSource{File: sshtest.BuildAccord(t)},
			Limits:  sshrun.Limits{TempDir: t.TempDir()},
		},
	}
	b.deps.Keyring, err = attest.OpenKeyring(t.TempDir(), attest.KeyringOptions{})
	require.NoError(t, err)
	if b.deps.LeaseTTL == 0 {
		b.deps.LeaseTTL = 6 * time.Second
	}

	vendor, err := b.store.CreateOrganization(ctx, "Vendor", "vendor")
	require.NoError(t, err)
	customer, err := b.store.CreateOrganization(ctx, "Customer", "customer")
	require.NoError(t, err)
	b.programID, err = b.store.CreateProgram(ctx, "P", "", vendor, customer, nil)
	require.NoError(t, err)

	addr, port := b.sshd.Addr, b.sshd.Port
	if o.viaProxy {
		b.proxy = sshtest.StartProxy(t, b.sshd.HostPort())
		addr, port = b.proxy.Addr, b.proxy.Port
	}
	// The tests' fio files are in b.work, the host's scratch folder.
	h := store.NewHost{Name: "lab", Address: addr, Port: port, Username: b.sshd.User, AuthMethod: "key", PublicKey: "test", WritePlaces: []string{b.work}}
	b.hostID, err = b.store.CreateHost(ctx, b.programID, h)
	require.NoError(t, err)
	sealed, err := sealer.Seal(b.sshd.ClientKeyPEM, labhost.SealLabel(b.hostID))
	require.NoError(t, err)
	require.NoError(t, b.store.SetHostSealedKey(ctx, b.hostID, sealed))
	require.NoError(t, b.store.PinHostKeys(ctx, b.programID, b.hostID, sshrun.AuthorizedKey(b.sshd.HostKey), sshrun.Fingerprint(b.sshd.HostKey), nil))

	if !o.noRiver {
		b.river = b.startRiver(t, o.rescueAfter)
	}
	return b
}

// startRiver starts a River client working every queue with this bundle's
// workers, stopped when the test ends.
func (b *testBundle) startRiver(t testing.TB, rescueAfter time.Duration) *river.Client[pgx.Tx] {
	t.Helper()
	cfg := &river.Config{
		Logger:            b.deps.Log,
		Queues:            map[string]river.QueueConfig{QueueDefault: {MaxWorkers: 4}, QueueRuns: {MaxWorkers: 8}, QueueReports: {MaxWorkers: 2}},
		Workers:           Register(b.deps),
		FetchCooldown:     20 * time.Millisecond,
		FetchPollInterval: 100 * time.Millisecond,
		TestOnly:          true,
	}
	if rescueAfter > 0 {
		cfg.RescueStuckJobsAfter = rescueAfter
		cfg.JobTimeout = rescueAfter
	}
	client, err := river.NewClient(riverpgxv5.New(b.pool), cfg)
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(ctx)
	})
	return client
}

// quickProfile pauses, then reads a small file with fio for a second.
func (b *testBundle) quickProfile(pause time.Duration) acceptance.ProfileSpec {
	return acceptance.ProfileSpec{
		Name: "quick read", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe},
		Repetitions: 1,
		Steps: []acceptance.StepSpec{
			{Name: "settle", Kind: acceptance.StepPause, Pause: &acceptance.PauseStep{Duration: acceptance.Duration(pause)}},
			{Name: "read", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: "randread", BlockSize: 4 << 10, IODepth: 1, NumJobs: 1,
				Size: 16 << 20, Runtime: acceptance.Duration(time.Second), IOEngine: "psync", Target: filepath.Join(b.work, "fio.dat")}},
		},
	}.Normalized()
}

func quickGates() acceptance.GateSetSpec {
	return acceptance.GateSetSpec{Name: "quick gates", Criteria: []acceptance.Criterion{{
		Name: "read-latency", Metric: acceptance.MetricReadCLat, Statistic: acceptance.StatP99, Mode: acceptance.Absolute,
		Comparator: acceptance.LessOrEqual, Threshold: 1, Unit: "s", Severity: acceptance.Blocking,
	}}}.Normalized()
}

// saveProfile stores a profile version and returns its row id.
func (b *testBundle) saveProfile(t testing.TB, p acceptance.ProfileSpec) int64 {
	t.Helper()
	require.Empty(t, acceptance.ValidateProfile(p))
	canon, err := acceptance.ProfileCanonicalJSON(p)
	require.NoError(t, err)
	digest, err := acceptance.ProfileDigest(p)
	require.NoError(t, err)
	_, v, err := b.store.CreateSpec(context.Background(), store.KindProfile, b.programID, store.NewSpecVersion{Name: p.Name, Spec: canon, Digest: digest})
	require.NoError(t, err)
	return v.ID
}

func (b *testBundle) saveGates(t testing.TB, g acceptance.GateSetSpec) int64 {
	t.Helper()
	require.Empty(t, acceptance.ValidateGateSet(g))
	canon, err := acceptance.GateSetCanonicalJSON(g)
	require.NoError(t, err)
	digest, err := acceptance.GateSetDigest(g)
	require.NoError(t, err)
	_, v, err := b.store.CreateSpec(context.Background(), store.KindGateSet, b.programID, store.NewSpecVersion{Name: g.Name, Spec: canon, Digest: digest})
	require.NoError(t, err)
	return v.ID
}

// submit inserts a run and its River job in one transaction, as the
// handler does.
func (b *testBundle) submit(t testing.TB, client *river.Client[pgx.Tx], profileVersion int64, gates *int64, baseline *int64) int64 {
	t.Helper()
	ctx := context.Background()
	var runID int64
	require.NoError(t, b.store.InTx(ctx, func(tx *store.Store) error {
		var err error
		runID, err = tx.CreateRun(ctx, store.NewRun{ProgramID: b.programID, ProfileVersionID: profileVersion, GateSetVersionID: gates, HostID: b.hostID, BaselineRunID: baseline})
		if err != nil {
			return err
		}
		res, err := client.InsertTx(ctx, tx.Tx(), ExecuteRunArgs{RunID: runID}, nil)
		if err != nil {
			return err
		}
		return tx.SetRunJob(ctx, runID, res.Job.ID)
	}))
	return runID
}

// waitFor polls the run until cond holds.
func (b *testBundle) waitFor(t testing.TB, runID int64, timeout time.Duration, what string, cond func(store.Run) bool) store.Run {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var run store.Run
	for time.Now().Before(deadline) {
		var err error
		run, err = b.store.RunByID(context.Background(), runID)
		require.NoError(t, err)
		if cond(run) {
			return run
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := b.store.RunLogTail(context.Background(), runID, 30)
	lines := ""
	for _, e := range log {
		lines += "\n  " + e.Level + ": " + e.Message
	}
	t.Fatalf("run %d: %s did not happen within %s (state %s, reason %q)%s\nsshd log:\n%s", runID, what, timeout, run.State, run.Reason, lines, b.sshd.Log())
	return run
}

func settled(r store.Run) bool {
	return store.RunFinal(r.State) && (r.Verdict != "" || r.State != store.RunDone || r.GateSetVersionID == nil)
}

// runDir is the run's folder on the host.
func (b *testBundle) runDir(runID int64) string {
	return filepath.Join(b.remote, "runs", jsonInt(runID)+"-1")
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }
