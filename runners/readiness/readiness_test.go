package readiness

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/gpu"
)

type testBundle struct {
	rdma, tcp, failing *facts.Facts
}

// setup loads fresh copies of the fixtures, so a test may mutate them.
func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{rdma: loadFixture(t, "rdma-gpu"), tcp: loadFixture(t, "tcp-nogpu"), failing: loadFixture(t, "failing-ssd")}
}

var (
	optRDMA  = Options{Transport: acceptance.TransportNVMeoFRDMA, GPUExpected: true, FioRequired: true}
	optTCP   = Options{Transport: acceptance.TransportNVMeoFTCP, FioRequired: true}
	optLocal = Options{Transport: acceptance.TransportLocalNVMe, GPUExpected: true, FioRequired: true}
)

func byID(checks []Check) map[string]Check {
	m := map[string]Check{}
	for _, c := range checks {
		m[c.ID] = c
	}
	return m
}

func statuses(checks []Check) map[string]Status {
	m := map[string]Status{}
	for _, c := range checks {
		m[c.ID] = c.Status
	}
	return m
}

// requireWellFormed holds for every evaluation of real facts: checks in
// catalogue order, a summary, a fix unless PASS, and evidence that names
// the command or file it came from.
func requireWellFormed(t *testing.T, checks []Check) {
	t.Helper()
	defs := Definitions()
	pos := map[string]int{}
	for i, d := range defs {
		pos[d.ID] = i
	}
	last := -1
	for _, c := range checks {
		i, ok := pos[c.ID]
		require.True(t, ok, c.ID)
		require.Greater(t, i, last, "%s out of order", c.ID)
		last = i
		d := defs[i]
		require.Equal(t, d.Area, c.Area)
		require.Equal(t, d.Title, c.Title)
		require.Equal(t, d.Blocking, c.Blocking)
		require.NotEmpty(t, c.Summary, c.ID)
		require.Contains(t, []Status{PASS, WARN, FAIL, UNKNOWN, NA}, c.Status)
		if c.Status == NA {
			require.True(t, StoragePathCheck(c.ID), "%s: only a storage path check is n/a", c.ID)
			require.Empty(t, c.Fix, "%s: nothing to fix on an emulated path", c.ID)
			require.Empty(t, c.Evidence, c.ID)
			continue
		}
		if c.Status == PASS {
			require.Empty(t, c.Fix, c.ID)
		} else {
			require.NotEmpty(t, c.Fix, c.ID)
		}
		if c.Status == PASS || c.Status == FAIL || c.Status == WARN {
			named := false
			for _, ev := range c.Evidence {
				require.NotEmpty(t, ev.Fact, c.ID)
				named = named || ev.File != "" || len(ev.Command) > 0
			}
			require.True(t, named, "%s %s has no evidence naming a command or file: %+v", c.ID, c.Status, c.Evidence)
		}
	}
}

// TestEvaluateFixtures asserts every check's outcome on every fixture.
func TestEvaluateFixtures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name string
		f    *facts.Facts
		opts Options
		want map[string]Status
	}{
		{"rdma host with GPUs", b.rdma, optRDMA, map[string]Status{
			"storage.controllers": PASS, "storage.multipath": PASS, "storage.ana": PASS, "storage.queues": PASS,
			"storage.health": PASS, "storage.scheduler": PASS,
			"network.mtu": PASS, "network.link": PASS, "network.rdma": PASS, "network.roce-lossless": PASS,
			"host.kernel": PASS, "host.initiator-modules": PASS, "host.cpufreq": PASS, "host.numa-locality": PASS,
			"gpu.driver": PASS, "gpu.gds": PASS, "tools.fio": PASS, "tools.nvme-cli": PASS,
		}},
		{"rdma host measured as tcp", b.rdma, optTCP, map[string]Status{
			"storage.controllers": FAIL, "storage.multipath": UNKNOWN, "storage.ana": UNKNOWN, "storage.queues": UNKNOWN,
			"storage.health": UNKNOWN, "storage.scheduler": UNKNOWN,
			"network.mtu": UNKNOWN, "network.link": UNKNOWN,
			"host.kernel": PASS, "host.initiator-modules": FAIL, "host.cpufreq": PASS, "host.numa-locality": UNKNOWN,
			"gpu.driver": PASS, "gpu.gds": PASS, "tools.fio": PASS, "tools.nvme-cli": PASS,
		}},
		{"rdma host, local drive under test", b.rdma, Options{Transport: acceptance.TransportLocalNVMe}, map[string]Status{
			"storage.controllers": PASS, "storage.queues": PASS, "storage.health": PASS, "storage.scheduler": PASS,
			"host.kernel": PASS, "host.initiator-modules": PASS, "host.cpufreq": PASS, "host.numa-locality": WARN,
			"gpu.driver": PASS, "gpu.gds": PASS, "tools.fio": PASS, "tools.nvme-cli": PASS,
		}},
		{"tcp host without GPU", b.tcp, optTCP, map[string]Status{
			"storage.controllers": PASS, "storage.multipath": WARN, "storage.ana": WARN, "storage.queues": WARN,
			"storage.health": PASS, "storage.scheduler": WARN,
			"network.mtu": WARN, "network.link": PASS,
			"host.kernel": WARN, "host.initiator-modules": PASS, "host.cpufreq": WARN, "host.numa-locality": PASS,
			"tools.fio": FAIL, "tools.nvme-cli": PASS,
		}},
		{"tcp host, GPU expected, no fio step", b.tcp, Options{Transport: acceptance.TransportNVMeoFTCP, GPUExpected: true}, map[string]Status{
			"storage.controllers": PASS, "storage.multipath": WARN, "storage.ana": WARN, "storage.queues": WARN,
			"storage.health": PASS, "storage.scheduler": WARN,
			"network.mtu": WARN, "network.link": PASS,
			"host.kernel": WARN, "host.initiator-modules": PASS, "host.cpufreq": WARN, "host.numa-locality": PASS,
			"gpu.driver": FAIL, "gpu.gds": WARN, "tools.fio": WARN, "tools.nvme-cli": PASS,
		}},
		{"tcp host measured as rdma", b.tcp, optRDMA, map[string]Status{
			"storage.controllers": FAIL, "storage.multipath": UNKNOWN, "storage.ana": UNKNOWN, "storage.queues": UNKNOWN,
			"storage.health": UNKNOWN, "storage.scheduler": UNKNOWN,
			"network.mtu": UNKNOWN, "network.link": UNKNOWN, "network.rdma": FAIL, "network.roce-lossless": UNKNOWN,
			"host.kernel": WARN, "host.initiator-modules": FAIL, "host.cpufreq": WARN, "host.numa-locality": UNKNOWN,
			"gpu.driver": FAIL, "gpu.gds": WARN, "tools.fio": FAIL, "tools.nvme-cli": PASS,
		}},
		{"failing SSD", b.failing, optLocal, map[string]Status{
			"storage.controllers": PASS, "storage.queues": WARN, "storage.health": FAIL, "storage.scheduler": WARN,
			"host.kernel": PASS, "host.initiator-modules": PASS, "host.cpufreq": PASS, "host.numa-locality": PASS,
			"gpu.driver": PASS, "gpu.gds": WARN, "tools.fio": PASS, "tools.nvme-cli": PASS,
		}},
		{"failing SSD host, no expectation", b.failing, Options{}, map[string]Status{
			"storage.controllers": PASS, "storage.queues": WARN, "storage.health": FAIL, "storage.scheduler": WARN,
			"host.kernel": PASS, "host.initiator-modules": PASS, "host.cpufreq": PASS, "host.numa-locality": PASS,
			"gpu.driver": PASS, "gpu.gds": WARN, "tools.fio": PASS, "tools.nvme-cli": PASS,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checks := Evaluate(tc.f, tc.opts)
			require.Equal(t, tc.want, statuses(checks))
			requireWellFormed(t, checks)
		})
	}
}

// evidenceOf finds the evidence item for a fact.
func evidenceOf(t *testing.T, c Check, fact string) Evidence {
	t.Helper()
	for _, ev := range c.Evidence {
		if ev.Fact == fact {
			return ev
		}
	}
	require.Failf(t, "no evidence", "%s has no evidence %q: %+v", c.ID, fact, c.Evidence)
	return Evidence{}
}

func TestEvidenceNamesItsSource(t *testing.T) {
	t.Parallel()
	b := setup(t)

	failing := byID(Evaluate(b.failing, optLocal))
	cw := evidenceOf(t, failing["storage.health"], "nvme.controllers[nvme1].smart_log.critical_warning")
	require.Equal(t, "4", cw.Value)
	require.Equal(t, []string{"nvme", "smart-log", "/dev/nvme1", "-o", "json"}, cw.Command)
	require.Equal(t, `  "critical_warning" : 4,`, cw.Excerpt, "the line of nvme-cli 1.x output it was read from")
	temp := evidenceOf(t, failing["storage.health"], "nvme.controllers[nvme1].smart_log.temperature_k")
	require.Equal(t, "345", temp.Value)
	require.Contains(t, failing["storage.health"].Summary, "72 °C (345 K)")
	require.Contains(t, failing["storage.health"].Summary, "reliability degraded")
	sched := evidenceOf(t, failing["storage.scheduler"], "nvme.namespaces[nvme1n1].scheduler")
	require.Equal(t, "/sys/block/nvme1n1/queue/scheduler", sched.File)
	require.Equal(t, "mq-deadline kyber [bfq] none", sched.Value)
	gds := evidenceOf(t, failing["gpu.gds"], "gds.stats")
	require.True(t, gds.Absent)
	require.Equal(t, "/proc/driver/nvidia-fs/stats", gds.File)
	require.True(t, strings.HasPrefix(failing["gpu.gds"].Summary, "GDS is not available: reads are CPU-mediated copies, which is what gets measured."))

	tcp := byID(Evaluate(b.tcp, optTCP))
	mtu := evidenceOf(t, tcp["network.mtu"], "network.interfaces[ens3f0].mtu")
	require.Equal(t, "1500", mtu.Value)
	require.Equal(t, []string{"ip", "-j", "link"}, mtu.Command)
	require.Contains(t, mtu.Excerpt, `"ifname":"ens3f0"`)
	require.Contains(t, mtu.Excerpt, `"mtu":1500`)
	require.NotContains(t, mtu.Excerpt, "ens3f1", "only the interface's own object")
	addr := evidenceOf(t, tcp["network.mtu"], "nvme.controllers[nvme0].address")
	require.Equal(t, "/sys/class/nvme/nvme0/address", addr.File, "how the storage interface was found")
	ana := evidenceOf(t, tcp["storage.ana"], "nvme.namespaces[nvme0n1].paths[nvme0c1n1].ana_state")
	require.Equal(t, "inaccessible", ana.Value)
	require.Equal(t, "/sys/block/nvme0c1n1/ana_state", ana.File)
	pol := evidenceOf(t, tcp["storage.multipath"], "nvme.subsystems[nvme-subsys0].iopolicy")
	require.Equal(t, "numa", pol.Value)
	require.Equal(t, "/sys/class/nvme-subsystem/nvme-subsys0/iopolicy", pol.File)
	fio := evidenceOf(t, tcp["tools.fio"], "tools[fio].version")
	require.True(t, fio.Absent)
	require.Equal(t, []string{"fio", "--version"}, fio.Command)
	kernel := evidenceOf(t, tcp["host.kernel"], "kernel.release")
	require.Equal(t, []string{"uname", "-r"}, kernel.Command)
	require.Contains(t, tcp["host.kernel"].Summary, "Enterprise kernels backport")
	q := evidenceOf(t, tcp["storage.queues"], "cpu.cpus")
	require.Equal(t, "64", q.Value)
	require.Contains(t, q.Excerpt, `"CPU(s):"`)

	rdma := byID(Evaluate(b.rdma, optRDMA))
	port := evidenceOf(t, rdma["network.rdma"], "rdma.links[mlx5_1/1].physical_state")
	require.Equal(t, "LINK_UP", port.Value)
	require.Equal(t, []string{"rdma", "-j", "link"}, port.Command)
	require.Contains(t, port.Excerpt, `"netdev":"ens5f0np0"`)
	pfc := evidenceOf(t, rdma["network.roce-lossless"], "network.interfaces[ens1f0np0].pfc")
	require.Equal(t, []string{"dcb", "-j", "pfc", "show", "dev", "ens1f0np0"}, pfc.Command)
	mod := evidenceOf(t, rdma["host.initiator-modules"], "modules.loaded[nvme_rdma]")
	require.Equal(t, "nvme_rdma 53248 4 - Live 0x0000000000000000", mod.Excerpt)
	drv := evidenceOf(t, rdma["gpu.driver"], "gpu.gpus[1].driver_version")
	require.Equal(t, "550.127.05", drv.Value)
	require.Equal(t, []string{"nvidia-smi", "-q", "-x"}, drv.Command)
	require.Contains(t, drv.Excerpt, "<uuid>GPU-")
	cu := evidenceOf(t, rdma["gpu.gds"], "gds.cufile_json")
	require.Equal(t, "allow_compat_mode=true", cu.Value)
	require.Contains(t, rdma["gpu.gds"].Summary, "compatibility mode")
	require.Contains(t, rdma["storage.controllers"].Summary, "nvme0 over pcie", "the local drive is named, not judged")

	// The whole result is what the server stores and renders.
	js, err := json.Marshal(Evaluate(b.rdma, optRDMA))
	require.NoError(t, err)
	var back []Check
	require.NoError(t, json.Unmarshal(js, &back))
	require.Equal(t, Evaluate(b.rdma, optRDMA), back)
}

func TestSummaryAndBlockingFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)

	checks := Evaluate(b.tcp, optTCP)
	pass, warn, fail, unknown := Summary(checks)
	require.Equal(t, [4]int{6, 7, 1, 0}, [4]int{pass, warn, fail, unknown})
	require.Equal(t, len(checks), pass+warn+fail+unknown)
	require.Equal(t, []string{"tools.fio"}, ids(BlockingFailures(checks)))
	require.Equal(t, FAIL, Worst(checks))

	require.Equal(t, []string{"storage.health"}, ids(BlockingFailures(Evaluate(b.failing, optLocal))))
	require.Empty(t, BlockingFailures(Evaluate(b.rdma, optRDMA)))
	require.Equal(t, PASS, Worst(Evaluate(b.rdma, optRDMA)))
	require.Equal(t, []string{"storage.controllers", "host.initiator-modules"}, ids(BlockingFailures(Evaluate(b.rdma, optTCP))))
	require.Equal(t, []string{"storage.controllers", "network.rdma", "host.initiator-modules", "tools.fio"}, ids(BlockingFailures(Evaluate(b.tcp, optRDMA))))

	// A failing non-blocking check and a blocking UNKNOWN hold nothing.
	require.Empty(t, BlockingFailures([]Check{{ID: "gpu.driver", Status: FAIL}, {ID: "storage.ana", Blocking: true, Status: UNKNOWN}}))
	require.Equal(t, PASS, Worst(nil))
	require.Nil(t, Evaluate(nil, optTCP))
}

func ids(checks []Check) []string {
	out := []string{}
	for _, c := range checks {
		out = append(out, c.ID)
	}
	return out
}

func TestDefinitions(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	var blocking []string
	for _, d := range Definitions() {
		require.False(t, seen[d.ID], d.ID)
		seen[d.ID] = true
		require.True(t, strings.HasPrefix(d.ID, d.Area+"."), d.ID)
		require.NotEmpty(t, d.Title)
		require.NotEmpty(t, d.Why)
		if d.Blocking {
			blocking = append(blocking, d.ID)
		}
	}
	require.Equal(t, []string{"storage.controllers", "storage.ana", "storage.health", "network.rdma", "host.initiator-modules", "tools.fio"}, blocking)
}

func TestOptionsFor(t *testing.T) {
	t.Parallel()
	spec := acceptance.ProfileSpec{Storage: acceptance.Storage{Transport: acceptance.TransportNVMeoFTCP},
		Steps: []acceptance.StepSpec{{Kind: acceptance.StepDropCaches}, {Kind: acceptance.StepFio, Fio: &acceptance.FioStep{}}}}
	require.Equal(t, Options{Transport: acceptance.TransportNVMeoFTCP, FioRequired: true}, OptionsFor(spec))
	require.Equal(t, Options{Transport: acceptance.TransportEmulated, Emulated: true}, OptionsFor(acceptance.ProfileSpec{Storage: acceptance.Storage{Transport: acceptance.TransportEmulated}}))
	spec.Steps = spec.Steps[:1]
	require.False(t, OptionsFor(spec).FioRequired)
}

// TestMutations drives each check through the outcomes the fixtures do not
// show, by changing one fact at a time.
func TestMutations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		fix    func(b *testBundle) *facts.Facts
		opts   Options
		check  string
		status Status
		says   string
	}{
		{"controller connecting", func(b *testBundle) *facts.Facts {
			b.rdma.NVMe.Controllers[2].State.Value = "connecting"
			return b.rdma
		}, optRDMA, "storage.controllers", FAIL, `nvme2 is "connecting"`},
		{"no nvme class dir", func(b *testBundle) *facts.Facts {
			b.tcp.NVMe.Controllers = nil
			b.tcp.NVMe.ClassDir = facts.Source{File: "/sys/class/nvme", Absent: true}
			return b.tcp
		}, optTCP, "storage.controllers", FAIL, "no NVMe driver is loaded"},
		{"controller state unreadable", func(b *testBundle) *facts.Facts {
			b.tcp.NVMe.Controllers[0].State = facts.Value{Source: facts.Source{File: "/sys/class/nvme/nvme0/state", Error: "permission denied"}}
			return b.tcp
		}, optTCP, "storage.controllers", UNKNOWN, "could not be read"},
		{"multipath off", func(b *testBundle) *facts.Facts {
			b.rdma.NVMe.Multipath.Value = "N"
			return b.rdma
		}, optRDMA, "storage.multipath", WARN, "multipath is off"},
		{"multipath compiled out", func(b *testBundle) *facts.Facts {
			b.rdma.NVMe.Multipath = facts.Value{Source: facts.Source{File: "/sys/module/nvme_core/parameters/multipath", Absent: true}}
			return b.rdma
		}, optRDMA, "storage.multipath", WARN, "not built into this kernel"},
		{"queue-depth policy", func(b *testBundle) *facts.Facts {
			b.tcp.NVMe.Subsystems[0].IOPolicy.Value = "queue-depth"
			return b.tcp
		}, optTCP, "storage.multipath", PASS, "queue-depth over 2 paths"},
		{"no usable path", func(b *testBundle) *facts.Facts {
			b.tcp.NVMe.Namespaces[0].Paths[0].ANAState.Value = "persistent-loss"
			return b.tcp
		}, optTCP, "storage.ana", FAIL, "no usable path"},
		{"only non-optimized", func(b *testBundle) *facts.Facts {
			for i := range b.rdma.NVMe.Namespaces[1].Paths {
				b.rdma.NVMe.Namespaces[1].Paths[i].ANAState.Value = "non-optimized"
			}
			return b.rdma
		}, optRDMA, "storage.ana", WARN, "No optimized path"},
		{"ANA not reported", func(b *testBundle) *facts.Facts {
			for _, ns := range b.rdma.NVMe.Namespaces {
				for i := range ns.Paths {
					ns.Paths[i].ANAState = facts.Value{Source: facts.Source{File: "/sys/block/" + ns.Paths[i].Name + "/ana_state", Absent: true}}
				}
			}
			return b.rdma
		}, optRDMA, "storage.ana", UNKNOWN, "not reported"},
		{"smart-log skipped", func(b *testBundle) *facts.Facts {
			b.failing.NVMe.Controllers[1].SmartLog = nil
			return b.failing
		}, optLocal, "storage.health", UNKNOWN, "not collected"},
		{"70 °C is not above 70 °C", func(b *testBundle) *facts.Facts {
			sl := b.failing.NVMe.Controllers[0].SmartLog
			k := int64(343)
			sl.TemperatureK = &k
			b.failing.NVMe.Controllers = b.failing.NVMe.Controllers[:1]
			return b.failing
		}, optLocal, "storage.health", PASS, "70 °C"},
		{"71 °C warns", func(b *testBundle) *facts.Facts {
			k := int64(344)
			b.failing.NVMe.Controllers[0].SmartLog.TemperatureK = &k
			b.failing.NVMe.Controllers = b.failing.NVMe.Controllers[:1]
			return b.failing
		}, optLocal, "storage.health", WARN, "71 °C (344 K), above 70 °C"},
		{"media errors alone warn", func(b *testBundle) *facts.Facts {
			zero, used, k := int64(0), int64(10), int64(310)
			sl := b.failing.NVMe.Controllers[1].SmartLog
			sl.CriticalWarning, sl.PercentUsed, sl.TemperatureK = &zero, &used, &k
			return b.failing
		}, optLocal, "storage.health", WARN, "37 media and data integrity errors"},
		{"path scheduler unreadable", func(b *testBundle) *facts.Facts {
			b.rdma.NVMe.Namespaces[1].Paths[0].Scheduler = facts.Value{}
			return b.rdma
		}, optRDMA, "storage.scheduler", UNKNOWN, "nvme1c1n1"},
		{"link down", func(b *testBundle) *facts.Facts {
			b.rdma.Network.Interfaces[1].OperState = "DOWN"
			return b.rdma
		}, optRDMA, "network.link", WARN, "ens1f0np0: down"},
		{"unequal link speeds", func(b *testBundle) *facts.Facts {
			b.rdma.Network.Interfaces[2].SpeedMbs.Value = "100000"
			return b.rdma
		}, optRDMA, "network.link", WARN, "different speeds"},
		{"below minimum speed", func(b *testBundle) *facts.Facts { return b.tcp },
			Options{Transport: acceptance.TransportNVMeoFTCP, MinLinkSpeedMbps: 100000}, "network.link", WARN, "below 100 Gb/s"},
		{"named interface missing", func(b *testBundle) *facts.Facts { return b.tcp },
			Options{Transport: acceptance.TransportNVMeoFTCP, StorageInterfaces: []string{"ens9f0"}}, "network.mtu", FAIL, "ens9f0 is named"},
		{"named interface is used", func(b *testBundle) *facts.Facts { return b.tcp },
			Options{Transport: acceptance.TransportNVMeoFTCP, StorageInterfaces: []string{"eno1"}, MinMTU: 1500}, "network.mtu", PASS, "eno1 1500 (storage interfaces named in the host's settings)"},
		{"one RDMA port down", func(b *testBundle) *facts.Facts {
			b.rdma.RDMA.Links[0].State, b.rdma.RDMA.Links[0].Physics = "DOWN", "POLLING"
			return b.rdma
		}, optRDMA, "network.rdma", WARN, "mlx5_0/1 (ens1f0np0) DOWN/POLLING"},
		{"every RDMA port down", func(b *testBundle) *facts.Facts {
			for i := range b.rdma.RDMA.Links {
				b.rdma.RDMA.Links[i].State = "DOWN"
			}
			return b.rdma
		}, optRDMA, "network.rdma", FAIL, "No RDMA port"},
		{"rdma tool missing", func(b *testBundle) *facts.Facts {
			b.rdma.RDMA.Links = nil
			b.rdma.RDMA.Source = facts.Source{Command: []string{"rdma", "-j", "link"}, Absent: true, Error: "rdma is not installed (not found in PATH)"}
			return b.rdma
		}, optRDMA, "network.rdma", UNKNOWN, "not installed"},
		{"PFC off", func(b *testBundle) *facts.Facts {
			b.rdma.Network.Interfaces[2].PFC.Value = `{"pfc_cap":8,"macsec_bypass":false,"delay":0,"prio_pfc":[false,false,false,false,false,false,false,false]}`
			return b.rdma
		}, optRDMA, "network.roce-lossless", WARN, "ens5f0np0: PFC off on every priority"},
		{"PFC not exposed", func(b *testBundle) *facts.Facts {
			for i := range b.rdma.Network.Interfaces {
				b.rdma.Network.Interfaces[i].PFC = facts.Value{Source: facts.Source{Command: []string{"dcb"}, Absent: true, Error: "exit status 1: Attribute read: Operation not supported"}}
			}
			return b.rdma
		}, optRDMA, "network.roce-lossless", UNKNOWN, "PFC not exposed by the driver"},
		{"old kernel", func(b *testBundle) *facts.Facts {
			b.rdma.Kernel.Release.Value = "4.18.0-553.el8_10.x86_64"
			return b.rdma
		}, optRDMA, "host.kernel", WARN, "based on 4.18"},
		{"custom minimum kernel", func(b *testBundle) *facts.Facts { return b.rdma },
			Options{Transport: acceptance.TransportNVMeoFRDMA, MinKernel: "6.11"}, "host.kernel", WARN, "older than 6.11"},
		{"modules unreadable, controllers prove them", func(b *testBundle) *facts.Facts {
			b.rdma.Modules = facts.Modules{Source: facts.Source{File: "/proc/modules", Absent: true}}
			return b.rdma
		}, optRDMA, "host.initiator-modules", PASS, "nvme_fabrics (required by nvme_rdma), nvme_rdma (in use by nvme1)"},
		{"modules unreadable, nothing proves them", func(b *testBundle) *facts.Facts {
			b.tcp.Modules = facts.Modules{Source: facts.Source{File: "/proc/modules", Absent: true}}
			b.tcp.NVMe.Controllers = nil
			return b.tcp
		}, optTCP, "host.initiator-modules", UNKNOWN, "unknown"},
		{"built-in nvme", func(b *testBundle) *facts.Facts {
			b.failing.Modules.Loaded["nvme"] = false
			b.failing.Modules.Builtin = map[string]bool{"nvme": true}
			return b.failing
		}, optLocal, "host.initiator-modules", PASS, "nvme (built in)"},
		{"mixed governors", func(b *testBundle) *facts.Facts {
			b.rdma.CPUFreq.Governors = map[string]int{"performance": 60, "schedutil": 4}
			return b.rdma
		}, optRDMA, "host.cpufreq", WARN, "schedutil on 4 CPUs"},
		{"GPU far from storage", func(b *testBundle) *facts.Facts {
			b.rdma.Network.Interfaces[2].NUMANode.Value = "0"
			b.rdma.NVMe.Controllers[2].NUMANode.Value = "0"
			return b.rdma
		}, optRDMA, "host.numa-locality", WARN, "GPU 1 (node 1) has no storage device on its node"},
		{"numa node -1 and no topology matrix", func(b *testBundle) *facts.Facts {
			b.rdma.GPU.GPUs[0].NUMANode.Value = "-1"
			b.rdma.GPU.Topology = nil
			return b.rdma
		}, optRDMA, "host.numa-locality", UNKNOWN, "GPU 0"},
		{"driver not talking", func(b *testBundle) *facts.Facts {
			failing(&b.rdma.GPU, "nvidia-smi", "exit status 9: ", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n")
			return b.rdma
		}, optRDMA, "gpu.driver", FAIL, "nvidia-smi -q -x fails: exit status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"},
		{"npu-smi not talking", func(b *testBundle) *facts.Facts {
			// A host whose Ascend driver is broken: npu-smi's own error, not NVIDIA's advice.
			failing(&b.rdma.GPU, "npu-smi", "exit status 1: dcmi module initialize failed. ret is -8005", "")
			b.rdma.GPU.Source = facts.Source{Command: []string{"nvidia-smi", "-q", "-x"}, Absent: true}
			for i := range b.rdma.GPU.Tools {
				if b.rdma.GPU.Tools[i].Tool == "nvidia-smi" {
					b.rdma.GPU.Tools[i].Sources = []facts.Source{b.rdma.GPU.Source}
				}
			}
			return b.rdma
		}, optRDMA, "gpu.driver", FAIL, "npu-smi info fails: exit status 1: dcmi module initialize failed. ret is -8005"},
		{"cufile.json absent", func(b *testBundle) *facts.Facts {
			b.rdma.GDS.CuFileJSON = facts.Source{File: "/etc/cufile.json", Absent: true}
			return b.rdma
		}, optRDMA, "gpu.gds", WARN, "/etc/cufile.json is absent"},
		{"fio 2", func(b *testBundle) *facts.Facts {
			b.rdma.Tools[0].Version = "fio-2.2.10"
			return b.rdma
		}, optRDMA, "tools.fio", WARN, "older than fio 3"},
		{"nvme-cli missing", func(b *testBundle) *facts.Facts {
			b.rdma.Tools[1] = facts.Tool{Name: "nvme-cli", Source: facts.Source{Command: []string{"nvme", "version"}, Absent: true}}
			return b.rdma
		}, optRDMA, "tools.nvme-cli", WARN, "not installed"},
		{"nvme-cli disagrees with sysfs", func(b *testBundle) *facts.Facts {
			b.rdma.NVMe.Mismatches = []string{"nvme-cli lists nvme3n1 but sysfs has no such device"}
			return b.rdma
		}, optRDMA, "tools.nvme-cli", WARN, "disagrees with sysfs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checks := Evaluate(tc.fix(setup(t)), tc.opts)
			requireWellFormed(t, checks)
			c, ok := byID(checks)[tc.check]
			require.True(t, ok, "%s not evaluated", tc.check)
			require.Equal(t, tc.status, c.Status, c.Summary)
			require.Contains(t, c.Summary, tc.says)
		})
	}
}

// failing makes a vendor tool of the facts fail as the collector records
// it: its first source has the error, no device is listed.
func failing(g *facts.GPU, tool, errText, raw string) {
	g.GPUs = nil
	for i := range g.Tools {
		if g.Tools[i].Tool != tool {
			continue
		}
		a, _ := gpu.Lookup(tool)
		src := facts.Source{Command: a.Argv(a.Facts[0]), Raw: raw, Error: errText, ExitCode: 1}
		g.Tools[i].Sources = []facts.Source{src}
		g.Tools[i].Devices = 0
		if tool == "nvidia-smi" {
			g.Source = src
		}
	}
}

func TestInfiniBandSkipsPFC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range b.rdma.Network.Interfaces {
		if strings.HasPrefix(b.rdma.Network.Interfaces[i].Name, "ens") {
			b.rdma.Network.Interfaces[i].LinkType = "infiniband"
		}
	}
	m := byID(Evaluate(b.rdma, optRDMA))
	require.NotContains(t, m, "network.roce-lossless")
	require.Equal(t, PASS, m["network.rdma"].Status)
}

func TestParsers(t *testing.T) {
	t.Parallel()
	s, ok := selectedScheduler("mq-deadline kyber [bfq] none")
	require.True(t, ok)
	require.Equal(t, "bfq", s)
	s, ok = selectedScheduler("none")
	require.True(t, ok)
	require.Equal(t, "none", s)
	_, ok = selectedScheduler("[]")
	require.False(t, ok)

	major, minor, ok := parseKernel("5.14.0-427.13.1.el9_4.x86_64")
	require.True(t, ok)
	require.Equal(t, [2]int{5, 14}, [2]int{major, minor})

	p, err := parsePFC(`{"pfc_cap":8,"prio_pfc":[false,false,false,true,"on",false,false,false]}`)
	require.NoError(t, err)
	require.Equal(t, []int{3, 4}, p)
	_, err = parsePFC(`{"pfc_cap":8}`)
	require.Error(t, err)

	require.Equal(t, map[string][]int{"roce_np": {3}, "roce_rp": {}}, parseECN("roce_np/enable/3=1 roce_np/enable/4=0 roce_rp/enable/3=0 junk"))

	compat, ok := cuFileCompatMode("{\n // \"allow_compat_mode\": false\n \"properties\": { /* x */ \"url\": \"http://a//b\", \"allow_compat_mode\": false }\n}")
	require.True(t, ok)
	require.False(t, compat)

	gds, nvfs := parseGDSStats("GDS Version: 1.16.0.x\nNVFS statistics(ver: 4.0)\nNVFS Driver(version: 2.24)\n")
	require.Equal(t, "1.16.0.x", gds)
	require.Equal(t, "2.24", nvfs)

	require.Equal(t, map[string]string{"traddr": "fe80::1", "trsvcid": "4420", "src_addr": "fe80::2"}, parseAddress("traddr=fe80::1,trsvcid=4420,src_addr=fe80::2"))
	require.Equal(t, "nvme2", pathController("nvme1c2n1"))
	require.Equal(t, "", pathController("nvme1n1"))
	require.Equal(t, `  "b" : 2,`, linesAround("{\n  \"a\" : 1,\n  \"b\" : 2,\n}", `"B"`, 0))
	require.Equal(t, strings.Repeat("é", maxExcerpt/2)+"…", clip(strings.Repeat("é", maxExcerpt)))
}

func TestCheckString(t *testing.T) {
	t.Parallel()
	fails := BlockingFailures(Evaluate(setup(t).tcp, optTCP))
	require.Len(t, fails, 1)
	require.Equal(t, "fio: fio is not installed, and the profile has a fio step.", fails[0].String())
}

// BenchmarkEvaluate measures one host's evaluation (the readiness page; the
// program matrix does it once per host).
func BenchmarkEvaluate(b *testing.B) {
	f := loadFixture(b, "rdma-gpu")
	b.ReportAllocs()
	for b.Loop() {
		Evaluate(f, optRDMA)
	}
}

// Queues that hold fewer entries than the profile's iodepth warn, naming
// the controllers and the depth; the profile's deepest fio step sets it.
func TestQueueSizeAgainstTheProfilesIODepth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := *b.rdma
	f.NVMe.Controllers = slices.Clone(f.NVMe.Controllers)
	for i := range f.NVMe.Controllers {
		c := &f.NVMe.Controllers[i]
		c.SQSize = facts.Value{Value: "127", Source: facts.Source{File: "/sys/class/nvme/" + c.Name + "/sqsize"}}
	}
	deep := optRDMA
	deep.MaxIODepth = 256
	q := byID(Evaluate(&f, deep))["storage.queues"]
	require.Equal(t, WARN, q.Status, q.Summary)
	require.Contains(t, q.Summary, "nvme1 holds 128 entries a queue")
	require.Contains(t, q.Summary, "fewer than the profile's iodepth of 256")
	require.Contains(t, q.Fix, "--queue-size=256")
	require.Contains(t, fmt.Sprint(q.Evidence), "/sys/class/nvme/nvme1/sqsize")

	shallow := optRDMA
	shallow.MaxIODepth = 128
	q = byID(Evaluate(&f, shallow))["storage.queues"]
	require.Equal(t, PASS, q.Status, "128 entries hold an iodepth of 128: %s", q.Summary)
	require.Equal(t, PASS, byID(Evaluate(b.rdma, deep))["storage.queues"].Status, "no sqsize (older kernels): the count alone decides")

	spec := acceptance.ProfileSpec{Steps: []acceptance.StepSpec{
		{Kind: acceptance.StepFio, Fio: &acceptance.FioStep{IODepth: 32}},
		{Kind: acceptance.StepFio, Fio: &acceptance.FioStep{IODepth: 256}},
	}}
	require.Equal(t, 256, OptionsFor(spec).MaxIODepth)
}

// TestGPUDriverIsVendorNeutral: without devices, the check names the
// vendor tool that failed and its own words, and advises on that
// vendor's driver; a host of another vendor's accelerators is not judged
// on NVIDIA's GPUDirect Storage.
func TestGPUDriverIsVendorNeutral(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.rdma
	failing(&f.GPU, "nvidia-smi", "", "")
	f.GPU.Source = facts.Source{Command: []string{"nvidia-smi", "-q", "-x"}, Absent: true, Error: "nvidia-smi is not installed (not found in PATH)"}
	for i := range f.GPU.Tools {
		switch f.GPU.Tools[i].Tool {
		case "nvidia-smi":
			f.GPU.Tools[i].Sources = []facts.Source{f.GPU.Source}
		case "npu-smi":
			f.GPU.Tools[i].Sources = []facts.Source{{Command: []string{"npu-smi", "info"}, Error: "exit status 1: dcmi module initialize failed. ret is -8005", ExitCode: 1}}
		}
	}
	f.Modules.Loaded["nvidia"], f.Modules.Loaded["nvidia_fs"] = false, false
	opts := Options{Transport: acceptance.TransportNVMeoFRDMA}
	m := byID(Evaluate(f, opts))
	c, ok := m["gpu.driver"]
	require.True(t, ok, "an installed vendor tool makes the check apply without the gpu label")
	require.Equal(t, WARN, c.Status, "not expected: a warning")
	require.Equal(t, "npu-smi info fails: exit status 1: dcmi module initialize failed. ret is -8005 (GPUs are not expected on this host).", c.Summary)
	require.Contains(t, c.Fix, "Huawei Ascend driver")
	require.NotContains(t, c.Fix, "NVIDIA")
	require.Equal(t, []string{"npu-smi", "info"}, c.Evidence[0].Command)
	require.NotContains(t, m, "gpu.gds", "GPUDirect Storage is NVIDIA's")

	opts.GPUExpected = true
	require.Equal(t, FAIL, byID(Evaluate(f, opts))["gpu.driver"].Status)

	// The tool runs and lists nothing.
	for i := range f.GPU.Tools {
		if f.GPU.Tools[i].Tool == "npu-smi" {
			f.GPU.Tools[i].Sources = []facts.Source{{Command: []string{"npu-smi", "info"}, Raw: "+----+\n"}}
		}
	}
	c = byID(Evaluate(f, opts))["gpu.driver"]
	require.Equal(t, FAIL, c.Status)
	require.Equal(t, "npu-smi runs but lists no device.", c.Summary)

	// No vendor tool at all, and no driver module loaded.
	for i := range f.GPU.Tools {
		f.GPU.Tools[i].Sources = []facts.Source{{Command: []string{f.GPU.Tools[i].Tool}, Absent: true}}
	}
	c = byID(Evaluate(f, opts))["gpu.driver"]
	require.Equal(t, FAIL, c.Status)
	require.Contains(t, c.Summary, "No accelerator driver: none of the 12 vendor tools Accord reads is installed")
	require.Contains(t, c.Fix, "npu-smi")
	require.Contains(t, byID(Evaluate(f, opts)), "gpu.gds", "no accelerator found: the NVIDIA path is still judged")
}

// An emulated storage path is judged as emulated: the failing-drive host's
// storage checks under a local-NVMe profile are n/a (not its blocking
// FAIL, and not a PASS), while the host's own checks (kernel, CPU
// governor, fio) are judged as on any host. A profile whose transport is
// emulated is the same.
func TestEmulatedPathChecksAreNotApplicable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	real := statuses(Evaluate(b.failing, optLocal))
	require.Equal(t, FAIL, real["storage.health"], "the fixture's drive fails on a real path")

	emu := optLocal
	emu.Emulated = true
	checks := Evaluate(b.failing, emu)
	requireWellFormed(t, checks)
	got := statuses(checks)
	for _, id := range []string{"storage.controllers", "storage.queues", "storage.health", "storage.scheduler", "host.initiator-modules", "gpu.gds", "tools.nvme-cli"} {
		require.Equal(t, NA, got[id], id)
		require.Equal(t, EmulatedSummary, byID(checks)[id].Summary, id)
	}
	for _, id := range []string{"host.kernel", "host.cpufreq", "tools.fio", "gpu.driver"} {
		require.Equal(t, real[id], got[id], "%s is the host's own: judged as on any path", id)
	}
	require.Empty(t, BlockingFailures(checks), "nothing the emulated path cannot have holds a run")
	pass, warn, fail, unknown := Summary(checks)
	require.Equal(t, len(checks), pass+warn+fail+unknown+NotApplicable(checks), "every check counted once")
	require.Equal(t, 7, NotApplicable(checks))
	require.NotEqual(t, NA, Worst(checks))

	// A profile whose transport is emulated implies it; its RDMA-only
	// checks do not apply at all (the profile names no fabric).
	o := OptionsFor(acceptance.ProfileSpec{Storage: acceptance.Storage{Transport: acceptance.TransportEmulated}})
	require.True(t, o.Emulated)
	for _, c := range Evaluate(b.rdma, o) {
		if StoragePathCheck(c.ID) {
			require.Equal(t, NA, c.Status, c.ID)
		} else {
			require.NotEqual(t, NA, c.Status, c.ID)
		}
	}
}
