package jobs

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/wire"
)

// Event lines from the probe decode into what is stored and what the
// worker acts on; any line either decodes or is an error, never a panic,
// and a neighbour sighting names a run only of the same installation.
func FuzzDecodeEvent(f *testing.F) {
	for _, e := range []wire.Event{
		{Seq: 1, Time: "2026-12-01T10:00:00.5Z", Type: wire.EventLog, Level: "info", Message: "probe started"},
		{Seq: 2, Time: "2026-12-01T10:00:01Z", Type: wire.EventProgress, Progress: &wire.Progress{Step: 1, Steps: 2, Fraction: 0.5}},
		{Seq: 3, Time: "2026-12-01T10:00:02Z", Type: wire.EventInterim, Interim: &wire.Interim{Step: "read", Metrics: map[string]wire.InterimStats{"ttft": {N: 3, P99: 12}}}},
		{Seq: 4, Time: "2026-12-01T10:00:03Z", Type: wire.EventNeighbour, Level: "warn", Neighbour: &wire.Neighbour{Dir: "/h/.accord/a/runs/2-1", RunID: 2, SameInstallation: true,
			FirstSeen: "2026-12-01T10:00:03Z", LastSeen: "2026-12-01T10:00:03Z"}},
		{Seq: 5, Time: "bad time", Type: wire.EventNeighbour, Neighbour: &wire.Neighbour{Dir: "/h/.accord/b/runs/2-1", RunID: 2}},
		{Seq: 6, Type: wire.EventDone, Status: &wire.Status{State: wire.StateDone}},
	} {
		b, err := json.Marshal(e)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{"seq":1,"neighbour":null}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, line []byte) {
		d, err := decodeEvent(line)
		if err != nil {
			return
		}
		require.NotEmpty(t, d.event.Level)
		require.NotNil(t, d.event.Seq)
		var ev wire.Event
		require.NoError(t, json.Unmarshal(line, &ev))
		require.Equal(t, ev.Neighbour != nil && ev.Progress == nil && ev.Interim == nil && ev.Result == nil && ev.Status == nil, d.neighbour != nil)
		if d.neighbour != nil {
			require.Equal(t, ev.Neighbour.Dir, d.neighbour.Dir)
			if !ev.Neighbour.SameInstallation {
				require.Zero(t, d.neighbour.RunID, "another installation's run id means nothing here")
			}
			require.False(t, d.neighbour.FirstSeen.IsZero())
		}
	})
}
