package readiness

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/accordlab/accord/runners/probe/facts"
)

func nicFact(name, field string) string { return "network.interfaces[" + name + "]." + field }

// noInterfaces is the result when the storage interfaces cannot be told.
func noInterfaces(e *env) result {
	return result{UNKNOWN, "Which interfaces carry storage traffic is unknown: no controller address points at a local interface and none is named in the host's settings.", e.ifaceEv,
		"Name the storage interfaces in the host's settings, or connect the controllers (their addresses then show the local interface), and refresh the facts."}
}

// storageNICs resolves the storage interfaces; missing lists names the
// settings gave that the host does not have.
func (e *env) storageNICs() (nics []facts.NIC, missing []string) {
	for _, name := range e.ifaces {
		if n, ok := e.nics[name]; ok {
			nics = append(nics, n)
		} else {
			missing = append(missing, name)
		}
	}
	return nics, missing
}

func missingResult(e *env, missing []string, ev []Evidence) result {
	ev = append(ev, sourceEv("network.interfaces", e.f.Network.IPLink, ""))
	return result{FAIL, fmt.Sprintf("Storage %s %s %s named in the host's settings but not present on the host.", plural(len(missing), "interface", "interfaces"), strings.Join(missing, ", "), plural(len(missing), "is", "are")), ev,
		"Correct the storage interface names in the host's settings (ip -br link lists the host's interfaces)."}
}

// checkMTU: the storage interfaces carry jumbo frames.
func checkMTU(e *env) result {
	if len(e.ifaces) == 0 {
		return noInterfaces(e)
	}
	nics, missing := e.storageNICs()
	ev := append([]Evidence(nil), e.ifaceEv...)
	if len(missing) > 0 {
		return missingResult(e, missing, ev)
	}
	var statuses []Status
	var low, ok, unknown []string
	for _, n := range nics {
		ev = append(ev, nicEv(e, n.Name, "mtu", strconv.Itoa(n.MTU)))
		switch {
		case n.MTU <= 0:
			statuses = append(statuses, UNKNOWN)
			unknown = append(unknown, n.Name)
		case n.MTU < e.o.MinMTU:
			statuses = append(statuses, WARN)
			low = append(low, fmt.Sprintf("%s %d", n.Name, n.MTU))
		default:
			statuses = append(statuses, PASS)
			ok = append(ok, fmt.Sprintf("%s %d", n.Name, n.MTU))
		}
	}
	how := " (storage interfaces " + e.ifaceHow + ")"
	switch combine(statuses...) {
	case PASS:
		return result{PASS, "MTU " + strings.Join(ok, ", ") + how + ".", ev, ""}
	case WARN:
		s := fmt.Sprintf("MTU below %d: %s%s. Storage fabrics are sized for jumbo frames: a small MTU means more packets per I/O, more CPU and less bandwidth", e.o.MinMTU, strings.Join(low, ", "), how)
		if e.want == "rdma" {
			s += "; RoCE uses its 4096-byte RDMA MTU only when the interface MTU is above about 4200"
		}
		return result{WARN, s + ".", ev,
			fmt.Sprintf("ip link set dev <interface> mtu %d and persist it in the network configuration; the switch ports and the array's ports must carry it too, or large frames are dropped.", e.o.MinMTU)}
	}
	return result{UNKNOWN, "The MTU of " + strings.Join(unknown, ", ") + " is unknown.", ev, "Refresh the facts (ip -j link reports the MTU)."}
}

// checkLink: storage interfaces are up, at a known speed, at least the
// minimum, and equal to each other (unequal paths make round-robin uneven).
func checkLink(e *env) result {
	if len(e.ifaces) == 0 {
		return noInterfaces(e)
	}
	nics, missing := e.storageNICs()
	ev := append([]Evidence(nil), e.ifaceEv...)
	if len(missing) > 0 {
		return missingResult(e, missing, ev)
	}
	var statuses []Status
	var parts []string
	speeds := map[int]bool{}
	fix := ""
	for _, n := range nics {
		ev = append(ev, nicEv(e, n.Name, "operstate", n.OperState), valueEv(nicFact(n.Name, "speed_mbps"), n.SpeedMbs))
		desc := n.Name + ": " + strings.ToLower(n.OperState)
		if n.OperState == "" {
			desc = n.Name + ": state unknown"
		}
		st := PASS
		switch {
		case n.OperState == "":
			st = UNKNOWN
			fix = "Refresh the facts (ip -j link reports each interface's operational state)."
		case n.OperState != "UP":
			st = WARN
			fix = "Bring the link up (ip link set dev " + n.Name + " up) and check the cable, the transceiver and the switch port."
		}
		speed, err := strconv.Atoi(n.SpeedMbs.Value)
		switch {
		case !n.SpeedMbs.OK() || err != nil || speed <= 0:
			st = combine(st, UNKNOWN)
			desc += ", speed unknown"
			if fix == "" {
				fix = "The driver does not report the link speed (virtual NICs often do not): check it with ethtool " + n.Name + "."
			}
		default:
			speeds[speed] = true
			desc += ", " + formatSpeed(speed)
			if e.o.MinLinkSpeedMbps > 0 && speed < e.o.MinLinkSpeedMbps {
				st = combine(st, WARN)
				desc += fmt.Sprintf(" (below %s)", formatSpeed(e.o.MinLinkSpeedMbps))
				fix = "Check the negotiated speed (ethtool " + n.Name + "): a wrong cable, transceiver or switch port setting makes the link train below its rated speed."
			}
		}
		statuses = append(statuses, st)
		parts = append(parts, desc)
	}
	status := combine(statuses...)
	s := strings.Join(parts, "; ") + "."
	if len(speeds) > 1 && status != FAIL {
		status = combine(status, WARN)
		s += " The storage links run at different speeds, so paths carry unequal bandwidth and round-robin spreads I/O unevenly."
		if fix == "" {
			fix = "Run every storage path at the same speed (ethtool shows each link's negotiated speed)."
		}
	}
	return result{status, s, ev, fix}
}

func formatSpeed(mbps int) string {
	if mbps >= 1000 && mbps%1000 == 0 {
		return fmt.Sprintf("%d Gb/s", mbps/1000)
	}
	return fmt.Sprintf("%d Mb/s", mbps)
}

// rdmaPortUp: ACTIVE and physically up, in rdma(8)'s spelling (LINK_UP)
// or sysfs's (5: LinkUp).
func rdmaPortUp(l facts.RDMALink) bool {
	phys := strings.ToUpper(strings.ReplaceAll(l.Physics, "_", ""))
	return l.State == "ACTIVE" && strings.HasSuffix(phys, "LINKUP")
}

// checkRDMA: the storage interfaces' RDMA ports are ACTIVE and LINK_UP.
// No /sys/class/infiniband is a finding: the kernel has no RDMA device.
func checkRDMA(e *env) result {
	r := e.f.RDMA
	var ev []Evidence
	if r.ClassDir.File != "" {
		ev = append(ev, sourceEv("rdma.class_dir", r.ClassDir, ""))
	}
	if r.ClassDir.Absent {
		return result{FAIL, "No RDMA device on this host (/sys/class/infiniband is absent): NVMe/RDMA cannot connect.", ev,
			"Install and load the NIC's RDMA driver (mlx5_ib for ConnectX, irdma for Intel E810, bnxt_re for Broadcom) and rdma-core, or use a profile over TCP."}
	}
	if !r.Source.OK() {
		why := r.Source.Error
		if r.Source.Absent {
			why = "rdma(8) from iproute2 is not installed"
		}
		if why == "" {
			why = "rdma link was not run"
		}
		return result{UNKNOWN, "The RDMA ports' state is unknown: " + why + ".", append(ev, sourceEv("rdma.links", r.Source, r.Source.Raw)),
			"Install iproute2 (it provides rdma) on the host, then refresh the facts."}
	}
	storage := map[string]bool{}
	for _, n := range e.ifaces {
		storage[n] = true
	}
	var relevant []facts.RDMALink
	for _, l := range r.Links {
		if len(storage) == 0 || storage[l.NetDev] {
			relevant = append(relevant, l)
		}
	}
	if len(relevant) == 0 {
		ev = append(ev, sourceEv("rdma.links", r.Source, r.Source.Raw))
		if len(r.Links) == 0 {
			return result{FAIL, "rdma link lists no RDMA port.", ev,
				"Load the NIC's RDMA driver (mlx5_ib, irdma, bnxt_re) and check rdma link show."}
		}
		return result{FAIL, fmt.Sprintf("None of the storage interfaces (%s) has an RDMA port.", strings.Join(e.ifaces, ", ")), append(ev, e.ifaceEv...),
			"Carry storage traffic on RDMA-capable interfaces (rdma link show lists them with their netdev), or correct the storage interfaces in the host's settings."}
	}
	var up, down []string
	for _, l := range relevant {
		ev = append(ev, rdmaLinkEv(e, l, "state", l.State), rdmaLinkEv(e, l, "physical_state", l.Physics))
		name := fmt.Sprintf("%s/%d", l.Device, l.Port)
		if l.NetDev != "" {
			name += " (" + l.NetDev + ")"
		}
		if rdmaPortUp(l) {
			up = append(up, name)
		} else {
			down = append(down, fmt.Sprintf("%s %s/%s", name, l.State, l.Physics))
		}
	}
	fix := "Bring the port up: check the cable and switch port (physical state POLLING means no link partner, DISABLED means the port is administratively down); for RoCE the port becomes ACTIVE once its netdev is up."
	switch {
	case len(down) == 0:
		return result{PASS, "RDMA ports ACTIVE and LINK_UP: " + strings.Join(up, ", ") + ".", ev, ""}
	case len(up) == 0:
		return result{FAIL, "No RDMA port of the storage interfaces is up: " + strings.Join(down, ", ") + ".", ev, fix}
	}
	return result{WARN, "Some RDMA ports are down: " + strings.Join(down, ", ") + "; up: " + strings.Join(up, ", ") + ".", ev, fix}
}

// checkRoCELossless: PFC is enabled on a priority of each RoCE storage
// interface; ECN (mlx5's DCQCN switches) is reported beside it.
func checkRoCELossless(e *env) result {
	if len(e.ifaces) == 0 {
		return noInterfaces(e)
	}
	nics, missing := e.storageNICs()
	ev := append([]Evidence(nil), e.ifaceEv...)
	if len(missing) > 0 {
		return missingResult(e, missing, ev)
	}
	var statuses []Status
	var parts []string
	fix := ""
	for _, n := range nics {
		if n.LinkType == "infiniband" {
			continue
		}
		ev = append(ev, valueEv(nicFact(n.Name, "pfc"), n.PFC), valueEv(nicFact(n.Name, "ecn"), n.ECN))
		desc := n.Name + ": "
		st := UNKNOWN
		var prios []int
		var perr error
		if n.PFC.OK() && n.PFC.Value != "" {
			prios, perr = parsePFC(n.PFC.Value)
		}
		switch {
		case !n.PFC.OK() || n.PFC.Value == "" || perr != nil:
			why := "not exposed"
			switch {
			case perr != nil:
				why = "unreadable (" + perr.Error() + ")"
			case n.PFC.Absent && len(n.PFC.Command) > 0 && strings.Contains(n.PFC.Error, "not installed"):
				why = "unknown (dcb is not installed)"
			case n.PFC.Error != "":
				why = "not exposed by the driver (" + n.PFC.Error + ")"
			}
			desc += "PFC " + why
			fix = "Read PFC with dcb pfc show dev " + n.Name + " (iproute2) or mlnx_qos -i " + n.Name + "; firmware-managed DCBX may hide it from the kernel, in which case the switch configuration is the evidence."
		case len(prios) == 0:
			st = WARN
			desc += "PFC off on every priority (RoCE runs lossy: drops under congestion are recovered by retransmission, which shows as tail latency)"
			fix = "Enable PFC on the RoCE priority to match the switches (dcb pfc set dev " + n.Name + " prio-pfc 3:on, or mlnx_qos -i " + n.Name + " --pfc 0,0,0,1,0,0,0,0) and trust DSCP so RoCE traffic lands on it; or confirm the fabric is designed for lossy RoCE."
		default:
			st = PASS
			desc += "PFC on priority " + joinInts(prios)
		}
		if n.ECN.OK() && n.ECN.Value != "" {
			ecn := parseECN(n.ECN.Value)
			var on []string
			for _, point := range []string{"roce_np", "roce_rp"} {
				if ps := ecn[point]; len(ps) > 0 {
					on = append(on, point+" "+joinInts(ps))
				}
			}
			if len(on) > 0 {
				desc += "; ECN on (" + strings.Join(on, ", ") + ")"
			} else {
				desc += "; ECN off"
			}
		} else {
			desc += "; ECN not exposed"
		}
		statuses = append(statuses, st)
		parts = append(parts, desc)
	}
	if len(statuses) == 0 {
		return result{PASS, "The storage interfaces are InfiniBand, whose credit-based flow control makes PFC and ECN moot.", ev, ""}
	}
	return result{combine(statuses...), strings.Join(parts, ". ") + ".", ev, fix}
}
