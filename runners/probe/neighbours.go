package probe

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/accordlab/accord/runners/probe/wire"
)

// neighbourEvery is how often the probe looks for other Accord runs
// active on the host while it runs (also once at its start and once at its
// end).
const neighbourEvery = 2 * time.Second

// neighbourWatch looks, while the run lasts, for other Accord runs active
// on the host: run folders beside this one (BASE/runs/*, and the runs of
// other installations under the same parent, PARENT/*/runs/*) whose probe
// was launched, has written no status and still has processes. Each is
// reported once as an event, and all of them in NeighboursFile. Looking
// is cheap (a glob, a stat per folder, /proc for the unfinished ones) and
// needs no privilege: the folders are the login's own.
type neighbourWatch struct {
	dir   string // this run's folder
	base  string // this installation's base folder (BASE)
	scope string // glob of the run folders looked at
	ev    *eventLog
	// runID is this run's (from its launch record; 0 when run without a
	// launch): a multi-host run's other hosts' folders, on a host they
	// share, are this run, not neighbours.
	runID int64

	mu   sync.Mutex
	file wire.Neighbours
	seen map[string]*wire.Neighbour

	stopOnce sync.Once
	done     chan struct{}
	stopped  chan struct{}
}

// startNeighbourWatch looks once at once, then every neighbourEvery until
// stop.
func startNeighbourWatch(dir string, ev *eventLog) *neighbourWatch {
	base := filepath.Dir(filepath.Dir(dir))
	w := &neighbourWatch{
		dir: dir, base: base, scope: filepath.Join(filepath.Dir(base), "*", "runs", "*"), ev: ev,
		seen: map[string]*wire.Neighbour{}, done: make(chan struct{}), stopped: make(chan struct{}),
	}
	if l, err := readLaunch(dir); err == nil {
		w.runID = l.RunID
	}
	w.file = wire.Neighbours{Scope: w.scope, IntervalSec: neighbourEvery.Seconds(), Seen: []wire.Neighbour{}}
	w.check(false)
	go func() {
		defer close(w.stopped)
		t := time.NewTicker(neighbourEvery)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
				w.check(false)
			}
		}
	}()
	return w
}

// stop looks a last time and writes NeighboursFile.
func (w *neighbourWatch) stop() {
	w.stopOnce.Do(func() {
		close(w.done)
		<-w.stopped
		w.check(true)
	})
}

// check looks for active neighbours now, reports the new ones and
// rewrites NeighboursFile while there are any, and at the first and the
// final check.
func (w *neighbourWatch) check(final bool) {
	now := nowRFC3339()
	active := activeRunFolders(w.scope, w.dir, w.base, w.runID)
	w.mu.Lock()
	defer w.mu.Unlock()
	first := w.file.Checks == 0
	w.file.Checks++
	if first {
		w.file.FirstCheck = now
	}
	w.file.LastCheck = now
	var fresh []wire.Neighbour
	for _, a := range active {
		n, ok := w.seen[a.Dir]
		if !ok {
			a.SameInstallation = filepath.Dir(filepath.Dir(a.Dir)) == w.base
			a.FirstSeen = now
			n = &a
			w.seen[a.Dir] = n
			fresh = append(fresh, *n)
		}
		n.LastSeen = now
	}
	for _, n := range fresh {
		msg := "another Accord run is active on this host: " + n.Dir
		if n.SameInstallation && n.RunID > 0 {
			msg += " (run #" + strconv.FormatInt(n.RunID, 10) + " of this installation)"
		}
		w.ev.emit(wire.Event{Type: wire.EventNeighbour, Level: "warn", Message: msg + "; the measurements of both are contaminated", Neighbour: &n})
	}
	w.file.Seen = w.file.Seen[:0]
	for _, n := range w.seen {
		w.file.Seen = append(w.file.Seen, *n)
	}
	sort.Slice(w.file.Seen, func(i, j int) bool { return w.file.Seen[i].Dir < w.file.Seen[j].Dir })
	if first || final || len(active) > 0 {
		if err := writeJSONAtomic(filepath.Join(w.dir, wire.NeighboursFile), w.file); err != nil {
			w.ev.log("warn", "neighbours: write %s: %v", wire.NeighboursFile, err)
		}
	}
}

// activeRunFolders lists the run folders matching scope, other than self
// and other folders of run runID of this installation (base), whose probe
// was launched, has not written its status and still has a process alive.
func activeRunFolders(scope, self, base string, runID int64) []wire.Neighbour {
	dirs, err := filepath.Glob(scope)
	if err != nil {
		return nil
	}
	var out []wire.Neighbour
	for _, d := range dirs {
		if d == self {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, wire.StatusFile)); !errors.Is(err, fs.ErrNotExist) {
			continue // finished (or unreadable: not ours to judge)
		}
		l, err := readLaunch(d)
		// A probe gone whose fault guardian still holds its fault (it
		// removes it once the probe is gone) is active all the same.
		if err != nil || l.StoppedBeforeLaunch || (!l.running() && len(guardianProcesses(d)) == 0) {
			continue
		}
		if runID > 0 && l.RunID == runID && filepath.Dir(filepath.Dir(d)) == base {
			continue // another host's folder of this same multi-host run
		}
		out = append(out, wire.Neighbour{Dir: d, RunID: l.RunID, Attempt: l.Attempt, PID: l.PID})
	}
	return out
}
