package chartdata_test

import (
	"github.com/accordlab/accord/acceptance/chartdata"
	"testing"

	"github.com/accordlab/accord/acceptance/chartdata/chartdatatest"
)

// Benchmarks of the downsamplers on a million points.

const benchN = 1_000_000

func BenchmarkLTTB1M(b *testing.B) {
	pts := chartdatatest.RequestsOverRun(1, benchN, 3600, 500_000, 9000)
	b.ResetTimer()
	for b.Loop() {
		chartdata.LTTB(pts, 3000)
	}
}

func BenchmarkMinMax1M(b *testing.B) {
	pts := chartdatatest.RequestsOverRun(1, benchN, 3600, 500_000, 9000)
	b.ResetTimer()
	for b.Loop() {
		chartdata.MinMax(pts, 3000)
	}
}

func BenchmarkMinMaxSampled1M(b *testing.B) {
	pts := chartdatatest.RequestsOverRun(1, benchN, 3600, 500_000, 9000)
	b.ResetTimer()
	for b.Loop() {
		chartdata.MinMaxSampled(pts, 4000)
	}
}
