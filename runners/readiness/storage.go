package readiness

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/accordlab/accord/runners/probe/facts"
)

func ctrlFact(c facts.NVMeController, field string) string {
	return "nvme.controllers[" + c.Name + "]." + field
}

// describeWant names the expected transport for people.
func (e *env) describeWant() string {
	switch e.want {
	case "pcie":
		return "local PCIe"
	case "":
		return "NVMe"
	}
	return e.want
}

// checkControllers: the controllers over the expected transport exist and
// are live. No /sys/class/nvme is a finding (the kernel has no NVMe
// controller), not an unknown.
func checkControllers(e *env) result {
	n := e.f.NVMe
	if len(n.Controllers) == 0 {
		ev := []Evidence{sourceEv("nvme.class_dir", n.ClassDir, "")}
		if n.ClassDir.Error != "" || (!n.ClassDir.Absent && n.ClassDir.File == "") {
			return result{UNKNOWN, "The probe could not list /sys/class/nvme.", ev,
				"Run the probe as root so it can read sysfs, then refresh the facts."}
		}
		why := "/sys/class/nvme exists but holds no controller"
		if n.ClassDir.Absent {
			why = "/sys/class/nvme is absent: no NVMe driver is loaded"
		}
		kind := "NVMe"
		if e.want != "" {
			kind = e.describeWant() + " NVMe"
		}
		return result{FAIL, fmt.Sprintf("No %s controller on this host (%s).", kind, why), ev, e.connectFix()}
	}

	var ev []Evidence
	var statuses []Status
	var live, notLive, unknown []string
	for _, c := range e.ctrls {
		ev = append(ev, valueEv(ctrlFact(c, "transport"), c.Transport), valueEv(ctrlFact(c, "state"), c.State))
		if c.Address.Value != "" {
			ev = append(ev, valueEv(ctrlFact(c, "address"), c.Address))
		}
		label := c.Name
		if c.Address.Value != "" {
			label += " (" + c.Address.Value + ")"
		}
		switch {
		case !c.State.OK() || c.State.Value == "":
			statuses = append(statuses, UNKNOWN)
			unknown = append(unknown, c.Name)
		case c.State.Value == "live":
			statuses = append(statuses, PASS)
			live = append(live, label)
		default:
			statuses = append(statuses, FAIL)
			notLive = append(notLive, fmt.Sprintf("%s is %q", c.Name, c.State.Value))
		}
	}

	// Controllers over other transports: the wrong fabric, or local drives.
	others := map[string][]string{}
	transportUnknown := false
	for _, c := range n.Controllers {
		if e.ctrlSet[c.Name] {
			continue
		}
		t := c.Transport.Value
		if !c.Transport.OK() || t == "" {
			transportUnknown = true
			ev = append(ev, valueEv(ctrlFact(c, "transport"), c.Transport))
			continue
		}
		others[t] = append(others[t], c.Name)
		ev = append(ev, valueEv(ctrlFact(c, "transport"), c.Transport))
	}
	var otherText []string
	wrongFabric := false
	for _, t := range sortedKeys(others) {
		otherText = append(otherText, fmt.Sprintf("%s over %s", strings.Join(others[t], ", "), t))
		if isFabric(t) && isFabric(e.want) {
			wrongFabric = true
		}
	}

	if len(e.ctrls) == 0 {
		if transportUnknown {
			return result{UNKNOWN, "The transport of some controllers could not be read.", ev,
				"Run the probe as root so it can read /sys/class/nvme/*/transport, then refresh the facts."}
		}
		s := fmt.Sprintf("No controller over %s; the host has %s.", e.describeWant(), strings.Join(otherText, "; "))
		if wrongFabric {
			s = fmt.Sprintf("Wrong transport: the profile expects %s but the array is connected as %s.", e.want, strings.Join(otherText, "; "))
		}
		return result{FAIL, s, ev, e.connectFix()}
	}

	status := combine(statuses...)
	var parts []string
	switch status {
	case PASS:
		parts = append(parts, fmt.Sprintf("%d %s %s live: %s.", len(live), e.describeWant(), plural(len(live), "controller", "controllers"), strings.Join(live, ", ")))
	case FAIL:
		parts = append(parts, fmt.Sprintf("Not live: %s.", strings.Join(notLive, ", ")))
		if len(live) > 0 {
			parts = append(parts, fmt.Sprintf("Live: %s.", strings.Join(live, ", ")))
		}
	case UNKNOWN:
		parts = append(parts, fmt.Sprintf("The state of %s could not be read.", strings.Join(unknown, ", ")))
	}
	fix := ""
	switch {
	case status == FAIL:
		fix = "A controller that is not live has lost its path to the array: check the link and port behind it and `nvme list-subsys`; the kernel reconnects by itself once the path is back (ctrl_loss_tmo permitting), otherwise reconnect with nvme connect."
	case status == UNKNOWN:
		fix = "Run the probe as root so it can read /sys/class/nvme/*/state, then refresh the facts."
	}
	if len(otherText) > 0 {
		note := "Also present, not under test: " + strings.Join(otherText, "; ") + "."
		if wrongFabric && status == PASS {
			status = WARN
			note = "Also connected over another fabric: " + strings.Join(otherText, "; ") + ". Make sure the profile's target is a namespace reached over " + e.want + "."
			fix = "Disconnect the controllers over the other transport (nvme disconnect -d nvmeX) or point the profile's target at a namespace of the " + e.want + " subsystem."
		}
		parts = append(parts, note)
	}
	return result{status, strings.Join(parts, " "), ev, fix}
}

func (e *env) connectFix() string {
	switch e.want {
	case "rdma", "tcp":
		return fmt.Sprintf("Load the initiator (modprobe nvme_%s) and connect to the array: nvme connect -t %s -a <array address> -s 4420 -n <subsystem NQN> (or nvme connect-all through a discovery controller); or set the profile's transport to what the host really uses.", e.want, e.want)
	case "pcie":
		return "The profile measures a local NVMe drive but the host shows none: install the drive or load the nvme driver (modprobe nvme), or change the profile's transport."
	}
	return "Connect the storage under test, then refresh the facts."
}

// checkMultipath: native multipath is on, and subsystems with several
// paths spread I/O over them.
func checkMultipath(e *env) result {
	mp := e.f.NVMe.Multipath
	ev := []Evidence{valueEv("nvme.multipath", mp)}
	switch {
	case mp.Absent && len(e.f.NVMe.Controllers) > 0:
		return result{WARN, "Native NVMe multipath is not built into this kernel (nvme_core has no multipath parameter): every path shows as its own namespace unless dm-multipath joins them.", ev,
			"Use a kernel built with CONFIG_NVME_MULTIPATH (all major distributions' kernels are), or set up dm-multipath over the namespaces and point the profile at the multipath device."}
	case !mp.OK() || mp.Value == "":
		return result{UNKNOWN, "Whether native multipath is on is unknown: /sys/module/nvme_core/parameters/multipath could not be read (nvme_core is not loaded).", ev,
			"Load the NVMe driver and connect the array, then refresh the facts."}
	case mp.Value == "N":
		return result{WARN, "Native NVMe multipath is off (nvme_core.multipath=N): every path is its own namespace, so I/O to one of them uses a single path unless dm-multipath is set up.", ev,
			"Boot with nvme_core.multipath=Y (kernel command line, or options nvme_core multipath=Y in /etc/modprobe.d/ and rebuild the initramfs), or use dm-multipath deliberately and target its device."}
	case mp.Value != "Y":
		return result{UNKNOWN, fmt.Sprintf("Unexpected multipath parameter %q.", mp.Value), ev, "Check /sys/module/nvme_core/parameters/multipath on the host."}
	}

	subs := e.subsystems()
	if len(subs) == 0 {
		return result{UNKNOWN, "Native multipath is on, but no subsystem of the controllers under test is listed, so the I/O policy is unknown.", ev,
			"Connect the array's subsystem, then refresh the facts."}
	}
	var statuses []Status
	var parts []string
	fix := ""
	for _, s := range subs {
		ev = append(ev, valueEv("nvme.subsystems["+s.Name+"].iopolicy", s.IOPolicy))
		paths := len(s.Controllers)
		pol := s.IOPolicy.Value
		switch {
		case paths < 2:
			statuses = append(statuses, PASS)
			parts = append(parts, fmt.Sprintf("%s has one path, so its I/O policy does not matter.", s.Name))
		case !s.IOPolicy.OK() || pol == "":
			statuses = append(statuses, UNKNOWN)
			parts = append(parts, fmt.Sprintf("%s has %d paths; its I/O policy could not be read.", s.Name, paths))
			fix = "Read it with cat /sys/class/nvme-subsystem/" + s.Name + "/iopolicy (kernels before 5.1 have no policy: numa behaviour)."
		case pol == "round-robin" || pol == "queue-depth":
			statuses = append(statuses, PASS)
			parts = append(parts, fmt.Sprintf("%s: I/O policy %s over %d paths.", s.Name, pol, paths))
		case pol == "numa":
			statuses = append(statuses, WARN)
			parts = append(parts, fmt.Sprintf("%s has %d paths with I/O policy numa: each CPU sends its I/O to the one optimized path nearest its NUMA node, so a job running on one node uses a single path and the others idle; round-robin or queue-depth (kernel 6.11+) spread I/O over every optimized path.", s.Name, paths))
			fix = fmt.Sprintf("echo round-robin > /sys/class/nvme-subsystem/%s/iopolicy, and persist it with a udev rule (ACTION==\"add|change\", SUBSYSTEM==\"nvme-subsystem\", ATTR{iopolicy}=\"round-robin\") or nvme_core.iopolicy=round-robin on kernels that have it.", s.Name)
		default:
			statuses = append(statuses, UNKNOWN)
			parts = append(parts, fmt.Sprintf("%s: I/O policy %q is not one this check knows.", s.Name, pol))
			fix = "Check the kernel's documentation of the nvme-subsystem iopolicy attribute."
		}
	}
	return result{combine(statuses...), "Native multipath is on. " + strings.Join(parts, " "), ev, fix}
}

// checkANA: every namespace has a usable path; inaccessible paths warn.
func checkANA(e *env) result {
	if len(e.ctrls) == 0 {
		return result{UNKNOWN, "No controller under test to inspect.", nil, "Connect the storage under test, then refresh the facts."}
	}
	var ev []Evidence
	var statuses []Status
	var parts []string
	fix := ""
	seenPaths := false
	for _, ns := range e.namespaces() {
		paths := e.paths(ns)
		if len(paths) == 0 {
			continue
		}
		seenPaths = true
		var opt, nonopt, bad, unknown int
		var desc []string
		for _, p := range paths {
			fact := "nvme.namespaces[" + ns.Name + "].paths[" + p.Name + "].ana_state"
			ev = append(ev, valueEv(fact, p.ANAState))
			st := p.ANAState.Value
			if !p.ANAState.OK() || st == "" {
				unknown++
				desc = append(desc, p.Name+" unknown")
				continue
			}
			desc = append(desc, p.Name+" "+st)
			switch st {
			case "optimized":
				opt++
			case "non-optimized":
				nonopt++
			case "inaccessible", "persistent-loss", "change":
				bad++
			default:
				unknown++
			}
		}
		line := ns.Name + ": " + strings.Join(desc, ", ") + "."
		switch {
		case opt+nonopt == 0 && unknown == 0:
			statuses = append(statuses, FAIL)
			line = ns.Name + " has no usable path (" + strings.Join(desc, ", ") + "): I/O to it cannot be served."
			fix = "Check the namespace's mapping to this host's ports on the array and `nvme ana-log /dev/" + pathController(paths[0].Name) + "`: every ANA group reaching this host reports it inaccessible."
		case bad > 0 || (opt == 0 && nonopt > 0):
			statuses = append(statuses, WARN)
			if opt == 0 {
				line += " No optimized path: I/O runs on non-optimized paths, usually through the partner controller, at higher latency."
			} else {
				line += " Some paths are not usable, so I/O runs on the remaining ones."
			}
			if fix == "" {
				fix = "Check the array port and the link behind the inaccessible or non-optimized paths; results measured now reflect a degraded path set."
			}
		case unknown > 0:
			statuses = append(statuses, UNKNOWN)
			line = ns.Name + ": the ANA state of some paths is not reported (the array may not support ANA)."
			if fix == "" {
				fix = "Ask the array vendor whether ANA is enabled for this host's ports; without ANA the kernel treats every live path as optimized."
			}
		default:
			statuses = append(statuses, PASS)
		}
		parts = append(parts, line)
	}
	if !seenPaths {
		s := "The kernel exposes no per-path devices for the namespaces under test, so their ANA states are unknown."
		if e.f.NVMe.Multipath.Value == "N" {
			s = "Native multipath is off, so the kernel exposes no per-path ANA state."
		}
		return result{UNKNOWN, s, append(ev, valueEv("nvme.multipath", e.f.NVMe.Multipath)),
			"Enable native multipath (nvme_core.multipath=Y) and connect every path of the subsystem, then refresh the facts."}
	}
	return result{combine(statuses...), strings.Join(parts, " "), ev, fix}
}

// checkQueues: each controller has an I/O queue per CPU (queue_count
// includes the admin queue), and its queues hold at least the profile's
// fio iodepth.
func checkQueues(e *env) result {
	res := checkQueueCount(e)
	if len(e.ctrls) == 0 || e.o.MaxIODepth <= 0 {
		return res
	}
	var small []string
	for _, c := range e.ctrls {
		n, err := strconv.Atoi(c.SQSize.Value)
		if !c.SQSize.OK() || err != nil || n < 0 {
			continue // older kernels have no sqsize: the count alone decides
		}
		res.evidence = append(res.evidence, valueEv(ctrlFact(c, "sqsize"), c.SQSize))
		if entries := n + 1; entries < e.o.MaxIODepth {
			small = append(small, fmt.Sprintf("%s holds %d entries a queue", c.Name, entries))
		}
	}
	if len(small) == 0 {
		return res
	}
	res.summary = strings.TrimSpace(res.summary + " " + fmt.Sprintf("%s, fewer than the profile's iodepth of %d: the rest wait in the host, not on the device.",
		strings.Join(small, "; "), e.o.MaxIODepth))
	fix := fmt.Sprintf("Reconnect with deeper queues (nvme connect ... --queue-size=%d or more; the array may cap it), or lower the profile's iodepth to what the queues hold.", e.o.MaxIODepth)
	if res.status == PASS {
		res.fix = fix
	} else {
		res.fix = strings.TrimSpace(res.fix + " " + fix)
	}
	res.status = combine(res.status, WARN)
	return res
}

func checkQueueCount(e *env) result {
	cpus := e.f.CPU.CPUs
	cpuEv := sourceEv("cpu.cpus", e.f.CPU.Source, linesAround(e.f.CPU.Source.Raw, `"CPU(s):"`, 1))
	cpuEv.Value = strconv.Itoa(cpus)
	ev := []Evidence{cpuEv}
	if cpus <= 0 {
		return result{UNKNOWN, "The CPU count is unknown, so the queue count cannot be judged.", ev,
			"Install lscpu (util-linux) on the host, then refresh the facts."}
	}
	if len(e.ctrls) == 0 {
		return result{UNKNOWN, "No controller under test to inspect.", ev, "Connect the storage under test, then refresh the facts."}
	}
	var statuses []Status
	var short, ok []string
	fabric := false
	for _, c := range e.ctrls {
		ev = append(ev, valueEv(ctrlFact(c, "queue_count"), c.QueueCount))
		n, err := strconv.Atoi(c.QueueCount.Value)
		if !c.QueueCount.OK() || err != nil || n < 1 {
			statuses = append(statuses, UNKNOWN)
			continue
		}
		io := n - 1
		if io < cpus {
			statuses = append(statuses, WARN)
			short = append(short, fmt.Sprintf("%s has %d I/O %s", c.Name, io, plural(io, "queue", "queues")))
			fabric = fabric || isFabric(c.Transport.Value)
		} else {
			statuses = append(statuses, PASS)
			ok = append(ok, fmt.Sprintf("%s %d", c.Name, io))
		}
	}
	status := combine(statuses...)
	switch status {
	case PASS:
		return result{PASS, fmt.Sprintf("Every controller has at least one I/O queue per CPU (%d CPUs; I/O queues: %s; queue_count includes the admin queue).", cpus, strings.Join(ok, ", ")), ev, ""}
	case WARN:
		fix := "The drive exposes fewer queues than the host has CPUs (its own limit): CPUs share queues; keep fio's numjobs at or below the queue count, or accept the sharing as part of what is measured."
		if fabric {
			fix = fmt.Sprintf("Reconnect with one I/O queue per CPU: nvme connect ... --nr-io-queues=%d (the default is the number of online CPUs, so a smaller value was set at connect time or the array caps it).", cpus)
		}
		return result{WARN, fmt.Sprintf("%s, fewer than the %d CPUs: CPUs share queues, which limits parallelism at high queue depth.", strings.Join(short, "; "), cpus), ev, fix}
	}
	return result{UNKNOWN, "The queue count of some controllers could not be read.", ev, "Run the probe as root so it can read /sys/class/nvme/*/queue_count."}
}

// criticalBits decodes the SMART critical warning byte.
var criticalBits = []struct {
	bit  int64
	text string
}{
	{0x01, "available spare below threshold"},
	{0x02, "temperature beyond a threshold"},
	{0x04, "NVM subsystem reliability degraded (media or internal errors)"},
	{0x08, "media placed in read-only mode"},
	{0x10, "volatile memory backup device failed"},
	{0x20, "persistent memory region read-only"},
}

func decodeCritical(v int64) string {
	var out []string
	for _, b := range criticalBits {
		if v&b.bit != 0 {
			out = append(out, b.text)
		}
	}
	if len(out) == 0 {
		return "reserved bits set"
	}
	return strings.Join(out, "; ")
}

// checkHealth reads smart-log: a critical warning fails, media errors,
// endurance used and temperature warn. nvme-cli reports Kelvin.
func checkHealth(e *env) result {
	if len(e.ctrls) == 0 {
		return result{UNKNOWN, "No controller under test to inspect.", nil, "Connect the storage under test, then refresh the facts."}
	}
	var ev []Evidence
	var statuses []Status
	var parts []string
	var critFixes, fixes []string
	for _, c := range e.ctrls {
		sl := c.SmartLog
		if sl == nil {
			statuses = append(statuses, UNKNOWN)
			parts = append(parts, c.Name+": smart-log was not collected.")
			ev = append(ev, Evidence{Fact: ctrlFact(c, "smart_log"), Command: []string{"nvme", "smart-log", "/dev/" + c.Name, "-o", "json"}, Absent: true})
			continue
		}
		src := sl.Source
		if !src.OK() {
			ev = append(ev, sourceEv(ctrlFact(c, "smart_log"), src, src.Raw))
			statuses = append(statuses, UNKNOWN)
			why := src.Error
			if src.Absent {
				why = "nvme-cli is not installed"
			}
			parts = append(parts, c.Name+": no SMART data ("+why+").")
			continue
		}
		field := func(name, key string, v *int64) Evidence {
			ev := sourceEv(ctrlFact(c, "smart_log."+name), src, linesAround(src.Raw, `"`+key+`"`, 0))
			if v != nil {
				ev.Value = strconv.FormatInt(*v, 10)
			}
			return ev
		}
		ev = append(ev, field("critical_warning", "critical_warning", sl.CriticalWarning),
			field("media_errors", "media_errors", sl.MediaErrors),
			field("percent_used", "percent_used", sl.PercentUsed),
			field("temperature_k", "temperature", sl.TemperatureK))
		var mine []Status
		var notes []string
		if len(sl.Problems) > 0 {
			mine = append(mine, UNKNOWN)
			notes = append(notes, "smart-log did not parse ("+strings.Join(sl.Problems, "; ")+")")
		}
		switch cw := sl.CriticalWarning; {
		case cw == nil:
			mine = append(mine, UNKNOWN)
			notes = append(notes, "critical warning not reported")
		case *cw != 0:
			mine = append(mine, FAIL)
			notes = append(notes, fmt.Sprintf("critical warning 0x%02x: %s", *cw, decodeCritical(*cw)))
			critFixes = append(critFixes, fmt.Sprintf("%s reports a critical warning: service or replace it (model %s, serial %s) or move the test to a healthy drive; a degraded drive's numbers do not represent the product.", c.Name, c.Model.Value, c.Serial.Value))
		}
		if me := sl.MediaErrors; me != nil && *me > 0 {
			mine = append(mine, WARN)
			notes = append(notes, fmt.Sprintf("%d media and data integrity errors", *me))
			fixes = append(fixes, fmt.Sprintf("Check nvme error-log /dev/%s and whether the media error count grows between runs; plan a replacement.", c.Name))
		}
		if pu := sl.PercentUsed; pu != nil && *pu >= PercentUsedWarn {
			mine = append(mine, WARN)
			notes = append(notes, fmt.Sprintf("%d %% of rated endurance used", *pu))
			fixes = append(fixes, fmt.Sprintf("%s is near its rated endurance: expect more background work (and latency) and plan its replacement.", c.Name))
		}
		if t := sl.TemperatureK; t != nil && *t > 0 {
			celsius := *t - 273
			if celsius > int64(e.o.MaxTemperatureC) {
				mine = append(mine, WARN)
				notes = append(notes, fmt.Sprintf("%d °C (%d K), above %d °C", celsius, *t, e.o.MaxTemperatureC))
				fixes = append(fixes, fmt.Sprintf("%s runs hot: check airflow and the fan profile; hot drives throttle and their latency rises.", c.Name))
			} else {
				notes = append(notes, fmt.Sprintf("%d °C", celsius))
			}
		}
		st := combine(append(mine, PASS)...)
		statuses = append(statuses, st)
		if st == PASS {
			parts = append(parts, fmt.Sprintf("%s healthy (no critical warning, %s).", c.Name, healthNumbers(sl)))
		} else {
			parts = append(parts, c.Name+": "+strings.Join(notes, "; ")+".")
		}
	}
	fix := strings.Join(append(critFixes, fixes...), " ")
	status := combine(statuses...)
	if status == UNKNOWN && fix == "" {
		fix = "Install nvme-cli on the host and run the probe as root (smart-log needs the admin queue), then refresh the facts."
	}
	return result{status, strings.Join(parts, " "), ev, fix}
}

func healthNumbers(sl *facts.SmartLog) string {
	var out []string
	if sl.MediaErrors != nil {
		out = append(out, fmt.Sprintf("%d media errors", *sl.MediaErrors))
	}
	if sl.PercentUsed != nil {
		out = append(out, fmt.Sprintf("%d %% used", *sl.PercentUsed))
	}
	switch t := sl.TemperatureK; {
	case t != nil && *t > 0:
		out = append(out, fmt.Sprintf("%d °C", *t-273))
	case t != nil:
		out = append(out, "temperature not reported")
	}
	return strings.Join(out, ", ")
}

// checkScheduler: none or mq-deadline on the devices that carry requests
// (the paths, when the namespace is a bio-based multipath head).
func checkScheduler(e *env) result {
	nss := e.namespaces()
	if len(nss) == 0 {
		return result{UNKNOWN, "No namespace of the controllers under test is listed.", nil, "Connect the storage under test (and map a namespace to this host), then refresh the facts."}
	}
	var ev []Evidence
	var statuses []Status
	var bad, good []string
	var unknown []string
	for _, ns := range nss {
		type dev struct {
			name, fact string
			v          facts.Value
		}
		var devs []dev
		if ps := e.paths(ns); len(ps) > 0 {
			for _, p := range ps {
				devs = append(devs, dev{p.Name, "nvme.namespaces[" + ns.Name + "].paths[" + p.Name + "].scheduler", p.Scheduler})
			}
		} else {
			devs = append(devs, dev{ns.Name, "nvme.namespaces[" + ns.Name + "].scheduler", ns.Scheduler})
		}
		for _, d := range devs {
			ev = append(ev, valueEv(d.fact, d.v))
			sched, ok := selectedScheduler(d.v.Value)
			switch {
			case !d.v.OK() || !ok:
				statuses = append(statuses, UNKNOWN)
				unknown = append(unknown, d.name)
			case sched == "none" || sched == "mq-deadline":
				statuses = append(statuses, PASS)
				good = append(good, d.name+" "+sched)
			default:
				statuses = append(statuses, WARN)
				bad = append(bad, d.name+" "+sched)
			}
		}
	}
	switch status := combine(statuses...); status {
	case PASS:
		return result{PASS, "Schedulers: " + strings.Join(good, ", ") + ".", ev, ""}
	case WARN:
		return result{WARN, "Scheduler not suited to NVMe: " + strings.Join(bad, ", ") + ". bfq and kyber add per-request CPU cost and latency; NVMe devices want none (or mq-deadline).", ev,
			"echo none > /sys/block/<device>/queue/scheduler for each device listed, and persist it with a udev rule (ACTION==\"add|change\", KERNEL==\"nvme*\", ATTR{queue/scheduler}=\"none\")."}
	default:
		return result{UNKNOWN, "The scheduler of " + strings.Join(unknown, ", ") + " could not be read.", ev,
			"Refresh the facts with a current probe (it reads each path's queue/scheduler)."}
	}
}
