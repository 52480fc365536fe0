package parse

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

// Two seconds of a host with two accelerators of different vendors and
// RDMA and namespace counters, as the probe writes them.
const telemetryWithCounters = `{"t":1000000000,"cpu_pct":12,"mem_used":1,"disk_read_bps":0,"disk_write_bps":0,"disk_busy_pct":0,"nic_rx_bps":0,"nic_tx_bps":0,"gpu_pct":50,
 "gpus":[{"tool":"nvidia-smi","index":0,"util_pct":60,"mem_used_bytes":1073741824,"mem_bw_pct":30,"power_w":250.5},{"tool":"npu-smi","index":0,"util_pct":40,"mem_used_bytes":2147483648,"power_w":80}],
 "counters":{"rdma_retransmits":0,"ns_read_iops":1000,"ns_read_latency":150,"some_future_counter":3},"counter_detail":{"ns_read_iops{nvme1n1}":1000}}
{"t":2000000000,"cpu_pct":14,"mem_used":1,"disk_read_bps":0,"disk_write_bps":0,"disk_busy_pct":0,"nic_rx_bps":0,"nic_tx_bps":0,
 "gpus":[{"tool":"nvidia-smi","index":0,"mem_used_bytes":1073741824}],
 "counters":{"rdma_retransmits":2,"ns_read_iops":1200}}
`

func TestImportTelemetryGPUsAndCounters(t *testing.T) {
	t.Parallel()
	in := strings.ReplaceAll(telemetryWithCounters, "\n ", " ")
	ms, _, err := ImportTelemetry(strings.NewReader(in), Options{Step: "s"})
	require.NoError(t, err)
	got := map[string][]float64{}
	for _, m := range ms {
		got[m.Metric] = m.Values
		_, known := acceptance.LookupMetric(m.Metric)
		require.True(t, known, m.Metric)
	}
	require.Equal(t, []float64{3 << 30, 1 << 30}, got[acceptance.MetricGPUMemUsed], "summed over devices, each second")
	require.Equal(t, []float64{330.5}, got[acceptance.MetricGPUPower], "a second without power readings adds none")
	require.Equal(t, []float64{30}, got[acceptance.MetricGPUMemBW])
	require.Equal(t, []float64{0, 2}, got[acceptance.MetricRDMARetransmits])
	require.Equal(t, []float64{1000, 1200}, got[acceptance.MetricNSReadIOPS])
	require.Equal(t, []float64{150}, got[acceptance.MetricNSReadLatency])
	require.NotContains(t, got, "some_future_counter")

	bad := strings.Replace(in, `"rdma_retransmits":2`, `"rdma_retransmits":-2`, 1)
	_, _, err = ImportTelemetry(strings.NewReader(bad), Options{})
	require.ErrorContains(t, err, "counters.rdma_retransmits")
}
