package web

import (
	"context"
	"io"

	"github.com/accordlab/accord/service/report"
)

// RenderReport writes a signed run's human report: service/report's
// Renderer, wired in main.
func RenderReport(ctx context.Context, w io.Writer, c report.Contents) error {
	d := ReportData{Run: c.Run, Program: c.Program, Vendor: c.Vendor, Customer: c.Customer, Evaluation: c.Evaluation,
		Metrics: MetricRowsFrom(c.Measurements), ProfileYAML: c.ProfileYAML, GateYAML: c.GateYAML, Artifacts: c.Artifacts,
		KeyID: c.KeyID, SignedAt: c.SignedAt, StopLoss: c.StopLoss}
	if c.HostFacts != nil {
		d.Facts = SummarizeFacts(*c.HostFacts)
	}
	return Report(d).Render(ctx, w)
}

var _ report.Renderer = RenderReport
