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
	"github.com/accordlab/accord/store"
)

// BenchmarkConcurrentRuns drives many runs at once through River, the
// leases, SSH, the probe and collection, each lab host its own sshd on
// loopback: 100 one-host runs on 100 hosts, and 20 three-host runs (two
// readers and a writer at once) on 60 hosts. It reports runs per minute,
// the server process's CPU time a run and its peak memory, and fails if
// a run is lost, fails, or is measured twice on any host.
func BenchmarkConcurrentRuns(b *testing.B) {
	b.Run("runs=100,hosts=1", func(b *testing.B) {
		for range b.N {
			benchConcurrentRuns(b, 100, 1)
		}
	})
	b.Run("runs=20,hosts=3", func(b *testing.B) {
		for range b.N {
			benchConcurrentRuns(b, 20, 3)
		}
	})
}

func benchConcurrentRuns(b *testing.B, n, hostsPerRun int) {
	b.StopTimer()
	// Keepalives as a server has them (the tests' 1 s is for tests of drops).
	tb := setup(b, setupOpts{noRiver: true, keepalive: sshrun.DefaultKeepaliveInterval})
	ctx := context.Background()
	// Each host runs two steps (a pause, then fio). Every run writes files
	// of its own: a probe never writes a file another probe created.
	const steps = 2
	profiles := make([]int64, n)
	for i := range profiles {
		p := tb.quickProfile(2 * time.Second)
		if hostsPerRun > 1 {
			p = tb.twoRoleProfile(2 * time.Second)
		}
		p.Name += " " + strconv.Itoa(i)
		for j := range p.Steps {
			if f := p.Steps[j].Fio; f != nil && f.RW != "randread" || f != nil && hostsPerRun == 1 {
				f.Target = strings.TrimSuffix(f.Target, ".dat") + "-" + strconv.Itoa(i) + ".dat"
			}
		}
		profiles[i] = tb.saveProfile(b, p)
	}
	hosts := make([]int64, n*hostsPerRun)
	for i := range hosts {
		hosts[i] = tb.addHost(b, "lab-"+strconv.Itoa(i), 0)
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
	for i := range runs {
		if hostsPerRun == 1 {
			tb.hostID = hosts[i]
			runs[i] = tb.submit(b, client, profiles[i], nil, nil)
			continue
		}
		mine := hosts[i*hostsPerRun : (i+1)*hostsPerRun]
		runs[i] = tb.submitMulti(b, client, profiles[i], nil, []store.NewRunHost{
			{HostID: mine[0], Role: "readers"}, {HostID: mine[1], Role: "readers"}, {HostID: mine[2], Role: "writer"}})
	}
	deadline := time.Now().Add(15 * time.Minute)
	for {
		var done, failed int
		if err := tb.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state IN ('failed', 'cancelled')) FROM runs`).Scan(&done, &failed); err != nil {
			b.Fatal(err)
		}
		if failed > 0 {
			var id int64
			var reason string
			_ = tb.pool.QueryRow(ctx, `SELECT id, reason FROM runs WHERE state IN ('failed', 'cancelled') ORDER BY id LIMIT 1`).Scan(&id, &reason)
			b.Fatalf("%d runs failed; run %d: %s", failed, id, reason)
		}
		if done == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d runs done after 15 minutes", done, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.StopTimer()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	_ = client.Stop(ctx)
	// Nothing lost, nothing twice: every host of every run measured once.
	for _, id := range runs {
		var starts int
		if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'step_start'`, id).Scan(&starts); err != nil {
			b.Fatal(err)
		}
		if starts != steps*hostsPerRun {
			b.Fatalf("run %d: %d step starts, want %d", id, starts, steps*hostsPerRun)
		}
	}
	b.ReportMetric(float64(n)/elapsed.Minutes(), "runs/min")
	b.ReportMetric(elapsed.Seconds(), "wall-s")
	b.ReportMetric(cpu.Seconds()/float64(n), "server-cpu-s/run")
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
