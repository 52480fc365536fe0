package probe

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/exporter"
	"github.com/accordlab/accord/runners/probe/promtext"
	"github.com/accordlab/accord/runners/probe/wire"
)

// exporterSource is one of the profile's Prometheus exporters, scraped
// every second by telemetry.
type exporterSource struct {
	name    string
	url     string
	mapping exporter.Mapping

	// What the step saw of it: the first exposition is kept as evidence,
	// the first failure is said once.
	mu      sync.Mutex
	saved   bool
	warned  bool
	scrapes int
	failed  int
}

// exporterSources reads the profile's exporters; one whose mapping is
// unknown is said and left out (validation refuses such profiles, so
// only a plan from a newer server gets here).
func exporterSources(spec *acceptance.TelemetrySpec, warn func(string, ...any)) []*exporterSource {
	if spec == nil {
		return nil
	}
	var out []*exporterSource
	for _, e := range spec.Exporters {
		m, err := exporter.MappingOf(e)
		if err != nil {
			warn("telemetry: %v", err)
			continue
		}
		out = append(out, &exporterSource{name: exporter.Name(e), url: e.URL, mapping: m})
	}
	return out
}

// exporterFile is where the first exposition of an exporter is kept in
// the step's folder.
func exporterFile(name string) string { return "exporter-" + name + ".txt" }

// scrapeExporters scrapes every exporter side by side, each within a
// second, and maps the expositions to device readings. A failed scrape
// gives no reading that second.
func (t *telemetry) scrapeExporters(ctx context.Context) []wire.GPUSample {
	results := make([][]wire.GPUSample, len(t.exporters))
	var wg sync.WaitGroup
	for i, e := range t.exporters {
		wg.Go(func() { results[i] = t.scrapeOne(ctx, e) })
	}
	wg.Wait()
	var out []wire.GPUSample
	for _, r := range results {
		out = append(out, r...)
	}
	return out
}

func (t *telemetry) scrapeOne(ctx context.Context, e *exporterSource) []wire.GPUSample {
	text, err := promtext.Scrape(ctx, e.url, time.Second)
	var doc *promtext.Doc
	if err == nil {
		doc, err = promtext.Parse(text)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scrapes++
	if err != nil {
		e.failed++
		if !e.warned && ctx.Err() == nil {
			e.warned = true
			t.warn("telemetry: exporter %s: %v (its readings are absent while it fails)", e.name, err)
		}
		return nil
	}
	if !e.saved && t.dir != "" {
		e.saved = true
		if werr := os.WriteFile(filepath.Join(t.dir, exporterFile(e.name)), []byte(text), 0o644); werr != nil {
			t.warn("telemetry: exporter %s: keep its exposition: %v", e.name, werr)
		}
	}
	var out []wire.GPUSample
	for _, s := range exporter.Read(e.mapping, doc) {
		out = append(out, wire.GPUSample{Tool: wire.ExporterToolPrefix + e.name, Index: s.Index, UtilPct: s.UtilPct,
			MemUsedBytes: s.MemUsedBytes, MemBWPct: s.MemBWPct, PowerW: s.PowerW})
	}
	return out
}
