package acceptance

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// What importing costs, for the editor's round trip (post → import →
// validate → re-render) and for the worst document the size limit lets in.

func BenchmarkImportProfileYAML(b *testing.B) {
	tmpl, _ := LookupProfileTemplate("cold-warm-ttft")
	doc, err := ExportProfileYAML(tmpl.Spec)
	require.NoError(b, err)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ImportProfileYAML(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkImportProfileJSON(b *testing.B) {
	tmpl, _ := LookupProfileTemplate("cold-warm-ttft")
	doc, err := ExportProfileJSON(tmpl.Spec)
	require.NoError(b, err)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ImportProfileJSON(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// largestProfileYAML is a valid profile of MaxSteps inference steps with
// long descriptions, as close to MaxSpecBytes as it gets.
func largestProfileYAML(b *testing.B) []byte {
	tmpl, _ := LookupProfileTemplate("soak-2h")
	p := tmpl.Spec
	p.Steps = nil
	for i := 0; i < MaxSteps; i++ {
		s := tmpl.Spec.Steps[0].Clone()
		s.Name = fmt.Sprintf("step-%03d", i)
		s.Inference.Load = Load{Mode: LoadConcurrency, Sweep: []float64{1, 2, 4, 8, 16, 32, 64, 128}}
		p.Steps = append(p.Steps, s)
	}
	doc, err := ExportProfileYAML(p)
	require.NoError(b, err)
	pad := MaxSpecBytes - len(doc) - 2
	doc = append(doc, []byte("# "+strings.Repeat("x", pad-1)+"\n")...)
	require.LessOrEqual(b, len(doc), MaxSpecBytes)
	return doc
}

func BenchmarkImportLargestProfileYAML(b *testing.B) {
	doc := largestProfileYAML(b)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ImportProfileYAML(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProfileDigest(b *testing.B) {
	tmpl, _ := LookupProfileTemplate("cold-warm-ttft")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ProfileDigest(tmpl.Spec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDiffProfiles(b *testing.B) {
	a, _ := LookupProfileTemplate("cold-warm-ttft")
	c := a.Spec.Clone()
	c.Steps[1].Inference.Requests = 128
	c.Steps = append(c.Steps, c.Steps[2].Clone())
	c.Steps[4].Name = "settle-again"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DiffProfiles(a.Spec, c); err != nil {
			b.Fatal(err)
		}
	}
}
