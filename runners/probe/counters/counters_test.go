package counters

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/internal/fakebin"
)

type tree struct {
	t    *testing.T
	root string
}

func (tr tree) put(path, content string) {
	p := filepath.Join(tr.root, path)
	require.NoError(tr.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(tr.t, os.WriteFile(p, []byte(content+"\n"), 0o644))
}

// host writes a fake sysfs tree: one ConnectX port (mlx5 names), one
// Broadcom port (bnxt_re names), a physical and a virtual NIC, and a
// namespace with a multipath path beside it.
func host(t *testing.T, scale uint64) string {
	tr := tree{t, t.TempDir()}
	v := func(n uint64) string { return itoa(n * scale) }
	ib := "/sys/class/infiniband/mlx5_0/ports/1/"
	tr.put(ib+"counters/port_xmit_discards", v(1))
	tr.put(ib+"counters/port_rcv_data", v(1000)) // not one of ours
	tr.put(ib+"hw_counters/roce_adp_retrans", v(2))
	tr.put(ib+"hw_counters/local_ack_timeout_err", v(1))
	tr.put(ib+"hw_counters/out_of_sequence", v(3))
	tr.put(ib+"hw_counters/packet_seq_err", v(1))
	tr.put(ib+"hw_counters/np_cnp_sent", v(10))
	tr.put(ib+"hw_counters/rp_cnp_handled", v(20))
	tr.put(ib+"hw_counters/np_ecn_marked_roce_packets", v(30))
	bn := "/sys/class/infiniband/bnxt_re0/ports/1/hw_counters/"
	tr.put(bn+"to_retransmits", v(4))
	tr.put(bn+"rx_cnp_pkts", v(5))
	tr.put("/sys/class/net/ens1f0np0/device/vendor", "0x15b3")
	tr.put("/sys/class/net/ens1f0np0/statistics/rx_errors", v(1))
	tr.put("/sys/class/net/ens1f0np0/statistics/tx_errors", v(1))
	tr.put("/sys/class/net/ens1f0np0/statistics/rx_dropped", v(7))
	tr.put("/sys/class/net/ens1f0np0/statistics/tx_dropped", v(0))
	tr.put("/sys/class/net/lo/statistics/rx_errors", v(99))
	// read I/Os, merges, sectors, ticks (ms); write the same; in flight, io_ticks, queue.
	tr.put("/sys/block/nvme1n1/stat", "    "+v(100)+" 0 "+v(800)+" "+v(20)+" "+v(50)+" 0 "+v(400)+" "+v(25)+" 0 "+v(40)+" "+v(45))
	tr.put("/sys/block/nvme1c1n1/stat", "    9999 0 9999 9999 9999 0 9999 9999 0 9999 9999")
	return tr.root
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestRatesFromFakeSysfs reads the tree twice, with every counter
// doubled in between and two seconds on the clock: each rate is half the
// first value.
func TestRatesFromFakeSysfs(t *testing.T) {
	t.Parallel()
	r1 := (&Reader{Root: host(t, 10)}).Read(context.Background())
	r2 := (&Reader{Root: host(t, 20)}).Read(context.Background())
	r2.At = r1.At.Add(2 * time.Second)
	totals, detail := Rates(r1, r2)
	require.Equal(t, map[string]float64{
		RDMARetransmits: (2 + 1 + 4) * 10 / 2.0,
		RDMASeqErrors:   (3 + 1) * 10 / 2.0,
		RDMACNPSent:     10 * 10 / 2.0,
		RDMACNPHandled:  (20 + 5) * 10 / 2.0,
		RDMAECNMarked:   30 * 10 / 2.0,
		RDMADiscards:    1 * 10 / 2.0,
		NICErrors:       2 * 10 / 2.0,
		NICDrops:        7 * 10 / 2.0,
		NSReadIOPS:      100 * 10 / 2.0,
		NSWriteIOPS:     50 * 10 / 2.0,
		NSReadBW:        800 * 10 * 512 / 2.0,
		NSWriteBW:       400 * 10 * 512 / 2.0,
		NSReadLatency:   20 * 1000 / 100.0, // 20 ms over 100 reads: 200 µs each
		NSWriteLatency:  25 * 1000 / 50.0,
	}, totals)
	require.Equal(t, 25.0, detail[RDMACNPHandled+"{bnxt_re0/1}"], "per port")
	require.Equal(t, 100.0, detail[RDMACNPHandled+"{mlx5_0/1}"])
	require.Equal(t, 500.0, detail[NSReadIOPS+"{nvme1n1}"])
	require.NotContains(t, detail, NSReadIOPS+"{nvme1c1n1}", "paths are not namespaces")
	require.NotContains(t, detail, NICErrors+"{lo}", "virtual interfaces have no fabric counters")
}

func TestCounterResetIsLeftOut(t *testing.T) {
	t.Parallel()
	r1 := (&Reader{Root: host(t, 20)}).Read(context.Background())
	r2 := (&Reader{Root: host(t, 10)}).Read(context.Background())
	r2.At = r1.At.Add(time.Second)
	totals, _ := Rates(r1, r2)
	require.Empty(t, totals)
}

func TestHostWithoutCountersReadsNothing(t *testing.T) {
	t.Parallel()
	rd := (&Reader{Root: t.TempDir()}).Read(context.Background())
	require.Empty(t, rd.Values)
}

// TestEthtoolPauseCounters runs a fake ethtool that prints the fixture.
func TestEthtoolPauseCounters(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	data, err := filepath.Abs("testdata/ethtool-S-mlx5.txt")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "ethtool")
	fakebin.Write(t, bin, "#!/bin/sh\n[ \"$1\" = -S ] && [ \"$2\" = ens1f0np0 ] && exec cat "+data+"\nexit 1\n")
	root := host(t, 1)
	rd := (&Reader{Root: root, Ethtool: bin}).Read(context.Background())
	require.Equal(t, uint64(1200+30+5000+70), rd.Values[NICPauseFrames+"{ens1f0np0}"], "frames, not durations or transitions")

	stats := ParseEthtoolS(string(must(os.ReadFile(data))))
	require.Equal(t, uint64(1180231731711), stats["rx_bytes"])
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzParsers(f *testing.F) {
	f.Add("NIC statistics:\n     rx_pause_ctrl_phy: 12\n")
	f.Add("  100 0 800 20 50 0 400 25 0 40 45\n")
	f.Fuzz(func(t *testing.T, s string) {
		for k := range ParseEthtoolS(s) {
			if k != strings.TrimSpace(k) {
				t.Fatalf("key %q not trimmed", k)
			}
		}
		if st, ok := ParseBlockStat(s); ok && st.ReadIOs > 0 && st.ReadTicksMs > 1<<63 {
			t.Fatal("overflow")
		}
	})
}
