package readiness

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/facts"
)

func TestPCIeLinksTrainedBelowMaximum(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := func(s string) facts.Value {
		return facts.Value{Value: s, Source: facts.Source{File: "/sys/bus/pci/devices/x/attr"}}
	}
	b.rdma.PCI = []facts.PCILink{
		{Address: "0000:03:00.0", Role: "gpu", Name: "NVIDIA H100", CurrentLinkSpeed: v("8.0 GT/s PCIe"), MaxLinkSpeed: v("32.0 GT/s PCIe"), CurrentLinkWidth: v("16"), MaxLinkWidth: v("16")},
		{Address: "0000:04:00.0", Role: "nic", Name: "ens1f0", CurrentLinkSpeed: v("16.0 GT/s PCIe"), MaxLinkSpeed: v("16.0 GT/s PCIe"), CurrentLinkWidth: v("16"), MaxLinkWidth: v("16")},
	}
	c := byID(Evaluate(b.rdma, optRDMA))["host.pcie-links"]
	require.Equal(t, WARN, c.Status)
	require.Contains(t, c.Summary, "gpu NVIDIA H100 (0000:03:00.0): speed 8.0 GT/s PCIe of 32.0 GT/s PCIe")
	require.NotContains(t, c.Summary, "ens1f0")
	require.NotEmpty(t, c.Fix)

	b.rdma.PCI[0].CurrentLinkSpeed = v("32.0 GT/s PCIe")
	require.Equal(t, PASS, byID(Evaluate(b.rdma, optRDMA))["host.pcie-links"].Status)
	requireWellFormed(t, Evaluate(b.rdma, optRDMA))
}
