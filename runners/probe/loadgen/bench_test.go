package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/emulator"
	"github.com/accordlab/accord/runners/probe/wire"
)

// The benchmarks run the emulator as a separate process (this test binary
// started again with emulatorArgsEnv set), as the generator would meet a
// real server: they share the machine's cores but not a Go runtime.
//
//	go test -run '^$' -bench . -benchtime 1x -count 5 ./runners/probe/loadgen/
//
// or bench/run.sh, which prints the median of each figure.
const emulatorArgsEnv = "ACCORD_LOADGEN_TEST_EMULATOR_ARGS"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperLevelEnv); spec != "" {
		os.Exit(runHelperLevel(spec)) // selfcheck_test.go: the load generator in a child process
	}
	if args := os.Getenv(emulatorArgsEnv); args != "" {
		var a []string
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			fmt.Fprintln(os.Stderr, "emulator args:", err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := emulator.Main(ctx, a, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// emulatorProcess starts `accord emulate ARGS` in its own process on
// 127.0.0.1 and returns its base URL; it is stopped (SIGTERM) at cleanup
// or by calling stop, which waits for it to exit.
func emulatorProcess(b testing.TB, args ...string) (url string, stop func()) {
	url, stop, _ = emulatorProcessPID(b, args...)
	return url, stop
}

func emulatorProcessPID(b testing.TB, args ...string) (url string, stop func(), pid int) {
	b.Helper()
	enc, err := json.Marshal(append([]string{"--listen", "127.0.0.1:0", "--model", "m"}, args...))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), emulatorArgsEnv+"="+string(enc))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case <-waited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	}
	b.Cleanup(stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("emulator did not start: %v", err)
	}
	m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(line)
	if m == nil {
		b.Fatalf("emulator said %q", line)
	}
	return m[1], stop, cmd.Process.Pid
}

func readJSONLines[T any](b testing.TB, path string, each func(T)) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			b.Fatal(err)
		}
		each(v)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
}

func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// BenchmarkFidelity: many concurrent streams against the emulator in its
// own process; for every measured request, |generator's TTFT − emulator's
// TTFT|, the emulator's taken from receiving the request to the flush of
// the first token. Targets: 256 streams at 20 ms ITL, p99 below 1 ms;
// 2,048 streams at 50 ms ITL, p99 below 2 ms with the generator's
// self-check healthy and its peak memory below 300 MiB.
func BenchmarkFidelity(b *testing.B) {
	conc := 0
	if v, err := strconv.Atoi(os.Getenv("ACCORD_BENCH_CONCURRENCY")); err == nil && v > 0 {
		conc = v // one shape only, for experiments
	}
	for _, c := range []struct {
		streams int
		itl     time.Duration
	}{{256, 20 * time.Millisecond}, {2048, 50 * time.Millisecond}} {
		if conc > 0 && conc != c.streams {
			continue
		}
		b.Run(fmt.Sprintf("streams=%d,itl=%s", c.streams, c.itl), func(b *testing.B) {
			for range b.N {
				fidelity(b, c.streams, c.itl)
			}
		})
	}
}

func fidelity(b *testing.B, streams int, itl time.Duration) {
	// Each stream holds a socket here and one in the emulator, which
	// inherits the limit.
	raiseOpenFileLimit(b, uint64(2*streams+256))
	dir := b.TempDir()
	timings := filepath.Join(dir, "timings.jsonl")
	url, stop, pid := emulatorProcessPID(b, "--itl", itl.String(), "--prefill-per-token", "20us", "--timings", timings)
	recFile, err := os.Create(filepath.Join(dir, "requests.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	// Output lengths vary (16..48 tokens, 32 on average) so that the
	// streams, which all start together, do not stay in lockstep and hit
	// the emulator in waves of all of them at once.
	step := acceptance.InferenceStep{
		Endpoint: url, Model: "m", API: "chat",
		PromptTokens: acceptance.TokenDist{Mean: 64},
		OutputTokens: acceptance.TokenDist{Dist: "uniform", Min: 16, Max: 48},
		Duration:     acceptance.Duration(envDuration("ACCORD_BENCH_DURATION", 10*time.Second)),
		Seed:         1,
	}
	// The warm-up opens the connections and lets the streams drift apart
	// before measuring: two responses' worth of time.
	warmup := max(3*time.Second, 2*32*itl)
	g, err := newGenerator(Config{Step: step, Level: Level{Concurrency: streams}, Warmup: warmup, Records: recFile})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	if err := resetPeakRSS(); err != nil {
		b.Fatal(err)
	}
	emuCPU0, start := otherProcessCPU(b, pid), time.Now()
	sum, err := g.run(context.Background())
	g.release()
	if err != nil {
		b.Fatal(err)
	}
	emuCPU, wall := otherProcessCPU(b, pid)-emuCPU0, time.Since(start)
	peak, err := peakRSS()
	if err != nil {
		b.Fatal(err)
	}
	t0 := g.clock.t0.UnixNano() // the level's start on the wall clock
	if err := recFile.Close(); err != nil {
		b.Fatal(err)
	}
	stop() // flushes the timings
	emu := map[string]emuTiming{}
	readJSONLines(b, timings, func(t emuTiming) { emu[t.ID] = t })
	// hop1: the request's trip, from written by the generator to read by
	// the emulator; hop2: the first token's, from flushed by the emulator
	// to read by the generator. Both on the host's wall clock.
	var dTTFT, dE2E, signed, hop1, hop2 []float64
	readJSONLines(b, recFile.Name(), func(r wire.RequestRecord) {
		if r.Warmup || r.ErrorKind != "" {
			return
		}
		t, ok := emu[strconv.FormatInt(r.ID, 10)]
		if !ok {
			b.Fatalf("request %d not in the emulator's timings", r.ID)
		}
		d := float64((r.FirstToken-r.Sent)-(t.FirstToken-t.Recv)) / 1e3
		dTTFT = append(dTTFT, math.Abs(d))
		signed = append(signed, d)
		dE2E = append(dE2E, math.Abs(float64((r.Done-r.Sent)-(t.Done-t.Recv)))/1e3)
		emuStart := t.RecvUnix - t.Recv
		hop1 = append(hop1, float64(t.RecvUnix-(t0+r.Sent))/1e3)
		hop2 = append(hop2, float64((t0+r.FirstToken)-(emuStart+t.FirstToken))/1e3)
	})
	sort.Float64s(dTTFT)
	sort.Float64s(dE2E)
	sort.Float64s(signed)
	sort.Float64s(hop1)
	sort.Float64s(hop2)
	if sum.Failed > 0 || len(dTTFT) == 0 {
		b.Fatalf("%d failed, %d compared", sum.Failed, len(dTTFT))
	}
	sc := sum.SelfCheck
	healthy := 1.0
	if sc.Flagged {
		healthy = 0
		b.Logf("self-check flagged the client: %s", strings.Join(sc.Reasons, "; "))
	}
	b.ReportMetric(percentile(signed, 0.50), "p50-dTTFT-us") // client − emulator: the hops between them
	b.ReportMetric(percentile(dTTFT, 0.50), "p50-|dTTFT|-us")
	b.ReportMetric(percentile(dTTFT, 0.99), "p99-|dTTFT|-us")
	b.ReportMetric(dTTFT[len(dTTFT)-1], "max-|dTTFT|-us")
	b.ReportMetric(percentile(dE2E, 0.99), "p99-|dE2E|-us")
	b.ReportMetric(percentile(hop1, 0.99), "p99-request-hop-us")
	b.ReportMetric(percentile(hop2, 0.99), "p99-token-hop-us")
	b.ReportMetric(float64(len(dTTFT)), "requests")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(healthy, "self-check-healthy")
	b.ReportMetric(sc.TickDelayP99Ms, "tick-delay-p99-ms")
	b.ReportMetric(sc.ProbeCPUPct, "client-CPU-%")
	b.ReportMetric(100*emuCPU.Seconds()/(wall.Seconds()*float64(runtime.NumCPU())), "emulator-CPU-%")
	if sc.HostCPUPressurePct != nil {
		b.ReportMetric(*sc.HostCPUPressurePct, "host-CPU-pressure-%")
	}
}

// raiseOpenFileLimit lifts the soft limit on open files to at least n,
// within the hard limit.
func raiseOpenFileLimit(b testing.TB, n uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		b.Fatalf("open files: %d needed, the hard limit is %d", n, lim.Max)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCapacity: CPU per request and requests per second against the
// emulator at ITL 0 (32 tokens a response, 64 connections), the generator
// timing every chunk, decoding every event and writing every record,
// against wrk sending the same request to the same emulator process. The
// two take turns, five rounds each (ACCORD_BENCH_DURATION in all, split),
// so that both meet the same machine; gen/wrk-cpu is the ratio of their
// CPU per request over all rounds. Target: at most 0.6 at a request rate
// at least wrk's.
func BenchmarkCapacity(b *testing.B) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		b.Skip("wrk is not installed (Debian package wrk)")
	}
	const rounds = 5
	total := envDuration("ACCORD_BENCH_DURATION", 10*time.Second)
	round := max(2*time.Second, (total / rounds).Round(time.Second))
	for range b.N {
		dir := b.TempDir()
		url, _, pid := emulatorProcessPID(b, "--itl", "0", "--prefill-per-token", "0")
		step := acceptance.InferenceStep{
			Endpoint: url, Model: "m", API: "chat",
			PromptTokens: acceptance.TokenDist{Mean: 16}, OutputTokens: acceptance.TokenDist{Mean: 32},
			Duration: acceptance.Duration(round),
			Seed:     1,
		}
		// wrk sends the very body the generator sends for its request 0.
		g, err := newGenerator(Config{Step: step, Level: Level{Concurrency: 64}})
		if err != nil {
			b.Fatal(err)
		}
		var r request
		if err := g.prompts.next(0, &r); err != nil {
			b.Fatal(err)
		}
		body := filepath.Join(dir, "body.json")
		if err := os.WriteFile(body, g.appendBody(nil, &r, true), 0o644); err != nil { // what the generator sends
			b.Fatal(err)
		}
		g.release()

		var wrkCPU, genCPU, emuWrk, emuGen, wrkWall, genWall time.Duration
		var wrkReqs, genReqs float64
		var ratios []float64
		for range rounds {
			cmd := exec.Command(wrk, "-t2", "-c64", "-d"+strconv.Itoa(int(round.Seconds()))+"s", "-s", "bench/post.lua", url+"/chat/completions")
			cmd.Env = append(os.Environ(), "ACCORD_WRK_BODY="+body)
			emu0 := otherProcessCPU(b, pid)
			out, err := cmd.CombinedOutput()
			emuWrk += otherProcessCPU(b, pid) - emu0
			if err != nil {
				b.Fatalf("wrk: %v\n%s", err, out)
			}
			m := regexp.MustCompile(`(\d+) requests in ([0-9.]+)s`).FindSubmatch(out)
			if m == nil || strings.Contains(string(out), "Non-2xx") {
				b.Fatalf("wrk output:\n%s", out)
			}
			n, _ := strconv.ParseFloat(string(m[1]), 64)
			secs, _ := strconv.ParseFloat(string(m[2]), 64)
			cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			wrkReqs, wrkCPU, wrkWall = wrkReqs+n, wrkCPU+cpu, wrkWall+time.Duration(secs*float64(time.Second))
			wrkPer := float64(cpu) / n

			recFile, err := os.Create(filepath.Join(dir, "requests.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			cpu0, emu1 := processCPU(), otherProcessCPU(b, pid)
			sum, err := Run(context.Background(), Config{Step: step, Level: Level{Concurrency: 64}, Records: recFile})
			if err != nil {
				b.Fatal(err)
			}
			cpu = processCPU() - cpu0
			emuGen += otherProcessCPU(b, pid) - emu1
			if err := recFile.Close(); err != nil {
				b.Fatal(err)
			}
			if sum.Failed > 0 {
				b.Fatalf("%d requests failed", sum.Failed)
			}
			genReqs, genCPU = genReqs+float64(sum.Requests), genCPU+cpu
			genWall += time.Duration(sum.WindowSec * float64(time.Second))
			ratios = append(ratios, (float64(cpu)/float64(sum.Requests))/wrkPer)
		}
		sort.Float64s(ratios)
		// CPU per request tells the two clients apart even when other
		// processes take the machine's cores.
		wrkPer, genPer := float64(wrkCPU.Microseconds())/wrkReqs, float64(genCPU.Microseconds())/genReqs
		b.ReportMetric(wrkPer, "wrk-cpu-us/req")
		b.ReportMetric(genPer, "gen-cpu-us/req")
		b.ReportMetric(genPer/wrkPer, "gen/wrk-cpu")
		b.ReportMetric(ratios[len(ratios)/2], "gen/wrk-cpu-median-round")
		b.ReportMetric(float64(emuWrk.Microseconds())/wrkReqs, "emu-cpu-us/req(wrk)")
		b.ReportMetric(float64(emuGen.Microseconds())/genReqs, "emu-cpu-us/req(gen)")
		wrkRate, genRate := wrkReqs/wrkWall.Seconds(), genReqs/genWall.Seconds()
		b.ReportMetric(wrkRate, "wrk-req/s")
		b.ReportMetric(genRate, "gen-req/s")
		b.ReportMetric(genRate/wrkRate, "gen/wrk")
	}
}

// BenchmarkMemory: peak RSS of the generator's process over a million
// requests (ACCORD_BENCH_REQUESTS to change it) with short responses at ITL
// 0, records written to a file. Target: below 200 MiB.
func BenchmarkMemory(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("ACCORD_BENCH_REQUESTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	for range b.N {
		dir := b.TempDir()
		url, _ := emulatorProcess(b, "--itl", "0", "--prefill-per-token", "0")
		recFile, err := os.Create(filepath.Join(dir, "requests.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		step := acceptance.InferenceStep{
			Endpoint: url, Model: "m", API: "chat",
			PromptTokens: acceptance.TokenDist{Mean: 8}, OutputTokens: acceptance.TokenDist{Mean: 4},
			Requests: n, Seed: 1,
		}
		runtime.GC()
		debug.FreeOSMemory()
		if err := resetPeakRSS(); err != nil {
			b.Fatal(err)
		}
		var ms0 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		start := time.Now()
		interims := 0
		sum, err := Run(context.Background(), Config{
			Step: step, Level: Level{Concurrency: 64}, Records: recFile,
			Interim: func(wire.Interim) { interims++ },
		})
		if err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		var ms1 runtime.MemStats
		runtime.ReadMemStats(&ms1)
		peak, err := peakRSS()
		if err != nil {
			b.Fatal(err)
		}
		if err := recFile.Close(); err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(recFile.Name())
		if err != nil {
			b.Fatal(err)
		}
		if sum.Succeeded != int64(n) {
			b.Fatalf("%d of %d succeeded", sum.Succeeded, n)
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "req/s")
		b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(n), "alloc-B/req")
		b.ReportMetric(float64(ms1.HeapSys)/(1<<20), "heap-sys-MiB")
		b.ReportMetric(float64(fi.Size())/(1<<20), "records-MiB")
		b.ReportMetric(float64(n), "requests")
	}
}

// BenchmarkStorageTTFT: median TTFT through the emulator's cold KV reads
// (16 × 128 KiB a request) with the KV file on tmpfs, on the root
// filesystem's disk with O_DIRECT, and on tmpfs capped at 100 MB/s.
func BenchmarkStorageTTFT(b *testing.B) {
	for range b.N {
		tmpfs, tmpfsRead := storageRun(b, shmDir(b), 0, 50)
		disk, diskRead := storageRun(b, b.TempDir(), 0, 50)
		slow, _ := storageRun(b, shmDir(b), 100, 20)
		b.ReportMetric(median(tmpfs), "tmpfs-TTFT-ms")
		b.ReportMetric(median(disk), "disk-TTFT-ms")
		b.ReportMetric(median(slow), "capped-TTFT-ms")
		b.ReportMetric(median(tmpfsRead), "tmpfs-read-ms")
		b.ReportMetric(median(diskRead), "disk-read-ms")
	}
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

// otherProcessCPU reads a process's user and system CPU time from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 10 ms).
func otherProcessCPU(b testing.TB, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// resetPeakRSS sets the process's peak RSS (VmHWM) to its current RSS.
func resetPeakRSS() error {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS: %w", err)
	}
	return nil
}

// peakRSS reads VmHWM from /proc/self/status, in bytes.
func peakRSS() (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB`).FindSubmatch(data)
	if m == nil {
		return 0, errors.New("no VmHWM in /proc/self/status")
	}
	kb, err := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10, err
}
