package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/accordlab/accord/runners/probe/wire"
)

// barrierPoll is how often a waiting probe looks for its release: the
// spread of a release over the hosts is the server's fan-out plus this.
const barrierPoll = 10 * time.Millisecond

// barrier waits at the next barrier of a multi-host run until the server
// releases it (wire.Barrier). The release is a file the server writes on
// every host, not a start time: each host starts when it sees the file,
// so a host whose clock is off starts with the others all the same; the
// hosts' starts differ by the server's fan-out of the writes (measured,
// and said in the run's log) and the poll interval, never by their
// clocks' offsets. Waiting ends with the run's context (its time limit, a
// stop).
func (r *runner) barrier(ctx context.Context, label string) error {
	b := wire.Barrier{Index: r.nextBarrier, Label: label, State: wire.BarrierWaiting}
	r.nextBarrier++
	if err := os.MkdirAll(filepath.Join(r.dir, wire.SyncDir), 0o755); err != nil {
		return fmt.Errorf("barrier %d: %w", b.Index, err)
	}
	if err := writeJSONAtomic(filepath.Join(r.dir, wire.WaitingFile), b); err != nil {
		return fmt.Errorf("barrier %d: %w", b.Index, err)
	}
	r.ev.emit(wire.Event{Type: wire.EventBarrier, Barrier: &b, Message: fmt.Sprintf("waiting at barrier %d (%s) for the other hosts", b.Index, label)})
	release := filepath.Join(r.dir, filepath.FromSlash(wire.ReleaseFile(b.Index)))
	start := time.Now()
	t := time.NewTicker(barrierPoll)
	defer t.Stop()
	for {
		if _, err := os.Stat(release); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("barrier %d: %w", b.Index, err)
		}
		select {
		case <-ctx.Done():
			return causeOf(ctx, fmt.Errorf("barrier %d (%s): %w", b.Index, label, ctx.Err()))
		case <-t.C:
		}
	}
	_ = os.Remove(filepath.Join(r.dir, wire.WaitingFile))
	b.State, b.WaitedSec = wire.BarrierReleased, time.Since(start).Seconds()
	r.ev.emit(wire.Event{Type: wire.EventBarrier, Barrier: &b, Message: fmt.Sprintf("released from barrier %d after %.3f s", b.Index, b.WaitedSec)})
	return nil
}

// cmdRelease releases a barrier of the run in DIR: it writes the barrier's
// release file (atomically; once there, writing it again changes nothing).
func cmdRelease(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := newFlags("release", stderr)
	dirFlag := fl.String("dir", "", "run folder")
	index := fl.Int("barrier", -1, "barrier number")
	if err := parseFlags(fl, args); err != nil {
		return usageError(stderr, err)
	}
	dir, err := absDir(*dirFlag)
	if err != nil {
		return usageError(stderr, err)
	}
	if *index < 0 {
		return fail(stderr, ExitUsage, "release: --barrier N is required (N ≥ 0)")
	}
	if _, err := readLaunch(dir); err != nil {
		return fail(stderr, ExitError, "release: no probe was launched in %s: %v", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, wire.SyncDir), 0o755); err != nil {
		return fail(stderr, ExitError, "release: %v", err)
	}
	path := filepath.Join(dir, filepath.FromSlash(wire.ReleaseFile(*index)))
	if _, err := os.Stat(path); err != nil {
		if err := writeFileAtomic(path, []byte(nowRFC3339()+"\n"), 0o644); err != nil {
			return fail(stderr, ExitError, "release: %v", err)
		}
	}
	if err := printJSON(stdout, map[string]int{"released": *index}); err != nil {
		return ExitError
	}
	return ExitOK
}
