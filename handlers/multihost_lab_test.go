package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/jobs"
	"github.com/accordlab/accord/runners"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web"
)

// multiHostLab is a program with three lab hosts, each a loopback sshd
// with Accord's key sealed and its host key pinned, and River working
// every job as Accord's workers do: a run requested over HTTP runs on the
// hosts for real, and the pages follow it.
type multiHostLab struct {
	*programBundle
	hosts  []int64 // lab-1, lab-2, lab-3
	work   string  // the hosts' scratch folder (one machine: shared)
	remote string  // where runs are kept on the hosts
}

func setupMultiHostLab(t *testing.T) *multiHostLab {
	t.Helper()
	pb := setupProgram(t)
	ctx := context.Background()
	lab := &multiHostLab{programBundle: pb, work: t.TempDir(), remote: t.TempDir()}
	sshtest.SeedProbe(t, lab.remote) // as an earlier run left it: these tests are not about the upload
	for _, name := range []string{"lab-1", "lab-2", "lab-3"} {
		sshd := sshtest.StartSSHD(t, sshtest.Options{})
		id, err := pb.store.CreateHost(ctx, pb.programID, store.NewHost{Name: name, Address: sshd.Addr, Port: sshd.Port, Username: sshd.User, AuthMethod: "key",
			PublicKey: "test", WritePlaces: []string{lab.work}})
		require.NoError(t, err)
		sealed, err := pb.sealer.Seal(sshd.ClientKeyPEM, labhost.SealLabel(id))
		require.NoError(t, err)
		require.NoError(t, pb.store.SetHostSealedKey(ctx, id, sealed))
		require.NoError(t, pb.store.PinHostKeys(ctx, pb.programID, id, sshrun.AuthorizedKey(sshd.HostKey), sshrun.Fingerprint(sshd.HostKey), nil))
		lab.hosts = append(lab.hosts, id)
	}
	deps := jobs.Deps{Log: pb.log, Store: pb.store, Sealer: pb.sealer, Keyring: pb.keyring, Holder: "test/" + t.Name(), Version: "test",
		LeaseTTL: 6 * time.Second, Report: web.RenderReport, Egress: egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, nil),
		Runner: runners.Config{
			// Keepalives at their defaults (5 s, 3 missed): these tests are not
			// about them, and sshd on a loaded machine can be silent for 2 s.
			Options: sshrun.Options{RemoteBase: lab.remote, HandshakeTimeout: 5 * time.Second},
			Backoff: sshrun.Backoff{Initial: 200 * time.Millisecond, Max: time.Second, Attempts: 8},
			Probe:   sshrun.ProbeSource{File: sshtest.BuildAccord(t)},
			Limits:  sshrun.Limits{TempDir: t.TempDir()},
		}}
	workers, err := river.NewClient(riverpgxv5.New(pb.pool), &river.Config{Logger: pb.log,
		Queues:  map[string]river.QueueConfig{jobs.QueueDefault: {MaxWorkers: 4}, jobs.QueueRuns: {MaxWorkers: 4}, jobs.QueueReports: {MaxWorkers: 1}},
		Workers: jobs.Register(deps), FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond, TestOnly: true})
	require.NoError(t, err)
	require.NoError(t, workers.Start(ctx))
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = workers.StopAndCancel(stop)
	})
	return lab
}

// sharedArrayProfile: every host settles, then two readers read and a
// writer writes the shared scratch folder at the same time.
func (lab *multiHostLab) sharedArrayProfile(t *testing.T, settle time.Duration) int64 {
	t.Helper()
	// The readers share one file, laid out before so that neither fio lays
	// it out under the other.
	require.NoError(t, os.WriteFile(filepath.Join(lab.work, "read.dat"), make([]byte, 8<<20), 0o644))
	fio := func(name, rw, file string) acceptance.StepSpec {
		return acceptance.StepSpec{Name: name, Kind: acceptance.StepFio, Group: "load", Fio: &acceptance.FioStep{RW: rw, BlockSize: 4 << 10, IODepth: 1, NumJobs: 1,
			Size: 8 << 20, Runtime: acceptance.Duration(time.Second), IOEngine: "psync", Target: filepath.Join(lab.work, file)}}
	}
	p := acceptance.ProfileSpec{Name: "shared array", Purpose: acceptance.PurposeStorageMicrobench, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe},
		Repetitions: 1,
		Steps: []acceptance.StepSpec{
			{Name: "settle", Kind: acceptance.StepPause, Pause: &acceptance.PauseStep{Duration: acceptance.Duration(settle)}},
			fio("read", "randread", "read.dat"),
			fio("write", "randwrite", "write.dat"),
		},
		Roles: []acceptance.RoleSpec{
			{Name: "readers", Steps: []string{"settle", "read"}, MinHosts: 2},
			{Name: "writer", Steps: []string{"settle", "write"}, MaxHosts: 1},
		},
	}.Normalized()
	_, nv, errs, err := prepareSpec(profileOps, p)
	require.NoError(t, err)
	require.Empty(t, errs)
	_, pv, err := lab.store.CreateSpec(context.Background(), store.KindProfile, lab.programID, nv)
	require.NoError(t, err)
	return pv.ID
}

// request asks for a run of the profile over the API: lab-1 and lab-2
// read, lab-3 writes.
func (lab *multiHostLab) request(t *testing.T, profileVersion int64) int64 {
	t.Helper()
	body, err := json.Marshal(map[string]any{"profile_version_id": profileVersion,
		"roles": map[string]any{"readers": lab.hosts[:2], "writer": lab.hosts[2:]}})
	require.NoError(t, err)
	code, out := lab.api(t, http.MethodPost, fmt.Sprintf("/api/v1/programs/%d/runs", lab.programID), "application/json", body)
	require.Equal(t, http.StatusCreated, code, "%v", out)
	return int64(out["id"].(float64))
}

// waitRun waits until the run satisfies ok; a run that ends without
// satisfying it fails the test at once, saying why it ended.
func (lab *multiHostLab) waitRun(t *testing.T, runID int64, timeout time.Duration, what string, ok func(store.Run) bool) store.Run {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		run, err := lab.store.RunByID(context.Background(), runID)
		require.NoError(t, err)
		switch {
		case ok(run):
			return run
		case store.RunFinal(run.State):
			t.Fatalf("run %d ended %s before %s: %s", runID, run.State, what, run.Reason)
		case time.Now().After(deadline):
			t.Fatalf("run %d: not %s within %s (%s: %s)", runID, what, timeout, run.State, run.Reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hostDir is a multi-host run's folder on a host.
func (lab *multiHostLab) hostDir(runID, hostID int64) string {
	return filepath.Join(lab.remote, "runs", fmt.Sprintf("%d-1-h%d", runID, hostID))
}
