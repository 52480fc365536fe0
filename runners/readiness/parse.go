package readiness

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var kernelVersion = regexp.MustCompile(`^(\d+)\.(\d+)`)

// parseKernel reads major.minor from a kernel release ("5.14.0-427.el9").
func parseKernel(s string) (major, minor int, ok bool) {
	m := kernelVersion.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(m[1])
	minor, err2 := strconv.Atoi(m[2])
	return major, minor, err1 == nil && err2 == nil
}

// selectedScheduler reads the active scheduler from queue/scheduler
// ("[none] mq-deadline kyber bfq"). A bio-based device prints a bare "none".
func selectedScheduler(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 1 {
			return s[i+1 : i+j], true
		}
		return "", false
	}
	if s == "none" {
		return s, true
	}
	return "", false
}

// parsePFC reads the priorities with PFC enabled from `dcb -j pfc show dev X`:
// {"pfc_cap":8,"macsec_bypass":false,"delay":0,"prio_pfc":[false,false,false,true,...]}.
// iproute2 prints booleans; "on"/"off" strings are accepted too.
func parsePFC(s string) (enabled []int, err error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		return nil, fmt.Errorf("pfc: %w", err)
	}
	raw, ok := doc["prio_pfc"]
	if !ok {
		return nil, fmt.Errorf("pfc: no prio_pfc")
	}
	var items []any
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("pfc: prio_pfc: %w", err)
	}
	enabled = []int{}
	for i, it := range items {
		switch v := it.(type) {
		case bool:
			if v {
				enabled = append(enabled, i)
			}
		case string:
			switch v {
			case "on":
				enabled = append(enabled, i)
			case "off":
			default:
				return nil, fmt.Errorf("pfc: priority %d: %q", i, v)
			}
		default:
			return nil, fmt.Errorf("pfc: priority %d: %v", i, it)
		}
	}
	return enabled, nil
}

// parseECN reads the collector's ECN summary of mlx5's sysfs
// ("roce_np/enable/3=1 roce_rp/enable/3=1 ...") into the priorities where
// each point (roce_np: notification point, roce_rp: reaction point) is on.
func parseECN(s string) map[string][]int {
	out := map[string][]int{}
	for _, f := range strings.Fields(s) {
		path, val, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		parts := strings.Split(path, "/")
		if len(parts) != 3 || parts[1] != "enable" {
			continue
		}
		prio, err := strconv.Atoi(parts[2])
		if err != nil {
			continue
		}
		if _, seen := out[parts[0]]; !seen {
			out[parts[0]] = []int{}
		}
		if strings.TrimSpace(val) == "1" {
			out[parts[0]] = append(out[parts[0]], prio)
		}
	}
	for k := range out {
		sort.Ints(out[k])
	}
	return out
}

// stripJSONComments removes // and /* */ comments outside strings, as
// cufile.json carries them.
func stripJSONComments(s string) string {
	var b strings.Builder
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			b.WriteByte(c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
			b.WriteByte(c)
			continue
		}
		if c == '/' && i+1 < len(s) && s[i+1] == '/' {
			for i < len(s) && s[i] != '\n' {
				i++
			}
			b.WriteByte('\n')
			continue
		}
		if c == '/' && i+1 < len(s) && s[i+1] == '*' {
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				break
			}
			i += end + 3
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// cuFileCompatMode reads properties.allow_compat_mode from cufile.json
// (older releases call it use_compat_mode). ok is false when the file does
// not parse or does not say.
func cuFileCompatMode(s string) (compat bool, ok bool) {
	var doc struct {
		Properties map[string]any `json:"properties"`
	}
	if json.Unmarshal([]byte(stripJSONComments(s)), &doc) != nil {
		return false, false
	}
	for _, k := range []string{"allow_compat_mode", "use_compat_mode"} {
		if v, found := doc.Properties[k].(bool); found {
			return v, true
		}
	}
	return false, false
}

var (
	gdsVersion  = regexp.MustCompile(`(?m)^GDS Version:\s*(\S+)`)
	nvfsVersion = regexp.MustCompile(`NVFS Driver\(version:\s*([^)\s]+)\)`)
)

// parseGDSStats reads the versions from /proc/driver/nvidia-fs/stats.
func parseGDSStats(s string) (gds, nvfs string) {
	if m := gdsVersion.FindStringSubmatch(s); m != nil {
		gds = m[1]
	}
	if m := nvfsVersion.FindStringSubmatch(s); m != nil {
		nvfs = m[1]
	}
	return gds, nvfs
}

var fioVersion = regexp.MustCompile(`fio-(\d+)\.(\d+)`)

// parseFioMajor reads the major version from `fio --version` ("fio-3.36").
func parseFioMajor(s string) (int, bool) {
	m := fioVersion.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// parseNode reads a sysfs numa_node; -1 (no node) and garbage are unknown.
func parseNode(s string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
