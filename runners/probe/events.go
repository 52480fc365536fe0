package probe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/accordlab/accord/runners/probe/wire"
)

// eventLog appends events to EventsFile. Each event is one write(2) of one
// complete line on an O_APPEND descriptor, so a follower reading by byte
// offset never sees a torn line and earlier bytes never change.
type eventLog struct {
	mu  sync.Mutex
	f   *os.File
	seq int64
	err error // first write error, reported once at the end
}

func openEventLog(dir string) (*eventLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, wire.EventsFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open events: %w", err)
	}
	seq, err := lastSeq(filepath.Join(dir, wire.EventsFile))
	if err != nil {
		f.Close()
		return nil, err
	}
	return &eventLog{f: f, seq: seq}, nil
}

// lastSeq is the highest seq in an existing events file (0 when empty), so
// that a writer appending after another (stop after a killed probe) keeps
// seq increasing.
func lastSeq(path string) (int64, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read events: %w", err)
	}
	defer f.Close()
	var last int64
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && bytes.HasSuffix(line, []byte("\n")) {
			var e struct {
				Seq int64 `json:"seq"`
			}
			if json.Unmarshal(line, &e) == nil && e.Seq > last {
				last = e.Seq
			}
		}
		if err == io.EOF {
			return last, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read events: %w", err)
		}
	}
}

func (l *eventLog) emit(e wire.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	e.Seq = l.seq
	e.Time = time.Now().Format(time.RFC3339Nano)
	b, err := json.Marshal(e)
	if err != nil {
		b, _ = json.Marshal(wire.Event{Seq: e.Seq, Time: e.Time, Type: wire.EventLog, Level: "error", Message: "event could not be encoded: " + err.Error()})
	}
	if _, err := l.f.Write(append(b, '\n')); err != nil && l.err == nil {
		l.err = fmt.Errorf("append event: %w", err)
	}
}

func (l *eventLog) log(level, format string, a ...any) {
	l.emit(wire.Event{Type: wire.EventLog, Level: level, Message: fmt.Sprintf(format, a...)})
}

func (l *eventLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.f.Sync(); err != nil && l.err == nil {
		l.err = err
	}
	if err := l.f.Close(); err != nil && l.err == nil {
		l.err = err
	}
	return l.err
}

// writeFileAtomic writes a file through a temporary file, fsync and rename,
// so readers see the old file or the whole new one.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'), 0o644)
}

func readStatus(dir string) (*wire.Status, error) {
	b, err := os.ReadFile(filepath.Join(dir, wire.StatusFile))
	if err != nil {
		return nil, err
	}
	var s wire.Status
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse %s: %w", wire.StatusFile, err)
	}
	return &s, nil
}

func nowRFC3339() string { return time.Now().Format(time.RFC3339Nano) }
