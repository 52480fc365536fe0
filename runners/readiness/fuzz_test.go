package readiness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/facts"
)

var fuzzTransports = []acceptance.Transport{"", acceptance.TransportNVMeoFRDMA, acceptance.TransportNVMeoFTCP, acceptance.TransportLocalNVMe, acceptance.TransportEmulated}

// FuzzEvaluate feeds mutated facts documents (seeded with the fixtures) to
// Evaluate: it must never panic and its output must keep its shape.
func FuzzEvaluate(f *testing.F) {
	for name := range fixtureHosts {
		b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(1), "")
		f.Add(b, uint8(6), "ens1f0np0")
	}
	f.Add([]byte(`{}`), uint8(0), "")
	f.Add([]byte(`{"nvme":{"controllers":[{"name":"nvme0","transport":{"value":"rdma"},"state":{"value":"live"},"smart_log":{"critical_warning":1}}],"namespaces":[{"name":"nvme0n1","paths":[{"name":"nvme0c0n1"}]}]}}`), uint8(3), "")
	f.Fuzz(func(t *testing.T, doc []byte, flags uint8, iface string) {
		var fx facts.Facts
		if json.Unmarshal(doc, &fx) != nil {
			return
		}
		opts := Options{
			Transport:        fuzzTransports[int(flags)%len(fuzzTransports)],
			GPUExpected:      flags&0x08 != 0,
			FioRequired:      flags&0x10 != 0,
			MinLinkSpeedMbps: int(flags&0x20) * 1000,
		}
		if iface != "" {
			opts.StorageInterfaces = []string{iface}
		}
		checks := Evaluate(&fx, opts)
		pos := map[string]int{}
		for i, d := range Definitions() {
			pos[d.ID] = i
		}
		last := -1
		for _, c := range checks {
			i, ok := pos[c.ID]
			if !ok || i <= last {
				t.Fatalf("check %q out of the catalogue or out of order", c.ID)
			}
			last = i
			switch c.Status {
			case PASS, WARN, FAIL, UNKNOWN:
			default:
				t.Fatalf("%s: status %q", c.ID, c.Status)
			}
			if c.Summary == "" {
				t.Fatalf("%s: no summary", c.ID)
			}
			if (c.Status == PASS) != (c.Fix == "") {
				t.Fatalf("%s %s: fix %q", c.ID, c.Status, c.Fix)
			}
			if (c.Status == PASS || c.Status == FAIL) && len(c.Evidence) == 0 {
				t.Fatalf("%s %s without evidence: %s", c.ID, c.Status, c.Summary)
			}
			for _, ev := range c.Evidence {
				if ev.Fact == "" || len(ev.Excerpt) > maxExcerpt+len("…") {
					t.Fatalf("%s: bad evidence %+v", c.ID, ev)
				}
			}
		}
		for _, c := range BlockingFailures(checks) {
			if !c.Blocking || c.Status != FAIL {
				t.Fatalf("%s is not a blocking failure", c.ID)
			}
		}
		p, w, fl, u := Summary(checks)
		if p+w+fl+u != len(checks) {
			t.Fatal("summary does not add up")
		}
	})
}

// mutateNode replaces (or deletes) the node numbered target in a
// depth-first walk of a decoded JSON document, keys in sorted order.
func mutateNode(doc any, target int, variant uint8, s string) any {
	n := 0
	replacement := func() (any, bool) {
		switch variant % 10 {
		case 0:
			return nil, false // delete
		case 1:
			return nil, true
		case 2:
			return "", true
		case 3:
			return s, true
		case 4:
			return -1.0, true
		case 5:
			return 0.0, true
		case 6:
			return 1e12, true
		case 7:
			return true, true
		case 8:
			return []any{}, true
		}
		return map[string]any{}, true
	}
	var walk func(v any) (any, bool)
	walk = func(v any) (any, bool) {
		if n == target {
			n++
			return replacement()
		}
		n++
		switch t := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(t) {
				nv, keep := walk(t[k])
				if keep {
					t[k] = nv
				} else {
					delete(t, k)
				}
			}
		case []any:
			out := t[:0]
			for _, x := range t {
				if nv, keep := walk(x); keep {
					out = append(out, nv)
				}
			}
			return out, true
		}
		return v, true
	}
	out, _ := walk(doc)
	return out
}

// FuzzEvaluateMutatedFacts changes one node of a fixture (any field, at
// any depth) to another value or type, or deletes it.
func FuzzEvaluateMutatedFacts(f *testing.F) {
	names := []string{"rdma-gpu", "tcp-nogpu", "failing-ssd"}
	raw := make([][]byte, len(names))
	for i, name := range names {
		b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		raw[i] = b
	}
	for i := range names {
		for _, node := range []uint16{3, 120, 400, 900} {
			f.Add(uint8(i), node, uint8(node%10), uint8(i+1), "nvme1")
		}
	}
	f.Fuzz(func(t *testing.T, fixture uint8, node uint16, variant uint8, flags uint8, s string) {
		var doc any
		if err := json.Unmarshal(raw[int(fixture)%len(raw)], &doc); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(mutateNode(doc, int(node), variant, s))
		if err != nil {
			t.Fatal(err)
		}
		var fx facts.Facts
		if json.Unmarshal(b, &fx) != nil {
			return // a type the facts document cannot hold
		}
		opts := Options{Transport: fuzzTransports[int(flags)%len(fuzzTransports)], GPUExpected: flags&0x08 != 0, FioRequired: flags&0x10 != 0}
		checks := Evaluate(&fx, opts)
		for _, c := range checks {
			if (c.Status == PASS) != (c.Fix == "") || c.Summary == "" {
				t.Fatalf("%s %s: summary %q fix %q", c.ID, c.Status, c.Summary, c.Fix)
			}
			if (c.Status == PASS || c.Status == FAIL) && len(c.Evidence) == 0 {
				t.Fatalf("%s %s without evidence", c.ID, c.Status)
			}
		}
	})
}
