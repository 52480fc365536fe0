package readiness

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/accordlab/accord/runners/probe/facts"
)

// checkGPUDriver: the vendor tools list accelerators, each tool's with
// one driver version. Without any device, what each installed vendor
// tool said is why: the tool that failed, with its own error, or the
// tool that listed nothing. Facts from before the vendor adapters have
// only nvidia-smi's account (legacyNvidiaDriver).
func checkGPUDriver(e *env) result {
	g := e.f.GPU
	src := g.Source
	var ev []Evidence
	for i, d := range g.GPUs {
		tsrc := toolSource(g, d.Tool, src)
		needle := d.UUID
		if needle == "" {
			needle = d.Name
		}
		x := sourceEv(fmt.Sprintf("gpu.gpus[%d].driver_version", i), tsrc, linesAround(tsrc.Raw, needle, 0))
		if len(g.Tools) == 0 { // facts from before the vendor adapters: nvidia-smi's CSV
			x.Excerpt = clip(smiLine(src.Raw, d.Index))
		}
		x.Value = d.DriverVersion
		ev = append(ev, x)
	}
	if len(g.GPUs) > 0 {
		return gpuDrivers(g, ev)
	}
	if len(g.Tools) == 0 {
		return legacyNvidiaDriver(e, append(ev, sourceEv("gpu.gpus", src, src.Raw)))
	}
	return noAccelerator(e)
}

// gpuDrivers judges the drivers of the devices found: one version per
// vendor tool (two vendors' drivers differ by nature).
func gpuDrivers(g facts.GPU, ev []Evidence) result {
	drivers := map[string]map[string]int{}
	names := map[string]int{}
	notes := map[string]string{}
	for _, d := range g.GPUs {
		tool := d.Tool
		if tool == "" {
			tool = "nvidia-smi"
		}
		if drivers[tool] == nil {
			drivers[tool] = map[string]int{}
		}
		drivers[tool][d.DriverVersion]++
		names[d.Model()]++
		if n := d.NotReported["driver_version"]; n != "" {
			notes[tool] = n
		}
	}
	var models []string
	for _, n := range sortedKeys(names) {
		models = append(models, fmt.Sprintf("%d × %s", names[n], n))
	}
	var mixed, one []string
	for _, tool := range sortedKeys(drivers) {
		vs := drivers[tool]
		if len(vs) > 1 {
			mixed = append(mixed, tool+": "+strings.Join(sortedKeys(vs), ", "))
			continue
		}
		v := sortedKeys(vs)[0]
		switch {
		case v == "" && notes[tool] != "":
			// The tool has no way to say it: known, and said as such.
			one = append(one, "driver "+notes[tool])
		case v == "":
			mixed = append(mixed, tool+": driver version not reported")
		default:
			one = append(one, "driver "+v+" ("+tool+")")
		}
	}
	if len(mixed) > 0 {
		return result{WARN, fmt.Sprintf("%s with driver versions %s: one driver should serve every device of a vendor.", strings.Join(models, ", "), strings.Join(mixed, "; ")), ev,
			"Reinstall one driver version per vendor and reboot so every device reports it."}
	}
	return result{PASS, fmt.Sprintf("%s, %s.", strings.Join(models, ", "), strings.Join(one, ", ")), ev, ""}
}

// noAccelerator explains a host where no vendor tool listed a device:
// each installed tool's own words, the first that failed leading.
func noAccelerator(e *env) result {
	g := e.f.GPU
	failOrWarn, notExpected := FAIL, ""
	if !e.o.GPUExpected {
		failOrWarn, notExpected = WARN, " (GPUs are not expected on this host)"
	}
	var ev []Evidence
	var failed, unparsed, empty []string
	var vendors []string
	for _, t := range g.Tools {
		if t.Absent() || len(t.Sources) == 0 {
			continue
		}
		for i, s := range t.Sources {
			if !s.OK() || i == len(t.Sources)-1 {
				ev = append(ev, sourceEv("gpu.tools["+t.Tool+"]", s, s.Raw))
				break
			}
		}
		switch {
		case toolFailure(t) != "":
			failed = append(failed, toolFailure(t))
			vendors = append(vendors, t.Vendor)
		case t.Error != "":
			unparsed = append(unparsed, t.Tool+"'s output did not parse ("+t.Error+")")
		case t.SupersededBy == "":
			empty = append(empty, t.Tool)
		}
	}
	switch {
	case len(failed) > 0:
		return result{failOrWarn, strings.Join(failed, "; ") + notExpected + ".", ev,
			fmt.Sprintf("The %s driver is installed but not working (a kernel update without a rebuilt module, or a mismatch between the module and the tool's libraries): reinstall the driver for the running kernel, reboot, and run the tool by hand to see it list the devices.",
				strings.Join(sortedUnique(vendors), " and "))}
	case len(unparsed) > 0:
		return result{UNKNOWN, strings.Join(unparsed, "; ") + ".", ev, "Run the tool on the host by hand and compare its output with what Accord reads (runners/probe/gpu)."}
	case len(empty) > 0:
		return result{failOrWarn, strings.Join(empty, ", ") + " runs but lists no device" + notExpected + ".", ev,
			"Check that the accelerators are seated and visible (lspci), that the driver has bound them, and that the tool runs as the probe's user; or clear the host's gpu label if none is meant to be there."}
	}
	// No vendor tool installed at all.
	var names []string
	for _, t := range g.Tools {
		names = append(names, t.Tool)
	}
	installFix := "Install the accelerator's driver and its management tool (one of " + strings.Join(names, ", ") + ") so that it lists every device, or clear the host's gpu label if none is meant to be there."
	mods := e.f.Modules
	ev = append(ev, Evidence{Fact: "gpu.tools", Absent: true, Value: "none of " + strings.Join(names, ", ")}, moduleEv(e, "nvidia"))
	none := "none of the " + strconv.Itoa(len(names)) + " vendor tools Accord reads is installed"
	switch {
	case mods.Loaded["nvidia"]:
		return result{UNKNOWN, "The nvidia module is loaded but nvidia-smi is not installed, so the GPUs and the driver version are unknown.", ev,
			"Install nvidia-smi (it ships with the driver's utilities package), then refresh the facts."}
	case !mods.Source.OK():
		// Without the module list, a driver whose tool is missing cannot be ruled out.
		return result{UNKNOWN, "No accelerator tool: " + none + ", and which driver modules are loaded is unknown.", ev, installFix}
	case !e.o.GPUExpected:
		return result{UNKNOWN, "No accelerator tool: " + none + ".", ev, installFix}
	}
	return result{FAIL, "No accelerator driver: " + none + " and no accelerator driver module is loaded.", ev, installFix}
}

// toolFailure says how a vendor tool failed, in its own words: the
// command, the exit status and what it printed; "" when it ran.
func toolFailure(t facts.GPUTool) string {
	for _, s := range t.Sources {
		if s.OK() || s.Absent {
			continue
		}
		msg := strings.TrimSpace(s.Error)
		if strings.HasSuffix(msg, ":") || !strings.Contains(strings.TrimPrefix(msg, "exit status"), ":") {
			// Nothing on standard error: the tool said it on standard output.
			if line := firstLine(s.Raw); line != "" {
				msg = strings.TrimSuffix(msg, ":") + ": " + line
			}
		}
		return strings.Join(s.Command, " ") + " fails: " + msg
	}
	return ""
}

func firstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

func sortedUnique(in []string) []string {
	out := uniqueSorted(in)
	sort.Strings(out)
	return out
}

// legacyNvidiaDriver judges facts taken before the vendor adapters, which
// have only nvidia-smi's output and the nvidia module.
func legacyNvidiaDriver(e *env, ev []Evidence) result {
	src := e.f.GPU.Source
	notExpected := ""
	if !e.o.GPUExpected {
		notExpected = " (GPUs are not expected on this host)"
	}
	failOrWarn := FAIL
	if !e.o.GPUExpected {
		failOrWarn = WARN
	}
	installFix := "Install the NVIDIA driver the inference stack needs (nvidia-smi must list every GPU), or clear the host's gpu label."
	switch {
	case src.OK():
		return result{failOrWarn, "nvidia-smi lists no GPU" + notExpected + ".", ev, installFix}
	case src.Absent:
		mods := e.f.Modules
		ev = append(ev, moduleEv(e, "nvidia"))
		switch {
		case mods.Source.OK() && !mods.Loaded["nvidia"] && !mods.Builtin["nvidia"]:
			if !e.o.GPUExpected {
				return result{UNKNOWN, "nvidia-smi is not installed and the nvidia module is not loaded.", ev, installFix}
			}
			return result{FAIL, "No NVIDIA driver: nvidia-smi is not installed and the nvidia module is not loaded.", ev, installFix}
		case mods.Loaded["nvidia"]:
			return result{UNKNOWN, "The nvidia module is loaded but nvidia-smi is not installed, so the GPUs and the driver version are unknown.", ev,
				"Install nvidia-smi (it ships with the driver's utilities package), then refresh the facts."}
		}
		return result{UNKNOWN, "nvidia-smi is not installed and whether the nvidia module is loaded is unknown.", ev, installFix}
	case strings.HasPrefix(src.Error, "parse:"):
		return result{UNKNOWN, "nvidia-smi's output did not parse (" + src.Error + ").", ev, "Check nvidia-smi --query-gpu on the host by hand."}
	}
	return result{failOrWarn, "nvidia-smi fails: " + src.Error + notExpected + ".", ev,
		"The driver is installed but not working (a kernel update without a rebuilt module, or a mismatch between the module and the user-space libraries): reinstall the driver for the running kernel and reboot."}
}

// checkGDS: GPUDirect Storage is there (nvidia_fs loaded, cuFile
// configured), or its absence is said plainly.
func checkGDS(e *env) result {
	gds := e.f.GDS
	stats, cfg := gds.Stats, gds.CuFileJSON
	ev := []Evidence{sourceEv("gds.stats", stats, linesAround(stats.Raw, "GDS Version", 3)), sourceEv("gds.cufile_json", cfg, linesAround(cfg.Raw, "compat_mode", 0))}
	absentMsg := "GDS is not available: reads are CPU-mediated copies, which is what gets measured."
	gdsFix := "If GPUDirect Storage is meant to be measured, install nvidia-fs and the GDS user space matching the driver and CUDA (nvidia-gds), modprobe nvidia_fs and check with gdscheck -p; if CPU-mediated reads are what the program compares, nothing to do."
	switch {
	case stats.OK():
		version, driver := parseGDSStats(stats.Raw)
		ev[0].Value = strings.TrimSpace("GDS " + version + " nvidia-fs " + driver)
		s := "GDS is available: nvidia-fs loaded"
		if driver != "" {
			s += " (driver " + driver + ")"
		}
		if version != "" {
			s += ", GDS " + version
		}
		switch {
		case cfg.OK():
			s += "; cuFile configuration " + cfg.File
			compat, ok := cuFileCompatMode(cfg.Raw)
			if ok {
				ev[1].Value = fmt.Sprintf("allow_compat_mode=%t", compat)
			}
			if ok && compat {
				s += " allows compatibility mode, so a cuFile read that cannot go direct falls back to a CPU copy without an error: the nvidia-fs counters after a run show which path was taken"
			}
			return result{PASS, s + ".", ev, ""}
		case cfg.Absent:
			return result{WARN, s + ", but " + cfg.File + " is absent: cuFile runs on built-in defaults (or a file named by CUFILE_ENV_PATH_JSON), which may allow silent fallback to CPU copies.", ev,
				"Install the GDS configuration (nvidia-gds provides /etc/cufile.json) and set its properties for this storage (rdma_dev_addr_list for NVMe-oF over RDMA)."}
		}
		return result{UNKNOWN, s + "; " + cfg.File + " could not be read (" + cfg.Error + ").", ev, "Run the probe as a user that can read " + cfg.File + "."}
	case stats.Absent:
		mods := e.f.Modules
		ev = append(ev, moduleEv(e, "nvidia_fs"))
		if mods.Source.OK() && mods.Loaded["nvidia_fs"] {
			return result{UNKNOWN, "nvidia_fs is loaded but " + stats.File + " is absent, so GDS's state is unknown.", ev,
				"Check the nvidia-fs installation (gdscheck -p), then refresh the facts."}
		}
		// nvidia-fs creates its stats file when it loads: with procfs
		// readable, its absence means the module is not loaded.
		if mods.Source.OK() || e.f.Memory.Source.OK() {
			return result{WARN, absentMsg + " (nvidia_fs is not loaded: " + stats.File + " is absent.)", ev, gdsFix}
		}
	}
	return result{UNKNOWN, "GPUDirect Storage's state is unknown: " + stats.File + " could not be read.", ev, "Run the probe as root, then refresh the facts."}
}

// smiLine is the CSV line of nvidia-smi's output for one GPU index.
func smiLine(raw string, index int) string {
	want := strconv.Itoa(index)
	for _, line := range strings.Split(raw, "\n") {
		if first, _, ok := strings.Cut(line, ","); ok && strings.TrimSpace(first) == want {
			return line
		}
	}
	return ""
}

// toolSource is the first source of a vendor tool in the facts (its raw
// output holds the device's lines); nvidia-smi's own source otherwise.
func toolSource(g facts.GPU, tool string, def facts.Source) facts.Source {
	for _, t := range g.Tools {
		if t.Tool == tool && len(t.Sources) > 0 {
			return t.Sources[0]
		}
	}
	return def
}
