package web

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/gpu/gputest"
	"github.com/accordlab/accord/store"
)

// The host page's facts name every vendor's GPU with its model and
// driver, say which tool was superseded by which, and give each NVIDIA
// GPU's NUMA affinity and path to each NIC from nvidia-smi topo -m.
func TestSummarizeFactsGPUs(t *testing.T) {
	t.Parallel()
	r := &facts.Runner{Root: t.TempDir(), LookPath: gputest.FakeTools(t, gputest.Recorded)}
	f, err := facts.Collect(context.Background(), facts.Options{Runner: r, SkipSmartLog: true})
	require.NoError(t, err)
	b, err := json.Marshal(f)
	require.NoError(t, err)
	sum := SummarizeFacts(store.HostFacts{TakenAt: time.Now(), Facts: b})
	byLabel := map[string]string{}
	for _, l := range sum.Lines {
		byLabel[l.Label] = l.Value
	}
	require.Equal(t, "Tesla T4, driver 515.105.01, firmware 90.04.84.00.06, 15 GiB, 0000:00:1e.0", byLabel["GPU 21 (nvidia-smi)"])
	require.Contains(t, byLabel["GPU 0 (amd-smi)"], "AMD Instinct MI210, driver Linuxversion6.14.0")
	require.Contains(t, byLabel["GPU 0 (amd-smi)"], "NUMA node 1")
	require.Equal(t, "Huawei Ascend xxx, driver 24.1.RC2, 32 GiB, 0000:01:00.0", byLabel["GPU 16 (npu-smi)"])
	require.Contains(t, byLabel["Accelerator tools"], "rocm-smi (superseded by amd-smi)")
	require.Equal(t, "NUMA affinity 1, mlx5_0 SYS, mlx5_1 NODE", byLabel["Topology GPU1"])
}
