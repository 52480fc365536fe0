package main

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// River's routine lines are DEBUG; what it says otherwise keeps its level.
func TestRiverRoutineLinesAreDebug(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf bytes.Buffer
		log := riverLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})))
		log.Info("producer: Producer job counts", "queue", "runs")
		log.Info("JobCleaner: Ran successfully", "num_jobs_deleted", 3)
		log.Info("River client started", "client_id", "x")
		log.Warn("producer: Producer job counts") // not routine at WARN
		out := buf.String()
		require.Contains(t, out, `level=INFO msg="River client started" component=river client_id=x`)
		require.Contains(t, out, `level=WARN msg="producer: Producer job counts"`)
		if level == slog.LevelInfo {
			require.NotContains(t, out, "level=INFO msg=\"producer")
			require.NotContains(t, out, "Ran successfully")
		} else {
			require.Contains(t, out, `level=DEBUG msg="producer: Producer job counts" component=river queue=runs`)
			require.Contains(t, out, `level=DEBUG msg="JobCleaner: Ran successfully"`)
		}
	}
}
