package probe

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/wire"
)

// runFolder writes a plan into PARENT/INSTALL/runs/ID-1, the layout the
// server uses on lab hosts.
func runFolder(t *testing.T, parent, install string, runID int64, plan wire.Plan) string {
	t.Helper()
	dir := filepath.Join(parent, install, "runs", itoaTest(runID)+"-1")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	plan.RunID = runID
	b, err := json.Marshal(plan)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, wire.PlanFile), b, 0o644))
	return dir
}

func itoaTest(n int64) string { b, _ := json.Marshal(n); return string(b) }

func readNeighbours(t *testing.T, dir string) wire.Neighbours {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, wire.NeighboursFile))
	require.NoError(t, err)
	var n wire.Neighbours
	require.NoError(t, json.Unmarshal(raw, &n))
	return n
}

// Probes on one host: a long one; a short one of the same installation
// and one of another installation, started while the long one measures;
// and a late one, started after all had ended. Each records the others it
// saw active: the short and the foreign ones see the long one at their
// start (and each other), the long one sees both while they run, the late
// one sees nobody;
// finished and never-launched folders are not counted.
func TestProbeRecordsOtherRunsActiveOnTheHost(t *testing.T) {
	t.Parallel()
	needBinary(t)
	parent := t.TempDir()
	long := runFolder(t, parent, "install-a", 1, planOf(sleepStep("wait", 8*time.Second)))
	short := runFolder(t, parent, "install-a", 2, planOf(sleepStep("wait", 3*time.Second)))
	// (A run shorter than the watch's interval may be missed by the runs it
	// overlapped, while it sees them at its own start: the server marks
	// both sides from either side's record.)
	foreign := runFolder(t, parent, "install-b", 2, planOf(sleepStep("wait", 3*time.Second)))
	late := runFolder(t, parent, "install-b", 7, planOf(sleepStep("wait", time.Second)))
	runFolder(t, parent, "install-b", 8, planOf(sleepStep("wait", time.Second))) // never launched

	launch(t, "", long)
	waitFor(t, 60*time.Second, "the long run's step", func() bool { return hasEvent(long, wire.EventStepStart) })
	launch(t, "", short)
	launch(t, "", foreign)
	waitFor(t, 60*time.Second, "the short run to end", func() bool { _, err := os.Stat(filepath.Join(short, wire.StatusFile)); return err == nil })
	waitFor(t, 60*time.Second, "the foreign run to end", func() bool { _, err := os.Stat(filepath.Join(foreign, wire.StatusFile)); return err == nil })
	waitFor(t, 60*time.Second, "the long run to end", func() bool { _, err := os.Stat(filepath.Join(long, wire.StatusFile)); return err == nil })
	launch(t, "", late)
	waitFor(t, 60*time.Second, "the late run to end", func() bool { _, err := os.Stat(filepath.Join(late, wire.StatusFile)); return err == nil })

	// The short and the foreign runs overlapped each other too.
	for dir, others := range map[string][]string{short: {long, foreign}, foreign: {long, short}} {
		saw := readNeighbours(t, dir)
		require.GreaterOrEqual(t, saw.Checks, 2, "at its start and its end at least")
		require.Equal(t, filepath.Join(parent, "*", "runs", "*"), saw.Scope)
		byDir := map[string]wire.Neighbour{}
		for _, n := range saw.Seen {
			byDir[n.Dir] = n
		}
		require.Len(t, byDir, 2, "%s saw the two others", dir)
		for _, o := range others {
			require.Contains(t, byDir, o)
			same := filepath.Dir(filepath.Dir(o)) == filepath.Dir(filepath.Dir(dir))
			require.Equal(t, same, byDir[o].SameInstallation, "%s seen from %s", o, dir)
		}
		require.EqualValues(t, 1, byDir[long].RunID)
	}
	sawBoth := readNeighbours(t, long)
	require.Len(t, sawBoth.Seen, 2, "the long run saw both while they ran")
	require.Equal(t, short, sawBoth.Seen[0].Dir)
	require.True(t, sawBoth.Seen[0].SameInstallation)
	require.Equal(t, foreign, sawBoth.Seen[1].Dir)
	require.False(t, sawBoth.Seen[1].SameInstallation)

	require.Empty(t, readNeighbours(t, late).Seen, "nothing else was active when the late run measured")

	// The sightings are in the event stream too, once each.
	got := eventsOfType(events(t, long), wire.EventNeighbour)
	require.Len(t, got, 2)
	require.Equal(t, "warn", got[0].Level)
	msgs := got[0].Message + " | " + got[1].Message
	require.Contains(t, msgs, short+" (run #2 of this installation)")
	require.Contains(t, msgs, foreign+"; the measurements of both are contaminated")
}
