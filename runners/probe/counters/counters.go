// Package counters reads the fabric's and the drives' cumulative counters
// from sysfs (and ethtool where it is installed) and turns two readings
// into per-second rates: RDMA port counters and hw_counters, NIC error,
// drop and pause counters, and per-namespace block I/O. Telemetry reads
// them every second; a counter the host does not have is simply not in
// the reading.
//
// Counter names differ between drivers (mlx5, irdma, bnxt_re, ice, ...):
// each canonical metric lists the names that count the same thing, so a
// rate is the sum over the names and the devices that have them.
package counters

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Metric ids of the rates, as acceptance's catalog names them.
const (
	RDMARetransmits = "rdma_retransmits"
	RDMASeqErrors   = "rdma_seq_errors"
	RDMACNPSent     = "rdma_cnp_sent"
	RDMACNPHandled  = "rdma_cnp_handled"
	RDMAECNMarked   = "rdma_ecn_marked"
	RDMADiscards    = "rdma_discards"
	NICErrors       = "nic_errors"
	NICDrops        = "nic_drops"
	NICPauseFrames  = "nic_pause_frames"
	NSReadIOPS      = "ns_read_iops"
	NSWriteIOPS     = "ns_write_iops"
	NSReadBW        = "ns_read_bw"
	NSWriteBW       = "ns_write_bw"
	NSReadLatency   = "ns_read_latency"  // µs per read completed in the interval
	NSWriteLatency  = "ns_write_latency" // µs per write
)

// rdmaNames maps RDMA counter file names (counters/ and hw_counters/) to
// the metric they count. mlx5: roce_adp_retrans, local_ack_timeout_err,
// rnr_nak_retry_err (retransmissions and their timeouts), out_of_sequence,
// packet_seq_err, implied_nak_seq_err, duplicate_request, np_cnp_sent,
// rp_cnp_handled, np_ecn_marked_roce_packets, out_of_buffer; the IB
// standard port counters port_xmit_discards and port_rcv_errors; irdma's
// ip4/ip6 retransmission segments; bnxt_re's seq_err_naks_rcvd,
// rnr_naks_rcvd, to_retransmits, res_oos_drop_count, rx/tx_cnp_pkts and
// rx_ecn_marked_pkts.
var rdmaNames = map[string]string{
	"roce_adp_retrans":           RDMARetransmits,
	"local_ack_timeout_err":      RDMARetransmits,
	"rnr_nak_retry_err":          RDMARetransmits,
	"to_retransmits":             RDMARetransmits,
	"ip4OutRetransSegs":          RDMARetransmits,
	"ip6OutRetransSegs":          RDMARetransmits,
	"tcpRetransSegs":             RDMARetransmits,
	"out_of_sequence":            RDMASeqErrors,
	"packet_seq_err":             RDMASeqErrors,
	"implied_nak_seq_err":        RDMASeqErrors,
	"duplicate_request":          RDMASeqErrors,
	"seq_err_naks_rcvd":          RDMASeqErrors,
	"res_oos_drop_count":         RDMASeqErrors,
	"np_cnp_sent":                RDMACNPSent,
	"tx_cnp_pkts":                RDMACNPSent,
	"rp_cnp_handled":             RDMACNPHandled,
	"rx_cnp_pkts":                RDMACNPHandled,
	"np_ecn_marked_roce_packets": RDMAECNMarked,
	"rx_ecn_marked_pkts":         RDMAECNMarked,
	"port_xmit_discards":         RDMADiscards,
	"port_rcv_errors":            RDMADiscards,
	"out_of_buffer":              RDMADiscards,
}

// nicNames maps /sys/class/net/X/statistics files to metrics.
var nicNames = map[string]string{
	"rx_errors":  NICErrors,
	"tx_errors":  NICErrors,
	"rx_dropped": NICDrops,
	"tx_dropped": NICDrops,
}

// isPauseCounter says whether an ethtool -S statistic counts pause
// frames: mlx5 rx/tx_pause_ctrl_phy and rx/tx_prioN_pause, ice and i40e
// link_xon/xoff_rx/tx and priority_xon/xoff, bnxt rx/tx_pause_frames. The
// *_duration and *_transition counters are not frames.
func isPauseCounter(name string) bool {
	n := strings.ToLower(name)
	if strings.Contains(n, "duration") || strings.Contains(n, "transition") {
		return false
	}
	return strings.Contains(n, "pause") || strings.Contains(n, "xoff") || strings.Contains(n, "xon")
}

// Reading is one moment's counters: "metric{device}" → cumulative value.
type Reading struct {
	At     time.Time
	Values map[string]uint64
}

// Reader reads the counters of one host.
type Reader struct {
	// Root is prefixed to sysfs paths (tests use a fake tree).
	Root string
	// Ethtool is the path of ethtool, empty when it is absent.
	Ethtool string
	// Namespaces are the block devices whose stat is read (nvme0n1, ...);
	// nil means every NVMe namespace under /sys/block.
	Namespaces []string
}

// NewReader finds ethtool on PATH; it is optional.
func NewReader() *Reader {
	r := &Reader{}
	if p, err := exec.LookPath("ethtool"); err == nil {
		r.Ethtool = p
	}
	return r
}

func (r *Reader) readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(r.Root + path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

func (r *Reader) glob(pattern string) []string {
	m, _ := filepath.Glob(r.Root + pattern)
	sort.Strings(m)
	out := make([]string, len(m))
	for i, p := range m {
		out[i] = strings.TrimPrefix(p, r.Root)
	}
	return out
}

// Read takes one reading. Unreadable files are left out.
func (r *Reader) Read(ctx context.Context) Reading {
	rd := Reading{At: time.Now(), Values: map[string]uint64{}}
	add := func(metric, device string, v uint64) { rd.Values[metric+"{"+device+"}"] += v }
	for _, port := range r.glob("/sys/class/infiniband/*/ports/*") {
		dev := filepath.Base(filepath.Dir(filepath.Dir(port))) + "/" + filepath.Base(port)
		for _, sub := range []string{"counters", "hw_counters"} {
			for _, f := range r.glob(port + "/" + sub + "/*") {
				if m, ok := rdmaNames[filepath.Base(f)]; ok {
					if v, ok := r.readUint(f); ok {
						add(m, dev, v)
					}
				}
			}
		}
	}
	for _, nic := range r.glob("/sys/class/net/*") {
		name := filepath.Base(nic)
		if _, err := os.Stat(r.Root + nic + "/device"); err != nil {
			continue // virtual interfaces have no device and no fabric counters
		}
		for file, m := range nicNames {
			if v, ok := r.readUint(nic + "/statistics/" + file); ok {
				add(m, name, v)
			}
		}
		if r.Ethtool != "" {
			if stats, err := r.ethtoolStats(ctx, name); err == nil {
				for k, v := range stats {
					if isPauseCounter(k) {
						add(NICPauseFrames, name, v)
					}
				}
			}
		}
	}
	for _, ns := range r.namespaces() {
		b, err := os.ReadFile(r.Root + "/sys/block/" + ns + "/stat")
		if err != nil {
			continue
		}
		s, ok := ParseBlockStat(string(b))
		if !ok {
			continue
		}
		add("read_ios", ns, s.ReadIOs)
		add("write_ios", ns, s.WriteIOs)
		add("read_sectors", ns, s.ReadSectors)
		add("write_sectors", ns, s.WriteSectors)
		add("read_ticks", ns, s.ReadTicksMs)
		add("write_ticks", ns, s.WriteTicksMs)
	}
	return rd
}

func (r *Reader) namespaces() []string {
	if r.Namespaces != nil {
		return r.Namespaces
	}
	var out []string
	for _, p := range r.glob("/sys/block/nvme*n*") {
		name := filepath.Base(p)
		if !strings.Contains(name[4:], "c") { // nvme0c1n1 is a path, not a namespace
			out = append(out, name)
		}
	}
	return out
}

func (r *Reader) ethtoolStats(ctx context.Context, iface string) (map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, r.Ethtool, "-S", iface).Output()
	if err != nil {
		return nil, err
	}
	return ParseEthtoolS(string(out)), nil
}

// ParseEthtoolS reads `ethtool -S IFACE`: "NIC statistics:" then
// "     name: value" lines.
func ParseEthtoolS(s string) map[string]uint64 {
	out := map[string]uint64{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		out[strings.TrimSpace(k)] = n
	}
	return out
}

// BlockStat is the part of /sys/block/X/stat the rates use (see the
// kernel's Documentation/block/stat.rst: read I/Os, read merges, read
// sectors, read ticks, write I/Os, write merges, write sectors, write
// ticks, in flight, io_ticks, time in queue, ...).
type BlockStat struct {
	ReadIOs, ReadSectors, ReadTicksMs    uint64
	WriteIOs, WriteSectors, WriteTicksMs uint64
}

// ParseBlockStat reads the first eight fields of a block stat file.
func ParseBlockStat(s string) (BlockStat, bool) {
	f := strings.Fields(s)
	if len(f) < 8 {
		return BlockStat{}, false
	}
	var n [8]uint64
	for i := range n {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return BlockStat{}, false
		}
		n[i] = v
	}
	return BlockStat{ReadIOs: n[0], ReadSectors: n[2], ReadTicksMs: n[3], WriteIOs: n[4], WriteSectors: n[6], WriteTicksMs: n[7]}, true
}

// Rates turns two readings into per-second rates: the totals by metric
// (summed over devices) and the per-device detail ("metric{device}").
// A counter that went down was reset (driver reload): it is left out of
// that interval rather than read as a huge or negative rate.
func Rates(prev, cur Reading) (totals, detail map[string]float64) {
	sec := cur.At.Sub(prev.At).Seconds()
	if sec <= 0 {
		return nil, nil
	}
	delta := map[string]uint64{}
	for k, v := range cur.Values {
		p, ok := prev.Values[k]
		if !ok || v < p {
			continue
		}
		delta[k] = v - p
	}
	totals, detail = map[string]float64{}, map[string]float64{}
	put := func(metric, device string, v float64) {
		totals[metric] += v
		detail[metric+"{"+device+"}"] = v
	}
	blocks := map[string]bool{}
	for k, d := range delta {
		metric, device, _ := strings.Cut(strings.TrimSuffix(k, "}"), "{")
		switch metric {
		case "read_ios", "write_ios", "read_sectors", "write_sectors", "read_ticks", "write_ticks":
			blocks[device] = true
		default:
			put(metric, device, float64(d)/sec)
		}
	}
	var readIOs, writeIOs, readTicks, writeTicks float64
	for ns := range blocks {
		g := func(m string) float64 { return float64(delta[m+"{"+ns+"}"]) }
		put(NSReadIOPS, ns, g("read_ios")/sec)
		put(NSWriteIOPS, ns, g("write_ios")/sec)
		put(NSReadBW, ns, g("read_sectors")*512/sec)
		put(NSWriteBW, ns, g("write_sectors")*512/sec)
		if n := g("read_ios"); n > 0 {
			detail[NSReadLatency+"{"+ns+"}"] = g("read_ticks") * 1000 / n
		}
		if n := g("write_ios"); n > 0 {
			detail[NSWriteLatency+"{"+ns+"}"] = g("write_ticks") * 1000 / n
		}
		readIOs += g("read_ios")
		writeIOs += g("write_ios")
		readTicks += g("read_ticks")
		writeTicks += g("write_ticks")
	}
	// The latency over all namespaces is weighted by their I/Os; an
	// interval without completions has no latency (absent, not zero).
	if readIOs > 0 {
		totals[NSReadLatency] = readTicks * 1000 / readIOs
	}
	if writeIOs > 0 {
		totals[NSWriteLatency] = writeTicks * 1000 / writeIOs
	}
	return totals, detail
}
