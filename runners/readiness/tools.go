package readiness

import (
	"fmt"

	"github.com/accordlab/accord/runners/probe/facts"
)

func findTool(f *facts.Facts, name string) (facts.Tool, bool) {
	for _, t := range f.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return facts.Tool{}, false
}

// checkFio: fio 3.x is installed; missing fails when a fio step will run.
// fio not on PATH is a finding, not an unknown.
func checkFio(e *env) result {
	t, ok := findTool(e.f, "fio")
	if !ok {
		return result{UNKNOWN, "The facts do not say whether fio is installed.", nil, "Refresh the facts with a current probe."}
	}
	ev := []Evidence{toolEv(t)}
	install := "Install fio 3.x on the host (apt install fio, dnf install fio); Accord runs it with --output-format=json+."
	switch {
	case t.Source.Absent:
		if e.o.FioRequired {
			return result{FAIL, "fio is not installed, and the profile has a fio step.", ev, install}
		}
		return result{WARN, "fio is not installed (no fio step in the profile needs it now).", ev, install}
	case !t.Source.OK():
		return result{UNKNOWN, "fio --version failed: " + t.Source.Error + ".", ev, "Run fio --version on the host by hand; reinstall fio if it fails."}
	}
	major, ok := parseFioMajor(t.Version)
	switch {
	case !ok:
		return result{UNKNOWN, fmt.Sprintf("fio reports version %q, which this check does not understand.", t.Version), ev, install}
	case major < 3:
		return result{WARN, fmt.Sprintf("%s is older than fio 3: it reports latencies in microseconds without the json+ histograms Accord computes percentiles from.", t.Version), ev, install}
	}
	return result{PASS, t.Version + ".", ev, ""}
}

// checkNVMeCLI: nvme-cli is installed (SMART health and the sysfs
// cross-check need it).
func checkNVMeCLI(e *env) result {
	t, ok := findTool(e.f, "nvme-cli")
	if !ok {
		return result{UNKNOWN, "The facts do not say whether nvme-cli is installed.", nil, "Refresh the facts with a current probe."}
	}
	ev := []Evidence{toolEv(t)}
	switch {
	case t.Source.Absent:
		return result{WARN, "nvme-cli is not installed: the controllers' SMART health cannot be read and sysfs is not cross-checked.", ev,
			"Install nvme-cli (apt install nvme-cli, dnf install nvme-cli)."}
	case !t.Source.OK():
		return result{UNKNOWN, "nvme version failed: " + t.Source.Error + ".", ev, "Run nvme version on the host by hand; reinstall nvme-cli if it fails."}
	}
	v := t.Version
	if v == "" {
		v = "nvme-cli (version not printed)"
	}
	s := v + "."
	if n := len(e.f.NVMe.Mismatches); n > 0 {
		return result{WARN, s + fmt.Sprintf(" It disagrees with sysfs on %d %s: %v.", n, plural(n, "device", "devices"), e.f.NVMe.Mismatches),
			append(ev, Evidence{Fact: "nvme.mismatches", Value: fmt.Sprint(e.f.NVMe.Mismatches), Command: e.f.NVMe.CLIList.Command}),
			"Refresh the facts; a persisting difference means a device appeared or vanished while the probe ran, or nvme-cli is too old for this kernel."}
	}
	return result{PASS, s, ev, ""}
}
