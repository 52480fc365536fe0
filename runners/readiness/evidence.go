package readiness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/accordlab/accord/runners/probe/facts"
)

// maxExcerpt bounds one evidence excerpt: enough for a smart-log document
// or a few lines around the value, small enough for a page of checks.
const maxExcerpt = 2048

// valueEv is the evidence of a scalar fact. For sysfs attributes the value
// is the whole file, so the excerpt is left empty.
func valueEv(fact string, v facts.Value) Evidence {
	ev := sourceEv(fact, v.Source, v.Raw)
	ev.Value = v.Value
	if strings.TrimSpace(ev.Excerpt) == v.Value {
		ev.Excerpt = ""
	}
	return ev
}

// sourceEv is evidence from a command or file, with an excerpt of its output.
func sourceEv(fact string, s facts.Source, excerpt string) Evidence {
	ev := Evidence{Fact: fact, File: s.File, Absent: s.Absent, Error: s.Error, Excerpt: clip(excerpt)}
	if len(s.Command) > 0 {
		ev.Command = append([]string(nil), s.Command...)
	}
	return ev
}

// clip shortens s to maxExcerpt bytes on a rune boundary.
func clip(s string) string {
	s = strings.TrimRight(s, "\n")
	if len(s) <= maxExcerpt {
		return s
	}
	cut := maxExcerpt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// linesAround returns the line of raw that contains needle (compared
// without case) and the n lines after it, or "" when needle is not there.
func linesAround(raw, needle string, n int) string {
	i := strings.Index(strings.ToLower(raw), strings.ToLower(needle))
	if i < 0 || needle == "" {
		return ""
	}
	start := strings.LastIndexByte(raw[:i], '\n') + 1
	end := i
	for k := 0; k <= n; k++ {
		j := strings.IndexByte(raw[end:], '\n')
		if j < 0 {
			end = len(raw)
			break
		}
		end += j + 1
	}
	return strings.TrimRight(raw[start:end], "\n")
}

// compactJSON renders a JSON fragment on one line (or returns it as it is).
func compactJSON(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

// nicEv is evidence from `ip -j link` for one interface.
func nicEv(e *env, name, field, value string) Evidence {
	ev := sourceEv(fmt.Sprintf("network.interfaces[%s].%s", name, field), e.f.Network.IPLink, compactJSON(e.ipLinks[name]))
	ev.Value = value
	return ev
}

// rdmaLinkEv is evidence from `rdma -j link` for one port.
func rdmaLinkEv(e *env, l facts.RDMALink, field, value string) Evidence {
	ev := sourceEv(fmt.Sprintf("rdma.links[%s/%d].%s", l.Device, l.Port, field), e.f.RDMA.Source, rdmaExcerpt(e.f.RDMA.Source.Raw, l))
	ev.Value = value
	return ev
}

func rdmaExcerpt(raw string, l facts.RDMALink) string {
	var items []json.RawMessage
	if json.Unmarshal([]byte(raw), &items) != nil {
		return ""
	}
	for _, it := range items {
		var x struct {
			IfName string `json:"ifname"`
			Port   int    `json:"port"`
		}
		if json.Unmarshal(it, &x) == nil && x.IfName == l.Device && x.Port == l.Port {
			return compactJSON(string(it))
		}
	}
	return ""
}

// moduleEv is evidence that a module is (or is not) in /proc/modules.
func moduleEv(e *env, name string) Evidence {
	m := e.f.Modules
	loaded := m.Source.OK() && m.Loaded[name]
	ev := sourceEv("modules.loaded["+name+"]", m.Source, "")
	ev.Value = strconv.FormatBool(loaded)
	if loaded {
		for _, line := range strings.Split(m.Source.Raw, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == name {
				ev.Excerpt = line
				break
			}
		}
	}
	return ev
}

// toolEv is the evidence of a tool's version.
func toolEv(t facts.Tool) Evidence {
	ev := sourceEv("tools["+t.Name+"].version", t.Source, t.Source.Raw)
	ev.Value = t.Version
	return ev
}
