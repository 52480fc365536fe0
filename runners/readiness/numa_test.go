package readiness

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/facts"
)

// The fake RDMA host: each GPU shares a node, and a PCIe switch, with one
// storage NIC; the summary gives the paths from nvidia-smi topo -m.
func TestNUMALocalityWithTopology(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := byID(Evaluate(b.rdma, optRDMA))["host.numa-locality"]
	require.Equal(t, PASS, c.Status, c.Summary)
	require.Contains(t, c.Summary, "GPU0–mlx5_0 (ens1f0np0) PXB, GPU0–mlx5_1 (ens5f0np0) SYS, GPU1–mlx5_0 (ens1f0np0) SYS, GPU1–mlx5_1 (ens5f0np0) PXB")
	var topo *Evidence
	for i, e := range c.Evidence {
		if e.Fact == "gpu.topology" {
			topo = &c.Evidence[i]
		}
	}
	require.NotNil(t, topo)
	require.Equal(t, []string{"nvidia-smi", "topo", "-m"}, topo.Command)
	require.Contains(t, topo.Excerpt, "NIC Legend")
	requireWellFormed(t, Evaluate(b.rdma, optRDMA))
}

// Hand-built facts: a GPU whose sysfs node is -1 takes nvidia-smi's NUMA
// affinity, with that as the evidence; a GPU on the other node than every
// storage device warns and names the crossing.
func TestNUMALocalityHandBuilt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.rdma
	f.GPU.GPUs[1].NUMANode = facts.Value{Value: "-1", Source: facts.Source{File: "/sys/bus/pci/devices/0000:9b:00.0/numa_node"}}
	c := byID(Evaluate(f, optRDMA))["host.numa-locality"]
	require.Equal(t, PASS, c.Status, c.Summary)
	found := false
	for _, e := range c.Evidence {
		if e.Fact == "gpu.topology.rows[GPU1].numa_affinity" {
			found = true
			require.Equal(t, "1", e.Value)
			require.Contains(t, e.Excerpt, "GPU1\tSYS\tX\tSYS\tPXB")
		}
	}
	require.True(t, found, "the matrix's NUMA affinity stands in for sysfs")

	// Both storage NICs (and the array's controllers) on node 0, the
	// second GPU on node 1.
	for i := range f.Network.Interfaces {
		if f.Network.Interfaces[i].Name == "ens5f0np0" {
			f.Network.Interfaces[i].NUMANode.Value = "0"
		}
	}
	for i := range f.NVMe.Controllers {
		if f.NVMe.Controllers[i].Name == "nvme2" {
			f.NVMe.Controllers[i].NUMANode.Value = "0"
		}
	}
	c = byID(Evaluate(f, optRDMA))["host.numa-locality"]
	require.Equal(t, WARN, c.Status)
	require.Contains(t, c.Summary, "GPU 1 (node 1) has no storage device on its node (storage on node 0)")
	require.Contains(t, c.Summary, "GPU1–mlx5_1 (ens5f0np0) PXB")
	require.NotEmpty(t, c.Fix)

	// Without the matrix and with an unreported node, locality is unknown.
	f.GPU.Topology, f.GPU.TopologySource = nil, nil
	c = byID(Evaluate(f, optRDMA))["host.numa-locality"]
	require.Equal(t, UNKNOWN, c.Status)
	require.Contains(t, c.Summary, "GPU 1")
}
