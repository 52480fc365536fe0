package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
)

// throttledDisk puts processes in a blkio cgroup that lets them read the
// disk holding file at bytesPerSec together (cgroup v1's throttle): a
// storage path of a known, shared bandwidth, so that two readers contend
// on it by construction, however fast or busy this machine's own disk
// is. The test is skipped, saying why, where the kernel offers no such
// throttle (not root, no cgroup v1 blkio hierarchy).
func throttledDisk(t *testing.T, file string, bytesPerSec int64) (join func(pid int)) {
	t.Helper()
	const root = "/sys/fs/cgroup/blkio"
	if _, err := os.Stat(filepath.Join(root, "blkio.throttle.read_bps_device")); err != nil || os.Geteuid() != 0 {
		t.Skipf("a shared, rate-limited storage path needs root and cgroup v1's blkio throttle (%s): %v", root, err)
	}
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(file, &st))
	major, minor := uint64(st.Dev>>8)&0xfff|uint64(st.Dev>>32)&^0xfff, uint64(st.Dev)&0xff|uint64(st.Dev>>12)&^0xff
	// A partition's reads are throttled on its whole disk.
	if b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/../dev", major, minor)); err == nil {
		if _, err := os.Stat(fmt.Sprintf("/sys/dev/block/%d:%d/partition", major, minor)); err == nil {
			parts := strings.Split(strings.TrimSpace(string(b)), ":")
			major, _ = strconv.ParseUint(parts[0], 10, 64)
			minor, _ = strconv.ParseUint(parts[1], 10, 64)
		}
	}
	dir := filepath.Join(root, fmt.Sprintf("accord-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	require.NoError(t, os.Mkdir(dir, 0o755))
	t.Cleanup(func() {
		// Whatever is still in it goes back to the root group first.
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, pid := range strings.Fields(string(b)) {
				_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(pid), 0o644)
			}
		}
		_ = os.Remove(dir)
	})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "blkio.throttle.read_bps_device"), fmt.Appendf(nil, "%d:%d %d", major, minor, bytesPerSec), 0o644))
	return func(pid int) {
		require.NotZero(t, pid)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644))
	}
}

// An aggressor fio step reading the emulator's own KV file, in a parallel
// group beside an inference victim, slows the victim's TTFT several
// times over against the same victim alone in the same run, and the
// isolation criterion judges it so. The KV file and everything the run
// starts on the host read through one 16 MB/s path: the emulator reads 8
// blocks of 64 KiB (O_DIRECT, no cache) for every request; beside four
// 64 KiB reads of fio always queued, each of its blocks waits behind
// them (16 ms), whatever the machine's own speed.
func TestAggressorReadingTheKVFileSlowsTheVictim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	kv := filepath.Join(b.work, "kv.bin")
	endpoint, emulatorPID := startEmulatorProcess(t, "--kv-file", kv, "--kv-file-size", "64MiB", "--block-bytes", "64KiB",
		"--block-tokens", "16", "--cache-blocks", "0", "--itl", "1ms", "--prefill-per-token", "0s")
	join := throttledDisk(t, kv, 16<<20)
	join(emulatorPID)
	join(b.sshd.PID())

	victim := func(name, group string) acceptance.StepSpec {
		return acceptance.StepSpec{Name: name, Kind: acceptance.StepInference, Group: group, Inference: &acceptance.InferenceStep{
			Endpoint: endpoint, Model: "emulated", API: "chat",
			// 128 words: 8 full blocks read from the KV file, every prompt
			// its own (no prefix shared, no block cached).
			PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: 128}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 4},
			Load: acceptance.Load{Mode: "concurrency", Concurrency: 1}, Duration: acceptance.Duration(12 * time.Second),
			RequestTimeout: acceptance.Duration(30 * time.Second),
		}}
	}
	profile := acceptance.ProfileSpec{
		Name: "noisy neighbour on the KV file", Purpose: acceptance.PurposeInferenceServing, Storage: acceptance.Storage{Transport: acceptance.TransportEmulated},
		Repetitions: 1,
		Steps: []acceptance.StepSpec{
			victim("victim-alone", ""),
			victim("victim-noisy", "noisy"),
			{Name: "aggressor", Kind: acceptance.StepFio, Group: "noisy", Fio: &acceptance.FioStep{
				RW: "randread", BlockSize: 64 << 10, IODepth: 4, NumJobs: 1, Size: 64 << 20,
				Runtime: acceptance.Duration(14 * time.Second), IOEngine: "libaio", Direct: true, Target: kv}},
		},
	}.Normalized()
	require.NoError(t, profile.Validate())
	// The storage's interference (a TTFT many times larger) dwarfs any delay
	// of the client's own; on a loaded test machine the self-check may still
	// flag the 12 ms level alone (its relative limit is 5 ms), rightly, and
	// that judgement is tested in acceptance. Here the gate set accepts it.
	gates := acceptance.GateSetSpec{Name: "isolation", AcceptClientLimited: true, Criteria: []acceptance.Criterion{{
		Name: "ttft-p50-isolation", Metric: acceptance.MetricTTFT, Statistic: acceptance.StatP50, Mode: acceptance.Isolation,
		Step: "victim-noisy", Reference: "victim-alone", Comparator: acceptance.LessOrEqual, Threshold: 10, Unit: "%", Severity: acceptance.Blocking,
	}}}.Normalized()
	require.Nil(t, acceptance.ValidateGateSetForProfile(gates, profile))
	gv := b.saveGates(t, gates)
	runID := b.submit(t, b.river, b.saveProfile(t, profile), &gv, nil)
	run := b.waitFor(t, runID, 180*time.Second, "run", settled)
	require.Equal(t, store.RunDone, run.State, run.Reason)

	rows, err := b.store.RunMeasurementSummaries(ctx, runID)
	require.NoError(t, err)
	p50 := map[string]float64{}
	for _, m := range rows {
		if m.Metric == acceptance.MetricTTFT {
			p50[m.Step] = m.Summary.P50
			require.Greater(t, m.Summary.N, int64(10), m.Step)
		}
		if m.Metric == acceptance.MetricReadIOPS {
			require.Equal(t, "aggressor", m.Step, "the aggressor's own numbers are kept")
		}
	}
	alone, noisy := p50["victim-alone"], p50["victim-noisy"]
	t.Logf("TTFT p50 alone %.1f ms, beside the aggressor %.1f ms (%.1f×)", alone, noisy, noisy/alone)
	// Beside the aggressor, each of the victim's 8 block reads waits behind
	// the aggressor's four queued 64 KiB reads on the 16 MB/s path: 16 ms
	// each, over 100 ms a request, however fast the request is alone
	// (7–56× in whole-suite runs). On a machine loaded twice over, fio is
	// itself short of CPU and keeps fewer reads queued, and the request
	// alone waits for CPU too: 2.4× was the least seen (31 ms against 76).
	require.Greater(t, noisy, 2*alone)

	ev, err := b.store.RunLatestEvaluation(ctx, runID)
	require.NoError(t, err)
	require.Equal(t, "FAIL", ev.Overall, string(ev.Result))
	var res acceptance.Evaluation
	require.NoError(t, json.Unmarshal(ev.Result, &res))
	sr := res.Criteria[0].Series[0]
	require.Equal(t, acceptance.Fail, sr.Verdict, sr.Explanation)
	// The interval agrees with the verdict: its lower bound is past the
	// gate's 10 %. How far past depends on the machine's load: the +100 %
	// asked before was missed once beside a second suite (+46 %, with the
	// point estimate at 5.5×).
	require.Greater(t, *sr.Lower, 10.0, "the interval's lower bound is past the gate's threshold")
	require.Contains(t, sr.Explanation, "under interference (step victim-noisy) against alone (step victim-alone)")
}
