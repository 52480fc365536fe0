// Package gputest puts fake vendor tools where a test looks for them:
// shell scripts named like the tools that print the recorded outputs of
// runners/probe/gpu/testdata for the argument vectors the adapters run.
// The scripts run for real, as the probe starts any tool.
package gputest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/internal/fakebin"
)

// Recorded is every adapter's tool with its outputs, keyed by a shell
// case pattern matched against all its arguments ("*": anything else).
var Recorded = map[string]map[string]string{
	"nvidia-smi": {"topo -m": "nvidia-smi-topo-m-della-a100.txt", "*": "nvidia-smi-q-x-tesla-t4.xml"},
	"rocm-smi":   {"*": "rocm-smi-mi100-rocm602.json"},
	"amd-smi":    {"static*": "amd-smi-static-json-mi210.json", "metric*": "amd-smi-metric-json-gpu-data.json"},
	"hy-smi": {"--showbus": "hy-smi-showbus-8hcu.txt", "--showdriverversion": "hy-smi-showdriverversion.txt",
		"*": "hy-smi-dcu-dtk24.04.3.json"},
	"npu-smi": {"info -t usages -i 0": "npu-smi-info-t-usages-910-hbm.txt", "info -t usages -i 1": "npu-smi-info-t-usages-310p-ddr.txt",
		"info -t usages*": "", "info -t board -i 0": "npu-smi-info-t-board-200i-a2-24.1.RC2.txt", "info -t board*": "",
		"*": "npu-smi-info-atlas800-9010-24.1.RC2.txt"},
	"cnmon":        {"*": "cnmon-info-mlu370.txt"},
	"xpu-smi":      {"-m": "xpu-smi-m-p800.txt", "-q": "xpu-smi-q-p800.txt"},
	"mthreads-gmi": {"*": "mthreads-gmi-q-json-s4000.json"},
	"mx-smi": {"--show-usage": "mx-smi-show-usage.txt", "--show-memory": "mx-smi-show-memory.txt",
		"--show-board-power": "mx-smi-show-board-power.txt", "*": "mx-smi-c500.txt"},
	"ixsmi": {"*uuid,pci.bus_id*": "ixsmi-query-gpu-ids.csv", "*": "ixsmi-query-gpu.csv"},
	"efsmi": {"*": "efsmi-q-s60.txt"},
	"brsmi": {"--query-gpu=index,name,*": "brsmi-query-facts.csv", "*": "brsmi-query-telemetry.csv"},
}

// Testdata is the absolute path of runners/probe/gpu/testdata.
func Testdata(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(tb, ok)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// FakeTools writes one script per tool into a temporary folder and
// returns a LookPath that finds tools there only. An empty file name
// makes the script fail (exit 1, as a tool that does not support the
// command); arguments no pattern matches fail too.
func FakeTools(tb testing.TB, tools map[string]map[string]string) func(string) (string, error) {
	tb.Helper()
	dir := Dir(tb, tools)
	return func(name string) (string, error) {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil || strings.Contains(name, "/") {
			return "", fmt.Errorf("%s: not found", name)
		}
		return p, nil
	}
}

// InFrontOfPath returns a LookPath that finds programs in dir first and
// on PATH otherwise, as a shell does with PATH=dir:$PATH: a probe run
// in-process finds the fake vendor tools and the real fio.
func InFrontOfPath(dir string) func(string) (string, error) {
	return func(name string) (string, error) {
		if !strings.Contains(name, "/") {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
		return exec.LookPath(name)
	}
}

// Dir writes one script per tool into a temporary folder and returns the
// folder, for a PATH (a lab host's, through sshd) or InFrontOfPath.
func Dir(tb testing.TB, tools map[string]map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	data := Testdata(tb)
	for tool, byArgs := range tools {
		patterns := make([]string, 0, len(byArgs))
		for p := range byArgs {
			patterns = append(patterns, p)
		}
		// The shell takes the first pattern that matches: the most specific
		// (longest) first, the catch-all last.
		sort.Slice(patterns, func(i, j int) bool { return len(patterns[i]) > len(patterns[j]) })
		var sh strings.Builder
		sh.WriteString("#!/bin/sh\ncase \"$*\" in\n")
		for _, p := range patterns {
			if byArgs[p] == "" {
				fmt.Fprintf(&sh, "%s) echo %q >&2; exit 1 ;;\n", shellPattern(p), "not supported")
				continue
			}
			fmt.Fprintf(&sh, "%s) exec cat %q ;;\n", shellPattern(p), filepath.Join(data, byArgs[p]))
		}
		sh.WriteString("*) echo \"unexpected arguments: $*\" >&2; exit 2 ;;\nesac\n")
		fakebin.Write(tb, filepath.Join(dir, tool), sh.String())
	}
	return dir
}

// Only returns the tools of Recorded named.
func Only(names ...string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, n := range names {
		out[n] = Recorded[n]
	}
	return out
}

// shellPattern quotes a pattern's literal parts so that spaces and
// commas match themselves; * stays a wildcard.
func shellPattern(p string) string {
	parts := strings.Split(p, "*")
	for i, s := range parts {
		if s != "" {
			parts[i] = "'" + s + "'"
		}
	}
	return strings.Join(parts, "*")
}
