package readiness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/internal/fakebin"
	"github.com/accordlab/accord/runners/probe/facts"
)

// fakeHost is a lab host made of files under a root directory (sysfs,
// procfs, /etc) and of programs that print what the real tools print on
// such a host. The real collector (facts.Collect) runs against it, so the
// fixtures are what the probe writes, not hand-written facts.
type fakeHost struct {
	name  string
	files map[string]string
	links map[string]string // path → symlink target (relative, as sysfs has them)
	dirs  []string
	cmds  map[string]map[string]fakeOutput // program → joined arguments → output
}

type fakeOutput struct {
	stdout, stderr string
	code           int
}

func newFakeHost(name string) *fakeHost {
	return &fakeHost{name: name, files: map[string]string{}, links: map[string]string{}, cmds: map[string]map[string]fakeOutput{}}
}

func (h *fakeHost) file(path, content string) { h.files[path] = content }
func (h *fakeHost) attr(path, value string)   { h.files[path] = value + "\n" }
func (h *fakeHost) link(path, target string)  { h.links[path] = target }
func (h *fakeHost) dir(path string)           { h.dirs = append(h.dirs, path) }

// cmd records what argv prints; argv[0] is the program.
func (h *fakeHost) cmd(argv []string, stdout string) { h.cmdResult(argv, fakeOutput{stdout: stdout}) }

func (h *fakeHost) cmdResult(argv []string, out fakeOutput) {
	if h.cmds[argv[0]] == nil {
		h.cmds[argv[0]] = map[string]fakeOutput{}
	}
	h.cmds[argv[0]][strings.Join(argv[1:], " ")] = out
}

// build writes the host's tree and programs and returns a runner for it.
func (h *fakeHost) build(t testing.TB) *facts.Runner {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	bin := filepath.Join(base, "bin")
	outs := filepath.Join(base, "out")
	for _, d := range []string{root, bin, outs} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for _, d := range h.dirs {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	for p, c := range h.files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	for p, target := range h.links {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.Symlink(target, full))
	}
	// Each program is a shell script that matches its arguments exactly and
	// prints a recorded file; anything else is an error, so a collector
	// asking for something new shows up in the fixture.
	n := 0
	for prog, byArgs := range h.cmds {
		var sb strings.Builder
		sb.WriteString("#!/bin/sh\ncase \"$*\" in\n")
		for _, args := range sortedKeys(byArgs) {
			out := byArgs[args]
			n++
			stdout := filepath.Join(outs, fmt.Sprintf("%d.out", n))
			stderr := filepath.Join(outs, fmt.Sprintf("%d.err", n))
			require.NoError(t, os.WriteFile(stdout, []byte(out.stdout), 0o644))
			require.NoError(t, os.WriteFile(stderr, []byte(out.stderr), 0o644))
			require.NotContains(t, args, "'")
			fmt.Fprintf(&sb, "'%s') cat '%s'; cat '%s' >&2; exit %d;;\n", args, stdout, stderr, out.code)
		}
		sb.WriteString("esac\necho \"fake " + prog + ": unexpected arguments: $*\" >&2\nexit 2\n")
		fakebin.Write(t, filepath.Join(bin, prog), sb.String())
	}
	return &facts.Runner{Root: root, LookPath: func(name string) (string, error) {
		p := filepath.Join(bin, name)
		if _, err := os.Stat(p); err != nil {
			return "", exec.ErrNotFound
		}
		return p, nil
	}}
}

// collect runs the real collector against the host, with the two values
// that do not come from the root (time and hostname) fixed.
func (h *fakeHost) collect(t testing.TB) *facts.Facts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := facts.Collect(ctx, facts.Options{Runner: h.build(t)})
	require.NoError(t, err)
	f.CollectedAt = "2026-11-30T09:00:00Z"
	f.Hostname = facts.Value{Value: h.name, Source: facts.Source{Command: []string{"hostname"}}}
	return f
}

// Builders of realistic host parts.

type nicSpec struct {
	name, mac, driver, pci, vendor, device, numa string
	mtu, speed                                   int
	up                                           bool
	addrs                                        []string // CIDR
	pfc                                          *fakeOutput
	ecnPrios                                     []int // mlx5 ECN enabled priorities (nil: not exposed)
	linkType                                     string
}

func (h *fakeHost) nics(specs []nicSpec) {
	var links, addrs []map[string]any
	for i, n := range specs {
		lt := n.linkType
		if lt == "" {
			lt = "ether"
		}
		flags := []string{"BROADCAST", "MULTICAST"}
		state := "DOWN"
		if n.up {
			flags = append(flags, "UP", "LOWER_UP")
			state = "UP"
		}
		if lt == "loopback" {
			flags = []string{"LOOPBACK", "UP", "LOWER_UP"}
			state = "UNKNOWN"
		}
		l := map[string]any{"ifindex": i + 1, "ifname": n.name, "flags": flags, "mtu": n.mtu, "qdisc": "mq", "operstate": state,
			"linkmode": "DEFAULT", "group": "default", "txqlen": 1000, "link_type": lt, "address": n.mac, "broadcast": "ff:ff:ff:ff:ff:ff"}
		if lt == "loopback" {
			l["qdisc"], l["broadcast"] = "noqueue", "00:00:00:00:00:00"
		}
		links = append(links, l)
		var infos []map[string]any
		for _, a := range n.addrs {
			ip, plen, _ := strings.Cut(a, "/")
			family := "inet"
			if strings.Contains(ip, ":") {
				family = "inet6"
			}
			var prefix int
			fmt.Sscan(plen, &prefix)
			infos = append(infos, map[string]any{"family": family, "local": ip, "prefixlen": prefix, "scope": "global", "valid_life_time": 4294967295, "preferred_life_time": 4294967295})
		}
		a := map[string]any{}
		for k, v := range l {
			a[k] = v
		}
		delete(a, "linkmode")
		a["addr_info"] = infos
		addrs = append(addrs, a)

		dir := "/sys/class/net/" + n.name
		h.attr(dir+"/mtu", fmt.Sprint(n.mtu))
		if n.pci == "" {
			continue // virtual: no device, and reading speed gives EINVAL (absent here)
		}
		if n.up {
			h.attr(dir+"/speed", fmt.Sprint(n.speed))
		} else {
			h.attr(dir+"/speed", "-1")
		}
		bus := "pci0000:" + n.pci[5:7]
		dev := "/sys/devices/" + bus + "/" + n.pci
		h.link(dir+"/device", "../../../devices/"+bus+"/"+n.pci)
		h.attr(dev+"/vendor", n.vendor)
		h.attr(dev+"/device", n.device)
		h.attr(dev+"/numa_node", n.numa)
		h.link(dev+"/driver", "../../../bus/pci/drivers/"+n.driver)
		if n.ecnPrios != nil {
			on := map[int]bool{}
			for _, p := range n.ecnPrios {
				on[p] = true
			}
			for _, point := range []string{"roce_np", "roce_rp"} {
				for p := 0; p < 8; p++ {
					v := "0"
					if on[p] {
						v = "1"
					}
					h.attr(fmt.Sprintf("%s/ecn/%s/enable/%d", dir, point, p), v)
				}
			}
		}
		argv := []string{"dcb", "-j", "pfc", "show", "dev", n.name}
		if n.pfc != nil {
			h.cmdResult(argv, *n.pfc)
		} else {
			h.cmdResult(argv, fakeOutput{stderr: "Attribute read: Operation not supported\n", code: 1})
		}
	}
	lj, _ := json.Marshal(links)
	aj, _ := json.Marshal(addrs)
	h.cmd([]string{"ip", "-j", "link"}, string(lj)+"\n")
	h.cmd([]string{"ip", "-j", "addr"}, string(aj)+"\n")
}

// pfcJSON is `dcb -j pfc show dev X` with PFC on the given priorities.
func pfcJSON(prios ...int) *fakeOutput {
	on := map[int]bool{}
	for _, p := range prios {
		on[p] = true
	}
	var parts []string
	for p := 0; p < 8; p++ {
		parts = append(parts, fmt.Sprint(on[p]))
	}
	return &fakeOutput{stdout: `{"pfc_cap":8,"macsec_bypass":false,"delay":0,"prio_pfc":[` + strings.Join(parts, ",") + "]}\n"}
}

type ctrlSpec struct {
	name, transport, address, nqn, model, serial, fw, state, numa string
	queues                                                        int
	smart                                                         string // smart-log JSON as nvme-cli prints it
}

func (h *fakeHost) controllers(specs []ctrlSpec) {
	for _, c := range specs {
		d := "/sys/class/nvme/" + c.name + "/"
		h.attr(d+"transport", c.transport)
		h.attr(d+"address", c.address)
		h.attr(d+"subsysnqn", c.nqn)
		h.attr(d+"state", c.state)
		// sysfs pads model and serial with spaces to their field width.
		h.file(d+"model", fmt.Sprintf("%-40s\n", c.model))
		h.file(d+"serial", fmt.Sprintf("%-20s\n", c.serial))
		h.file(d+"firmware_rev", fmt.Sprintf("%-8s\n", c.fw))
		h.attr(d+"queue_count", fmt.Sprint(c.queues))
		h.attr(d+"numa_node", c.numa)
		h.cmd([]string{"nvme", "smart-log", "/dev/" + c.name, "-o", "json"}, c.smart)
	}
}

func (h *fakeHost) subsystem(name, nqn, model, iopolicy string, ctrls ...string) {
	d := "/sys/class/nvme-subsystem/" + name + "/"
	h.attr(d+"subsysnqn", nqn)
	h.file(d+"model", fmt.Sprintf("%-40s\n", model))
	h.attr(d+"iopolicy", iopolicy)
	for _, c := range ctrls {
		h.link(d+c, "../../../devices/virtual/nvme-fabrics/ctl/"+c)
	}
}

// namespace adds a namespace's block device; paths maps a path device to
// its ANA state and scheduler.
func (h *fakeHost) namespace(name, scheduler string, paths [][3]string) {
	q := "/sys/block/" + name + "/queue/"
	h.attr(q+"scheduler", scheduler)
	h.attr(q+"nr_requests", "1023")
	h.attr(q+"read_ahead_kb", "128")
	h.attr(q+"rotational", "0")
	for _, p := range paths {
		h.attr("/sys/block/"+p[0]+"/ana_state", p[1])
		h.attr("/sys/block/"+p[0]+"/queue/scheduler", p[2])
	}
}

// cpu writes lscpu -J (util-linux 2.37+ nested form), /proc/cpuinfo's first
// block, the NUMA nodes and the cpufreq governors (none: no cpufreq).
func (h *fakeHost) cpu(vendor, model, family, modelNo string, sockets, cores, threads int, nodeCPUs []string, governor string) {
	cpus := sockets * cores * threads
	type field struct {
		Field    string  `json:"field"`
		Data     *string `json:"data"`
		Children []field `json:"children,omitempty"`
	}
	s := func(v string) *string { return &v }
	f := func(k, v string, children ...field) field {
		return field{Field: k + ":", Data: s(v), Children: children}
	}
	numa := []field{f("NUMA node(s)", fmt.Sprint(len(nodeCPUs)))}
	for i, l := range nodeCPUs {
		numa = append(numa, f(fmt.Sprintf("NUMA node%d CPU(s)", i), l))
	}
	doc := map[string][]field{"lscpu": {
		f("Architecture", "x86_64", f("CPU op-mode(s)", "32-bit, 64-bit"), f("Address sizes", "46 bits physical, 57 bits virtual"), f("Byte Order", "Little Endian")),
		f("CPU(s)", fmt.Sprint(cpus), f("On-line CPU(s) list", fmt.Sprintf("0-%d", cpus-1))),
		f("Vendor ID", vendor, f("Model name", model, f("CPU family", family), f("Model", modelNo),
			f("Thread(s) per core", fmt.Sprint(threads)), f("Core(s) per socket", fmt.Sprint(cores)), f("Socket(s)", fmt.Sprint(sockets)))),
		{Field: "NUMA:", Children: numa},
	}}
	b, _ := json.MarshalIndent(doc, "", "   ")
	h.cmd([]string{"lscpu", "-J"}, string(b)+"\n")
	h.file("/proc/cpuinfo", fmt.Sprintf("processor\t: 0\nvendor_id\t: %s\ncpu family\t: %s\nmodel\t\t: %s\nmodel name\t: %s\nphysical id\t: 0\nsiblings\t: %d\ncore id\t\t: 0\ncpu cores\t: %d\n\nprocessor\t: 1\nvendor_id\t: %s\n\n",
		vendor, family, modelNo, model, cores*threads, cores, vendor))
	online := "0"
	if len(nodeCPUs) > 1 {
		online = fmt.Sprintf("0-%d", len(nodeCPUs)-1)
	}
	h.attr("/sys/devices/system/node/online", online)
	for i, l := range nodeCPUs {
		h.attr(fmt.Sprintf("/sys/devices/system/node/node%d/cpulist", i), l)
	}
	if governor != "" {
		for i := 0; i < cpus; i++ {
			h.attr(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor", i), governor)
		}
	}
}

func (h *fakeHost) modules(lines ...string) {
	h.file("/proc/modules", strings.Join(lines, "\n")+"\n")
	for _, l := range lines {
		h.dir("/sys/module/" + strings.Fields(l)[0])
	}
}

func (h *fakeHost) uname(release, version string) {
	h.cmd([]string{"uname", "-r"}, release+"\n")
	h.cmd([]string{"uname", "-v"}, version+"\n")
	h.cmd([]string{"uname", "-m"}, "x86_64\n")
}

func (h *fakeHost) meminfo(totalKiB, availKiB int64) {
	h.file("/proc/meminfo", fmt.Sprintf("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nBuffers:          123456 kB\nCached:         8123456 kB\nHugePages_Total:       0\nHugePages_Free:        0\nHugepagesize:       2048 kB\n", totalKiB, availKiB-1000000, availKiB))
}

// gpus writes nvidia-smi's XML report (-q -x) in the shape of the
// recorded ones in runners/probe/gpu/testdata, trimmed to the elements
// the adapter reads.
func (h *fakeHost) gpus(driver string, rows [][4]string) {
	var b strings.Builder
	fmt.Fprintf(&b, "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v12.dtd\">\n<nvidia_smi_log>\n\t<driver_version>%s</driver_version>\n\t<attached_gpus>%d</attached_gpus>\n", driver, len(rows))
	for _, r := range rows { // name, uuid, bus id, memory MiB
		fmt.Fprintf(&b, "\t<gpu id=\"%s\">\n\t\t<product_name>%s</product_name>\n\t\t<uuid>%s</uuid>\n\t\t<pci>\n\t\t\t<pci_bus_id>%s</pci_bus_id>\n\t\t</pci>\n\t\t<fb_memory_usage>\n\t\t\t<total>%s MiB</total>\n\t\t</fb_memory_usage>\n\t</gpu>\n", r[2], r[0], r[1], r[2], r[3])
	}
	b.WriteString("</nvidia_smi_log>\n")
	h.cmd([]string{"nvidia-smi", "-q", "-x"}, b.String())
}

func (h *fakeHost) gpuNode(busID, node string) {
	h.attr("/sys/bus/pci/devices/"+facts.SysfsPCIAddress(busID)+"/numa_node", node)
}
