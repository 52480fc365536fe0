package facts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/accordlab/accord/runners/probe/gpu"
)

func itoa(n int) string { return strconv.Itoa(n) }

func collectOS(r *Runner) OS {
	o := OS{Source: r.ReadFile("/etc/os-release")}
	if !o.Source.OK() {
		return o
	}
	kv := ParseOSRelease(o.Source.Raw)
	o.ID, o.VersionID, o.Pretty = kv["ID"], kv["VERSION_ID"], kv["PRETTY_NAME"]
	return o
}

// ParseOSRelease parses os-release(5): KEY=value lines, values optionally quoted.
func ParseOSRelease(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[k] = strings.ReplaceAll(v, `\"`, `"`)
	}
	return out
}

func collectKernel(ctx context.Context, r *Runner) Kernel {
	one := func(flag string) Value {
		src := r.Run(ctx, "uname", flag)
		return Value{Value: strings.TrimSpace(src.Raw), Source: src}
	}
	return Kernel{Release: one("-r"), Version: one("-v"), Machine: one("-m")}
}

func collectCPU(ctx context.Context, r *Runner) CPU {
	c := CPU{Source: r.Run(ctx, "lscpu", "-J")}
	if c.Source.OK() {
		fields, err := ParseLscpuJSON([]byte(c.Source.Raw))
		if err != nil {
			c.Source.Error = "parse: " + err.Error()
		} else {
			c.Fields = fields
			c.Architecture = fields["Architecture"]
			c.ModelName = fields["Model name"]
			c.Vendor = fields["Vendor ID"]
			c.CPUs = atoiLoose(fields["CPU(s)"])
			c.Sockets = atoiLoose(fields["Socket(s)"])
			c.CoresPerSocket = atoiLoose(fields["Core(s) per socket"])
			c.ThreadsPerCore = atoiLoose(fields["Thread(s) per core"])
			c.NUMANodes = atoiLoose(fields["NUMA node(s)"])
		}
	}
	c.CPUInfo = r.ReadFile("/proc/cpuinfo")
	if c.CPUInfo.OK() {
		model, n := parseCPUInfo(c.CPUInfo.Raw)
		if c.ModelName == "" {
			c.ModelName = model
		}
		if c.CPUs == 0 {
			c.CPUs = n
		}
		// The whole cpuinfo repeats per CPU; the first block is enough as evidence.
		if i := strings.Index(c.CPUInfo.Raw, "\n\n"); i > 0 {
			c.CPUInfo.Raw = c.CPUInfo.Raw[:i+1]
			c.CPUInfo.Truncated = true
		}
	}
	c.Present = c.ModelName != "" || c.CPUs > 0
	return c
}

// ParseLscpuJSON flattens `lscpu -J` (old flat and new nested forms) into
// field → data, without the trailing colon of field names.
func ParseLscpuJSON(b []byte) (map[string]string, error) {
	var doc struct {
		Lscpu []json.RawMessage `json:"lscpu"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func(items []json.RawMessage, depth int) error
	walk = func(items []json.RawMessage, depth int) error {
		if depth > 8 {
			return fmt.Errorf("lscpu: nesting too deep")
		}
		for _, raw := range items {
			var e struct {
				Field    string            `json:"field"`
				Data     *string           `json:"data"`
				Children []json.RawMessage `json:"children"`
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				return err
			}
			k := strings.TrimSuffix(strings.TrimSpace(e.Field), ":")
			if e.Data != nil && k != "" {
				if _, dup := out[k]; !dup {
					out[k] = strings.TrimSpace(*e.Data)
				}
			}
			if err := walk(e.Children, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(doc.Lscpu, 0); err != nil {
		return nil, err
	}
	return out, nil
}

func parseCPUInfo(s string) (model string, cpus int) {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "processor":
			cpus++
		case "model name", "Model", "cpu model":
			if model == "" {
				model = strings.TrimSpace(v)
			}
		}
	}
	return model, cpus
}

func atoiLoose(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

func collectMemory(r *Runner) Memory {
	m := Memory{Source: r.ReadFile("/proc/meminfo")}
	if !m.Source.OK() {
		return m
	}
	kv := ParseMeminfo(m.Source.Raw)
	m.TotalBytes = kv["MemTotal"]
	m.AvailableBytes = kv["MemAvailable"]
	m.HugePagesTotal = kv["HugePages_Total"]
	m.HugePageSizeKiB = kv["Hugepagesize"] / 1024
	return m
}

// ParseMeminfo parses /proc/meminfo into bytes ("kB" values are multiplied
// by 1024; unitless counts are kept as they are).
func ParseMeminfo(s string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && fields[1] == "kB" {
			if n > (1<<62)/1024 || n < -(1<<62)/1024 {
				continue
			}
			n *= 1024
		}
		out[strings.TrimSpace(k)] = n
	}
	return out
}

func collectNUMA(r *Runner) NUMA {
	n := NUMA{Source: r.ReadFile("/sys/devices/system/node/online")}
	n.Source.Raw = strings.TrimSpace(n.Source.Raw)
	for _, dir := range r.Glob("/sys/devices/system/node/node*") {
		id, err := strconv.Atoi(strings.TrimPrefix(path.Base(dir), "node"))
		if err != nil {
			continue
		}
		n.Nodes = append(n.Nodes, NUMANode{ID: id, CPUList: r.Attr(dir + "/cpulist")})
	}
	sort.Slice(n.Nodes, func(i, j int) bool { return n.Nodes[i].ID < n.Nodes[j].ID })
	return n
}

var (
	ctrlName = regexp.MustCompile(`^nvme[0-9]+$`)
	nsName   = regexp.MustCompile(`^nvme[0-9]+n[0-9]+$`)
	pathName = regexp.MustCompile(`^nvme[0-9]+c[0-9]+n[0-9]+$`)
	devRef   = regexp.MustCompile(`nvme[0-9]+(c[0-9]+)?(n[0-9]+)?`)
)

func collectNVMe(ctx context.Context, r *Runner, smart bool) NVMe {
	n := NVMe{Multipath: r.Attr("/sys/module/nvme_core/parameters/multipath")}
	n.ClassDir = Source{File: "/sys/class/nvme"}
	if !r.Exists("/sys/class/nvme") {
		n.ClassDir.Absent = true
	}
	for _, dir := range r.Glob("/sys/class/nvme/nvme*") {
		name := path.Base(dir)
		if !ctrlName.MatchString(name) {
			continue
		}
		c := NVMeController{
			Name:        name,
			Transport:   r.Attr(dir + "/transport"),
			Address:     r.Attr(dir + "/address"),
			SubsysNQN:   r.Attr(dir + "/subsysnqn"),
			State:       r.Attr(dir + "/state"),
			Model:       r.Attr(dir + "/model"),
			Serial:      r.Attr(dir + "/serial"),
			FirmwareRev: r.Attr(dir + "/firmware_rev"),
			QueueCount:  r.Attr(dir + "/queue_count"),
			SQSize:      r.Attr(dir + "/sqsize"),
			NUMANode:    r.Attr(dir + "/numa_node"),
		}
		if smart {
			c.SmartLog = ReadSmartLog(ctx, r, name)
		}
		n.Controllers = append(n.Controllers, c)
	}
	for _, dir := range r.Glob("/sys/class/nvme-subsystem/nvme-subsys*") {
		s := NVMeSubsystem{
			Name:     path.Base(dir),
			NQN:      r.Attr(dir + "/subsysnqn"),
			IOPolicy: r.Attr(dir + "/iopolicy"),
			Model:    r.Attr(dir + "/model"),
		}
		for _, c := range r.Glob(dir + "/nvme*") {
			if ctrlName.MatchString(path.Base(c)) {
				s.Controllers = append(s.Controllers, path.Base(c))
			}
		}
		n.Subsystems = append(n.Subsystems, s)
	}
	paths := map[string][]NVMePath{}
	for _, dir := range r.Glob("/sys/block/nvme*") {
		name := path.Base(dir)
		if pathName.MatchString(name) {
			// nvme0c1n1 is a path of namespace nvme0n1 (subsystem instance 0).
			i := strings.IndexByte(name[4:], 'c') + 4
			j := strings.LastIndexByte(name, 'n')
			ns := name[:i] + name[j:]
			paths[ns] = append(paths[ns], NVMePath{Name: name, ANAState: r.Attr(dir + "/ana_state"), Scheduler: r.Attr(dir + "/queue/scheduler")})
		}
	}
	for _, dir := range r.Glob("/sys/block/nvme*") {
		name := path.Base(dir)
		if !nsName.MatchString(name) {
			continue
		}
		n.Namespaces = append(n.Namespaces, BlockDevice{
			Name:        name,
			Scheduler:   r.Attr(dir + "/queue/scheduler"),
			NRRequests:  r.Attr(dir + "/queue/nr_requests"),
			ReadAheadKB: r.Attr(dir + "/queue/read_ahead_kb"),
			Rotational:  r.Attr(dir + "/queue/rotational"),
			Paths:       paths[name],
		})
	}
	n.CLIList = r.Run(ctx, "nvme", "list", "-o", "json")
	n.CLISubsys = r.Run(ctx, "nvme", "list-subsys", "-o", "json")
	if n.CLIList.OK() || n.CLISubsys.OK() {
		seen := map[string]bool{}
		for _, raw := range []string{n.CLIList.Raw, n.CLISubsys.Raw} {
			for _, s := range NVMeCLIDevices([]byte(raw)) {
				seen[s] = true
			}
		}
		for s := range seen {
			n.CLISeen = append(n.CLISeen, s)
		}
		sort.Strings(n.CLISeen)
		n.Mismatches = crossCheck(n, seen)
	}
	return n
}

// crossCheck compares the controllers and namespaces in sysfs with those
// nvme-cli names. nvme-cli 1.x lists only namespaces and 2.x mostly
// controllers, so each kind is compared only when nvme-cli listed some.
func crossCheck(n NVMe, seen map[string]bool) []string {
	var out []string
	cliCtrls, cliNS := false, false
	for s := range seen {
		cliCtrls = cliCtrls || ctrlName.MatchString(s)
		cliNS = cliNS || nsName.MatchString(s)
	}
	sysfs := map[string]bool{}
	for _, c := range n.Controllers {
		sysfs[c.Name] = true
		if cliCtrls && !seen[c.Name] {
			out = append(out, fmt.Sprintf("controller %s is in sysfs but nvme-cli does not list it", c.Name))
		}
	}
	for _, ns := range n.Namespaces {
		sysfs[ns.Name] = true
		if cliNS && !seen[ns.Name] {
			out = append(out, fmt.Sprintf("namespace %s is in sysfs but nvme-cli does not list it", ns.Name))
		}
	}
	for s := range seen {
		if (ctrlName.MatchString(s) || nsName.MatchString(s)) && !sysfs[s] {
			out = append(out, fmt.Sprintf("nvme-cli lists %s but sysfs has no such device", s))
		}
	}
	sort.Strings(out)
	return out
}

// NVMeCLIDevices finds the controllers (nvme0), namespaces (nvme0n1) and
// paths (nvme0c1n1) named anywhere in nvme-cli's JSON. Its layout differs
// between versions 1.x and 2.x, so the document is walked rather than
// decoded into one shape.
func NVMeCLIDevices(b []byte) []string {
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var walk func(v any, key string, depth int)
	walk = func(v any, key string, depth int) {
		if depth > 32 {
			return
		}
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				walk(x, k, depth+1)
			}
		case []any:
			for _, x := range t {
				walk(x, key, depth+1)
			}
		case string:
			switch key {
			case "DevicePath", "Controller", "Name", "NameSpace", "Namespace":
				if m := devRef.FindString(t); m != "" && (t == m || t == "/dev/"+m) {
					seen[m] = true
				}
			}
		}
	}
	walk(doc, "", 0)
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// ReadSmartLog runs `nvme smart-log /dev/CTRL -o json` and reads it; the
// source keeps the raw output, Problems say what could not be read.
func ReadSmartLog(ctx context.Context, r *Runner, ctrl string) *SmartLog {
	s := &SmartLog{Source: r.Run(ctx, "nvme", "smart-log", "/dev/"+ctrl, "-o", "json")}
	if !s.Source.OK() {
		return s
	}
	if err := ParseSmartLog([]byte(s.Source.Raw), s); err != nil {
		s.Problems = append(s.Problems, "parse: "+err.Error())
	}
	return s
}

// DataUnitBytes is the size of a SMART data unit: 1000 × 512 bytes.
const DataUnitBytes = 512000

// ParseSmartLog reads the fields readiness checks and drive wear use from
// nvme-cli's smart-log JSON. The layout differs between nvme-cli versions:
// 1.x prints 128-bit counters as floats, 2.x as bare numbers (json-c with
// a string serializer, src/nvme-print-json.c) or quoted strings, some 2.x
// releases capitalise "Temperature", and verbose/human output nests
// critical_warning as {"value": n, ...} (or "Value"). Keys are therefore
// matched without regard to case, and numbers are read as text so that a
// counter past 2^53 stays exact.
func ParseSmartLog(b []byte, s *SmartLog) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return err
	}
	lower := make(map[string]any, len(doc))
	for k, v := range doc {
		lk := strings.ToLower(k)
		if _, dup := lower[lk]; !dup || k == lk {
			lower[lk] = v
		}
	}
	// text returns a number's digits (a bare, float or quoted number, or
	// the "value" of a verbose object).
	var text func(v any, depth int) string
	text = func(v any, depth int) string {
		switch t := v.(type) {
		case json.Number:
			return t.String()
		case string:
			return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(t), "%"))
		case map[string]any:
			if depth > 0 {
				return ""
			}
			for k, x := range t {
				if strings.EqualFold(k, "value") {
					return text(x, depth+1)
				}
			}
		}
		return ""
	}
	get := func(keys ...string) *int64 {
		for _, k := range keys {
			if v, ok := lower[k]; ok {
				if n, err := strconv.ParseInt(text(v, 0), 10, 64); err == nil {
					return &n
				}
				if f, err := strconv.ParseFloat(text(v, 0), 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<62 {
					n := int64(f)
					return &n
				}
			}
		}
		return nil
	}
	getU := func(key string) *uint64 {
		v, ok := lower[key]
		if !ok {
			return nil
		}
		t := text(v, 0)
		if n, err := strconv.ParseUint(t, 10, 64); err == nil {
			return &n
		}
		// nvme-cli 1.x: a long double printed as a float ("3318810242" or
		// "3.31881e+09"); exact only as far as the float is.
		if f, err := strconv.ParseFloat(t, 64); err == nil && f >= 0 && f < 1<<64 && f == math.Trunc(f) {
			n := uint64(f)
			return &n
		}
		return nil
	}
	s.CriticalWarning = get("critical_warning")
	s.MediaErrors = get("media_errors")
	s.PercentUsed = get("percent_used", "percentage_used")
	s.TemperatureK = get("temperature")
	s.DataUnitsRead = getU("data_units_read")
	s.DataUnitsWritten = getU("data_units_written")
	s.PowerOnHours = get("power_on_hours")
	return nil
}

func collectNetwork(ctx context.Context, r *Runner) Network {
	n := Network{IPLink: r.Run(ctx, "ip", "-j", "link"), IPAddr: r.Run(ctx, "ip", "-j", "addr")}
	links, _ := parseIPJSON([]byte(n.IPLink.Raw))
	addrs, _ := parseIPJSON([]byte(n.IPAddr.Raw))
	addrByName := map[string][]string{}
	for _, a := range addrs {
		addrByName[a.IfName] = a.addresses()
	}
	names := map[string]bool{}
	for _, l := range links {
		names[l.IfName] = true
	}
	// Without ip(8), sysfs still lists the interfaces.
	if len(links) == 0 {
		for _, dir := range r.Glob("/sys/class/net/*") {
			links = append(links, ipLink{IfName: path.Base(dir)})
		}
	}
	for _, l := range links {
		if l.IfName == "" {
			continue
		}
		dir := "/sys/class/net/" + l.IfName
		nic := NIC{Name: l.IfName, MTU: l.MTU, OperState: l.OperState, LinkType: l.LinkType, MAC: l.Address, Addresses: addrByName[l.IfName]}
		if nic.MTU == 0 {
			nic.MTU = atoiLoose(r.Attr(dir + "/mtu").Value)
		}
		nic.Physical = r.Exists(dir + "/device")
		nic.SpeedMbs = r.Attr(dir + "/speed")
		if strings.Contains(nic.SpeedMbs.Error, "invalid argument") {
			// Virtual and down links refuse to report a speed.
			nic.SpeedMbs.Absent = true
		}
		if nic.Physical {
			nic.NUMANode = r.Attr(dir + "/device/numa_node")
			nic.Vendor = r.Attr(dir + "/device/vendor")
			nic.Device = r.Attr(dir + "/device/device")
			if nic.Vendor.Value != "" && nic.Device.Value != "" {
				nic.PCIID = Value{Value: strings.TrimPrefix(nic.Vendor.Value, "0x") + ":" + strings.TrimPrefix(nic.Device.Value, "0x"),
					Source: Source{File: dir + "/device/{vendor,device}"}}
			} else {
				nic.PCIID = Value{Source: Source{File: dir + "/device/{vendor,device}", Absent: true}}
			}
			nic.Driver = linkBase(r, dir+"/device/driver")
			nic.BusInfo = linkBase(r, dir+"/device")
			nic.ECN = collectECN(r, dir)
			pfc := r.Run(ctx, "dcb", "-j", "pfc", "show", "dev", l.IfName)
			nic.PFC = Value{Value: strings.TrimSpace(pfc.Raw), Source: pfc}
			nic.PFC.Raw = ""
			if strings.Contains(pfc.Error, "not supported") {
				nic.PFC.Absent = true
			}
		}
		n.Interfaces = append(n.Interfaces, nic)
	}
	sort.Slice(n.Interfaces, func(i, j int) bool { return n.Interfaces[i].Name < n.Interfaces[j].Name })
	return n
}

func linkBase(r *Runner, p string) Value {
	v := Value{Source: Source{File: p}}
	target, err := r.Readlink(p)
	if err != nil {
		v.Absent = true
		return v
	}
	v.Value = path.Base(target)
	return v
}

// collectECN reads ECN settings where the driver exposes them (mlx5:
// /sys/class/net/X/ecn/roce_{np,rp}/enable/<prio>); absent otherwise.
func collectECN(r *Runner, dir string) Value {
	files := r.Glob(dir + "/ecn/*/enable/*")
	v := Value{Source: Source{File: dir + "/ecn"}}
	if len(files) == 0 {
		v.Absent = true
		return v
	}
	var parts []string
	for _, f := range files {
		rel := strings.TrimPrefix(f, dir+"/ecn/")
		parts = append(parts, rel+"="+r.Attr(f).Value)
	}
	v.Value = strings.Join(parts, " ")
	return v
}

type ipLink struct {
	IfName    string `json:"ifname"`
	MTU       int    `json:"mtu"`
	OperState string `json:"operstate"`
	LinkType  string `json:"link_type"`
	Address   string `json:"address"`
	AddrInfo  []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

func (l ipLink) addresses() []string {
	var out []string
	for _, a := range l.AddrInfo {
		if a.Local != "" {
			out = append(out, fmt.Sprintf("%s/%d", a.Local, a.PrefixLen))
		}
	}
	return out
}

// parseIPJSON parses `ip -j link` or `ip -j addr`.
func parseIPJSON(b []byte) ([]ipLink, error) {
	var out []ipLink
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, nil
	}
	err := json.Unmarshal(b, &out)
	return out, err
}

func collectRDMA(ctx context.Context, r *Runner) RDMA {
	d := RDMA{Source: r.Run(ctx, "rdma", "-j", "link"), ClassDir: Source{File: "/sys/class/infiniband"}}
	if !r.Exists("/sys/class/infiniband") {
		d.ClassDir.Absent = true
		// No RDMA device in the kernel: rdma(8) fails to open its netlink
		// socket, which is absence, not a collection error.
		d.Source.Absent = true
		return d
	}
	if d.Source.OK() {
		var links []struct {
			Ifname        string `json:"ifname"`
			Port          int    `json:"port"`
			State         string `json:"state"`
			PhysicalState string `json:"physical_state"`
			Netdev        string `json:"netdev"`
		}
		if err := json.Unmarshal([]byte(d.Source.Raw), &links); err != nil {
			d.Source.Error = "parse: " + err.Error()
			return d
		}
		for _, l := range links {
			d.Links = append(d.Links, RDMALink{Device: l.Ifname, Port: l.Port, State: l.State, Physics: l.PhysicalState, NetDev: l.Netdev})
		}
	}
	return d
}

func collectModules(r *Runner) Modules {
	m := Modules{Loaded: map[string]bool{}, Source: r.ReadFile("/proc/modules")}
	loaded := ParseProcModules(m.Source.Raw)
	for _, name := range InterestingModules {
		m.Loaded[name] = loaded[name]
		if !loaded[name] && r.Exists("/sys/module/"+name) {
			// Built into the kernel (or /proc/modules is absent): sysfs still shows it.
			if m.Builtin == nil {
				m.Builtin = map[string]bool{}
			}
			m.Builtin[name] = true
		}
	}
	// The full list is long and only these names matter; keep their lines.
	if m.Source.OK() {
		var keep []string
		for _, line := range strings.Split(m.Source.Raw, "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				if _, ok := m.Loaded[f[0]]; ok {
					keep = append(keep, line)
				}
			}
		}
		m.Source.Raw = strings.Join(keep, "\n")
		m.Source.Truncated = true
	}
	return m
}

// ParseProcModules returns the module names in /proc/modules.
func ParseProcModules(s string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out[f[0]] = true
		}
	}
	return out
}

func collectCPUFreq(r *Runner) CPUFreq {
	c := CPUFreq{}
	files := r.Glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")
	if len(files) == 0 {
		c.Absent = true
		return c
	}
	c.Governors = map[string]int{}
	for _, f := range files {
		v := r.Attr(f)
		c.Files = append(c.Files, v)
		if v.Value != "" {
			c.Governors[v.Value]++
		}
	}
	return c
}

// collectGPU asks every vendor tool (package gpu) for its devices. A tool
// that is not installed is recorded absent; one whose output does not
// parse keeps its raw output and an error, and lists no devices. A tool
// superseded by another installed one (rocm-smi beside amd-smi) still
// runs, as evidence, but its devices are the other's.
func collectGPU(ctx context.Context, r *Runner) GPU {
	var g GPU
	superseded := gpu.Superseded(func(tool string) bool { _, err := r.lookPath(tool); return err == nil })
	for _, a := range gpu.Adapters() {
		t := GPUTool{Tool: a.Tool, Vendor: a.Vendor}
		var outs [][]byte
		for _, args := range a.Facts {
			src := r.RunLarge(ctx, a.Argv(args)...)
			t.Sources = append(t.Sources, src)
			if src.Truncated {
				src.Error = fmt.Sprintf("output longer than %d bytes", MaxLargeRaw)
			}
			if !src.OK() {
				break
			}
			outs = append(outs, []byte(src.Raw))
		}
		if a.Tool == "nvidia-smi" {
			g.Source = t.Sources[0]
		}
		if len(outs) == len(a.Facts) {
			// The optional and per-device commands: a failure is kept as
			// evidence and leaves its output nil for the parser.
			more := append([][]string(nil), a.OptionalFacts...)
			if a.MoreFacts != nil {
				more = append(more, a.MoreFacts(outs)...)
			}
			for _, args := range more {
				src := r.RunLarge(ctx, a.Argv(args)...)
				t.Sources = append(t.Sources, src)
				if src.OK() && !src.Truncated {
					outs = append(outs, []byte(src.Raw))
				} else {
					outs = append(outs, nil)
				}
			}
			devs, err := a.ParseFacts(outs)
			a.Explain(devs)
			if err != nil {
				t.Error = "parse: " + err.Error()
				if a.Tool == "nvidia-smi" {
					g.Source.Error = t.Error
				}
			}
			t.Devices = len(devs)
			if superseded[a.Tool] {
				t.SupersededBy = supersederOf(a.Tool)
				devs = nil
			}
			for _, d := range devs {
				g.GPUs = append(g.GPUs, gpuDevice(r, a, t, d))
			}
		}
		g.Tools = append(g.Tools, t)
	}
	if !g.Source.Absent {
		src := r.Run(ctx, append([]string{"nvidia-smi"}, gpu.TopoArgs...)...)
		g.TopologySource = &src
		if src.OK() {
			topo, err := gpu.ParseTopology([]byte(src.Raw))
			if err != nil {
				g.TopologySource.Error = "parse: " + err.Error()
			}
			g.Topology = topo
		}
	}
	return g
}

func supersederOf(tool string) string {
	for _, a := range gpu.Adapters() {
		if a.Supersedes == tool {
			return a.Tool
		}
	}
	return ""
}

// gpuDevice places one device a tool reported: sysfs is the authority on
// its NUMA node; the tool's own (rocm-smi and amd-smi report one) stands
// in where sysfs has no entry.
func gpuDevice(r *Runner, a gpu.Adapter, t GPUTool, d gpu.Device) GPUDevice {
	gd := GPUDevice{Index: d.Index, Vendor: a.Vendor, Tool: a.Tool, Name: d.Name, UUID: d.UUID,
		DriverVersion: d.Driver, Firmware: d.Firmware, PCIBusID: d.PCIAddress, MemoryMiB: d.MemoryBytes >> 20, NotReported: d.NotReported}
	if d.PCIAddress != "" {
		gd.NUMANode = r.Attr("/sys/bus/pci/devices/" + d.PCIAddress + "/numa_node")
	}
	if (d.PCIAddress == "" || gd.NUMANode.Absent) && d.NUMANode != "" {
		gd.NUMANode = Value{Value: d.NUMANode, Source: Source{Command: t.Sources[0].Command}}
	} else if d.PCIAddress == "" {
		gd.NUMANode = Value{Source: Source{Command: t.Sources[0].Command, Absent: true}}
	}
	return gd
}

// SysfsPCIAddress turns nvidia-smi's bus id (00000000:3B:00.0) into the
// sysfs form (0000:3b:00.0).
func SysfsPCIAddress(busID string) string {
	s := strings.ToLower(strings.TrimSpace(busID))
	if dom, rest, ok := strings.Cut(s, ":"); ok && len(dom) > 4 {
		s = dom[len(dom)-4:] + ":" + rest
	}
	return s
}

func collectGDS(r *Runner) GDS {
	return GDS{Stats: r.ReadFile("/proc/driver/nvidia-fs/stats"), CuFileJSON: r.ReadFile("/etc/cufile.json")}
}

func collectTools(ctx context.Context, r *Runner) []Tool {
	tools := []struct {
		name string
		argv []string
	}{
		{"fio", []string{"fio", "--version"}},
		{"nvme-cli", []string{"nvme", "version"}},
		{"tc", []string{"tc", "-V"}},
	}
	var out []Tool
	for _, t := range tools {
		src := r.Run(ctx, t.argv...)
		out = append(out, Tool{Name: t.name, Version: strings.TrimSpace(firstLine(src.Raw)), Source: src})
	}
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
