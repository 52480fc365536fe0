package probe

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// twoRoleProfile: role a runs "solo" on its own, then both roles run one
// step each in the parallel group g.
func twoRoleProfile() acceptance.ProfileSpec {
	p := planOf(
		sleepStep("solo", 300*time.Millisecond),
		withGroup(sleepStep("pa", 300*time.Millisecond), "g"),
		withGroup(sleepStep("pb", 300*time.Millisecond), "g"),
	).Profile
	p.Roles = []acceptance.RoleSpec{{Name: "a", Steps: []string{"solo", "pa"}}, {Name: "b", Steps: []string{"pb"}}}
	return p
}

func withGroup(s acceptance.StepSpec, g string) acceptance.StepSpec {
	s.Group = g
	return s
}

// waitingAt is the barrier the probe in dir waits at (-1: none).
func waitingAt(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, wire.WaitingFile))
	if err != nil {
		return -1
	}
	var w wire.Barrier
	if json.Unmarshal(b, &w) != nil {
		return -1
	}
	return w.Index
}

func release(t *testing.T, dir string, index int) {
	t.Helper()
	r := probe(t, "release", "--dir", dir, "--barrier", jsonText(index))
	require.Equal(t, 0, r.code, r.stderr)
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

func stepResults(evs []wire.Event) []string {
	var out []string
	for _, e := range eventsOfType(evs, wire.EventStepResult) {
		out = append(out, e.Result.Step)
	}
	return out
}

// Two probes of a multi-host run go through the same barriers: neither
// starts before its release, a host with nothing to do in a phase waits at
// the next barrier, and each runs its own role's steps only.
func TestBarriersHoldEveryHostUntilReleased(t *testing.T) {
	t.Parallel()
	profile := twoRoleProfile()
	plans := map[string]wire.Plan{}
	dirs := map[string]string{}
	for _, role := range []string{"a", "b"} {
		plan := planOf()
		plan.Profile, plan.Role, plan.Host, plan.Sync = profile, role, "host-"+role, true
		plans[role] = plan
		dirs[role] = runDir(t, plan)
		launch(t, "", dirs[role])
	}
	for _, d := range dirs {
		waitFor(t, 30*time.Second, "the start barrier", func() bool { return waitingAt(d) == 0 })
	}
	// Nothing measured before the start: no step has begun on either host.
	for _, d := range dirs {
		require.Empty(t, eventsOfType(events(t, d), wire.EventStepStart))
	}
	release(t, dirs["a"], 0)
	release(t, dirs["b"], 0)
	// b has nothing in the first phase: it waits at barrier 1 while a runs
	// solo, and a joins it there.
	waitFor(t, 30*time.Second, "both at barrier 1", func() bool { return waitingAt(dirs["a"]) == 1 && waitingAt(dirs["b"]) == 1 })
	require.Equal(t, []string{"solo"}, stepResults(events(t, dirs["a"])))
	require.Empty(t, eventsOfType(events(t, dirs["b"]), wire.EventStepStart), "b ran nothing in a's phase")
	// Releasing one host only leaves the other waiting.
	release(t, dirs["a"], 1)
	waitFor(t, 30*time.Second, "a's run", func() bool { _, err := readStatus(dirs["a"]); return err == nil })
	require.Equal(t, 1, waitingAt(dirs["b"]))
	release(t, dirs["b"], 1)
	release(t, dirs["b"], 1) // twice: harmless
	waitFor(t, 30*time.Second, "b's run", func() bool { _, err := readStatus(dirs["b"]); return err == nil })

	require.Equal(t, wire.StateDone, status(t, dirs["a"]).State)
	require.Equal(t, wire.StateDone, status(t, dirs["b"]).State)
	require.Equal(t, []string{"solo", "pa"}, stepResults(events(t, dirs["a"])))
	require.Equal(t, []string{"pb"}, stepResults(events(t, dirs["b"])))
	for _, d := range dirs {
		var seen []string
		for _, e := range eventsOfType(events(t, d), wire.EventBarrier) {
			seen = append(seen, jsonText(e.Barrier.Index)+" "+e.Barrier.State)
		}
		require.Equal(t, []string{"0 waiting", "0 released", "1 waiting", "1 released"}, seen)
	}
}

// A parallel group's steps run at the same time: both start before
// either ends (each takes a second; in turn, one would end first).
func TestParallelGroupStartsItsStepsTogether(t *testing.T) {
	t.Parallel()
	plan := planOf(withGroup(sleepStep("x", time.Second), "g"), withGroup(sleepStep("y", time.Second), "g"), sleepStep("after", 10*time.Millisecond))
	dir := runDir(t, plan)
	r := probe(t, "run", "--dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	var order []string
	for _, e := range events(t, dir) {
		switch e.Type {
		case wire.EventStepStart:
			order = append(order, "start "+e.Progress.StepName)
		case wire.EventStepResult:
			order = append(order, "end "+e.Result.Step)
		}
	}
	require.Len(t, order, 6)
	require.ElementsMatch(t, []string{"start x", "start y"}, order[:2], "both started before either ended: %v", order)
	require.ElementsMatch(t, []string{"end x", "end y"}, order[2:4], "%v", order)
	require.Equal(t, []string{"start after", "end after"}, order[4:])
}

// A step of a group that fails stops the others at once.
func TestParallelGroupStopsAtTheFirstFailure(t *testing.T) {
	t.Parallel()
	bad := acceptance.StepSpec{Name: "bad", Kind: acceptance.StepCommand, Group: "g",
		Command: &acceptance.CommandStep{Program: "false", Format: "text"}}
	plan := planOf(bad, withGroup(sleepStep("long", time.Minute), "g"))
	dir := runDir(t, plan)
	start := time.Now()
	r := probe(t, "run", "--dir", dir)
	require.NotEqual(t, 0, r.code)
	require.Less(t, time.Since(start), 50*time.Second, "the minute-long pause was stopped")
	st := status(t, dir)
	require.Equal(t, wire.StateFailed, st.State)
	require.Contains(t, st.Reason, "false failed")
}
