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
