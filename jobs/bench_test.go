package jobs

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
)

// BenchmarkFiftyConcurrentRuns drives 50 runs at once, each on its own lab
// host (50 sshd instances on loopback), through River, the lease, SSH, the
// probe and collection. It reports runs per minute, the server process's
// CPU time and peak memory, and fails if a run is lost or measured twice.
func BenchmarkFiftyConcurrentRuns(b *testing.B) {
	const n = 50
	for i := 0; i < b.N; i++ {
		benchFiftyRuns(b, n)
	}
}

func benchFiftyRuns(b *testing.B, n int) {
	b.StopTimer()
	tb := setup(b, setupOpts{noRiver: true})
	ctx := context.Background()
	profile := tb.saveProfile(b, tb.quickProfile(2*time.Second))
	hosts := make([]int64, n)
	for i := range hosts {
		sshd := sshtest.StartSSHD(b, sshtest.Options{})
		id, err := tb.store.CreateHost(ctx, tb.programID, store.NewHost{Name: "lab-" + strconv.Itoa(i), Address: sshd.Addr, Port: sshd.Port, Username: sshd.User, AuthMethod: "key",
			WritePlaces: []string{tb.work}})
		if err != nil {
			b.Fatal(err)
		}
		sealed, _ := tb.deps.Sealer.Seal(sshd.ClientKeyPEM, labhost.SealLabel(id))
		_ = tb.store.SetHostSealedKey(ctx, id, sealed)
		if err := tb.store.PinHostKeys(ctx, tb.programID, id, sshrun.AuthorizedKey(sshd.HostKey), sshrun.Fingerprint(sshd.HostKey), nil); err != nil {
			b.Fatal(err)
		}
		hosts[i] = id
	}
	client, err := river.NewClient(riverpgxv5.New(tb.pool), &river.Config{Logger: tb.deps.Log,
		Queues:  map[string]river.QueueConfig{QueueDefault: {MaxWorkers: 4}, QueueRuns: {MaxWorkers: n + 10}, QueueReports: {MaxWorkers: 2}},
		Workers: Register(tb.deps), FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	cpu0 := cpuTime()
	start := time.Now()
	b.StartTimer()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	runs := make([]int64, n)
	for i, h := range hosts {
		tb.hostID = h
		runs[i] = tb.submit(b, client, profile, nil, nil)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var done, failed int
		if err := tb.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state IN ('failed', 'cancelled')) FROM runs`).Scan(&done, &failed); err != nil {
			b.Fatal(err)
		}
		if failed > 0 {
			b.Fatalf("%d runs failed", failed)
		}
		if done == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d runs done after 10 minutes", done, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.StopTimer()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	_ = client.Stop(ctx)
	// Nothing lost, nothing twice: every run measured exactly once.
	for _, id := range runs {
		var starts int
		if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'step_start'`, id).Scan(&starts); err != nil {
			b.Fatal(err)
		}
		if starts != 2 {
			b.Fatalf("run %d: %d step starts, want 2", id, starts)
		}
	}
	b.ReportMetric(float64(n)/elapsed.Minutes(), "runs/min")
	b.ReportMetric(elapsed.Seconds(), "wall-s")
	b.ReportMetric(cpu.Seconds(), "server-cpu-s")
	b.ReportMetric(float64(peakRSSKiB())/1024, "server-peak-RSS-MiB")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func peakRSSKiB() int64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			v, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return v
		}
	}
	return 0
}
