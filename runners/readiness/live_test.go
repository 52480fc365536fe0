package readiness

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
)

// absenceIsFinding are the checks whose facts are findings by their
// absence: no /sys/class/nvme (no NVMe controller), no /sys/class/infiniband
// (no RDMA device), fio not on PATH (fio cannot run).
var absenceIsFinding = map[string]bool{"storage.controllers": true, "network.rdma": true, "tools.fio": true}

// TestLiveFacts evaluates this machine's own facts, collected now. Whatever
// the machine lacks must come out UNKNOWN (or a plain WARN about the
// missing tool), never a PASS or FAIL resting on absent facts.
func TestLiveFacts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := facts.Collect(ctx, facts.Options{})
	require.NoError(t, err)

	for _, opts := range []Options{
		optRDMA, optTCP, optLocal, {},
		{Transport: acceptance.TransportEmulated, GPUExpected: true},
	} {
		checks := Evaluate(f, opts)
		requireWellFormed(t, checks)
		m := byID(checks)

		// No PASS or FAIL may rest only on absent or unreadable facts,
		// except where absence is itself the finding.
		for _, c := range checks {
			if c.Status != PASS && c.Status != FAIL {
				continue
			}
			backed := false
			for _, ev := range c.Evidence {
				backed = backed || (!ev.Absent && ev.Error == "" && (ev.File != "" || len(ev.Command) > 0))
			}
			if !backed {
				require.True(t, absenceIsFinding[c.ID], "%s is %s on absent facts: %+v", c.ID, c.Status, c.Evidence)
				for _, ev := range c.Evidence {
					require.True(t, ev.File != "" || len(ev.Command) > 0, "%s: absence must name what is absent", c.ID)
				}
			}
		}

		// Facts this machine lacks give UNKNOWN where the check applies.
		unknownIf := func(id string, cond bool) {
			if c, ok := m[id]; ok && cond {
				require.Equal(t, UNKNOWN, c.Status, "%s: %s", id, c.Summary)
			}
		}
		noCtrls := len(f.NVMe.Controllers) == 0
		unknownIf("host.cpufreq", f.CPUFreq.Absent)
		for _, id := range []string{"storage.multipath", "storage.ana", "storage.queues", "storage.health", "storage.scheduler"} {
			unknownIf(id, noCtrls && f.NVMe.Multipath.Absent)
		}
		unknownIf("network.mtu", noCtrls && len(f.RDMA.Links) == 0)
		unknownIf("network.link", noCtrls && len(f.RDMA.Links) == 0)
		unknownIf("host.initiator-modules", noCtrls && !f.Modules.Source.OK() && len(f.Modules.Builtin) == 0)
		unknownIf("gpu.driver", f.GPU.Source.Absent && !f.Modules.Source.OK())
		if c, ok := m["tools.nvme-cli"]; ok && f.NVMe.CLIList.Absent {
			require.Equal(t, WARN, c.Status)
		}
		if c, ok := m["storage.controllers"]; ok && noCtrls && f.NVMe.ClassDir.Absent {
			require.Equal(t, FAIL, c.Status, "no /sys/class/nvme: the host has no NVMe controller")
			require.Equal(t, "/sys/class/nvme", c.Evidence[0].File)
			require.True(t, c.Evidence[0].Absent)
		}
		if opts.Transport == acceptance.TransportEmulated {
			if c, ok := m["storage.controllers"]; ok {
				require.Equal(t, NA, c.Status, "an emulated path's controllers are not judged")
			} else {
				require.True(t, noCtrls, "the host's controllers are listed, n/a")
			}
		}
	}
}
