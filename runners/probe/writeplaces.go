package probe

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/accordlab/accord/acceptance"
)

// A fio step writes when its rw writes, and also when fio must lay its
// file out: the file is new, or shorter than the step's size. The probe
// lets a step write only inside the places the host declares
// (the plan's WritePlaces), never creates a file elsewhere, and never
// writes to an existing file it did not create unless that file itself is
// declared. Files it creates are recorded in a ledger so that later runs
// may write them again. Before laying a file out it checks the free space.

// fioTarget is a fio step's target as the probe checked it: the path fio
// is given (symbolic links resolved, so that fio opens what was checked),
// and whether it is a file of the probe's own (recorded again after fio
// wrote it: see createdLedger).
type fioTarget struct {
	path string
	ours bool
}

// prepareFioTarget checks the step's target against the host's places and
// creates the file when it is new and allowed.
func (r *runner) prepareFioTarget(f *acceptance.FioStep) (fioTarget, error) {
	places := resolvePlaces(r.plan.WritePlaces)
	resolved, fi, err := resolveTarget(f.Target)
	if err != nil {
		return fioTarget{}, err
	}
	writes := fioWriteMode[f.RW]
	// A system location is refused whatever the host declares, after the
	// links are resolved: a scratch folder that is a link to /etc, or a
	// target through /proc/1/root, ends up there.
	if mayWrite := fi == nil || writes || (fi.Mode().IsRegular() && fi.Size() < int64(f.Size)); mayWrite {
		if why := acceptance.SystemLocation(resolved); why != "" {
			what := "write to"
			if !writes {
				what = "lay out"
			}
			target := f.Target
			if resolved != filepath.Clean(f.Target) {
				target += " (" + resolved + " once its links are resolved)"
			}
			return fioTarget{}, fmt.Errorf("refusing to %s %s: %s, where tests never write, whatever the host declares", what, target, why)
		}
	}
	switch {
	case fi == nil: // a new file: fio would create and lay it out
		if !places.Covers(resolved) {
			return fioTarget{}, fmt.Errorf("refusing to create %s: fio would lay out a new file there, outside the places this host lets tests write (%s)", f.Target, places)
		}
		if err := checkFreeSpace(filepath.Dir(resolved), int64(f.Size)); err != nil {
			return fioTarget{}, err
		}
		if err := r.ledger().create(resolved); err != nil {
			return fioTarget{}, err
		}
		return fioTarget{path: resolved, ours: true}, nil
	case fi.Mode()&os.ModeDevice != 0:
		if err := refuseDeviceWrite(f.Target, fi.Mode(), f.RW, f.Destructive, r.plan.AllowDestructive); err != nil {
			return fioTarget{}, err
		}
		if writes && fi.Mode()&os.ModeCharDevice != 0 {
			return fioTarget{}, fmt.Errorf("refusing to write to device %s: it is a character device, not a block device", f.Target)
		}
		if writes && !places.Declares(resolved) {
			return fioTarget{}, fmt.Errorf("refusing to write to device %s: the host does not declare it among the places tests may write (%s)", f.Target, places)
		}
	case fi.Mode().IsRegular():
		ours := r.ledger().created(resolved, fi)
		extends := fi.Size() < int64(f.Size)
		if !writes && !extends {
			return fioTarget{path: resolved, ours: ours}, nil // reading a file that exists: allowed anywhere
		}
		what := "write to"
		if !writes {
			what = "extend (lay out)"
		}
		switch {
		case places.Declares(resolved):
		case places.Covers(resolved) && ours:
		case places.Covers(resolved):
			return fioTarget{}, fmt.Errorf("refusing to %s %s: the file existed before and was not created by Accord's probe; declare the file itself among the host's places to let tests write it", what, f.Target)
		default:
			return fioTarget{}, fmt.Errorf("refusing to %s %s: it is outside the places this host lets tests write (%s)", what, f.Target, places)
		}
		if extends {
			if err := checkFreeSpace(filepath.Dir(resolved), int64(f.Size)-fi.Size()); err != nil {
				return fioTarget{}, err
			}
		}
		return fioTarget{path: resolved, ours: ours}, nil
	default:
		return fioTarget{}, fmt.Errorf("refusing fio target %s: not a regular file or a device (%s)", f.Target, fi.Mode().Type())
	}
	return fioTarget{path: resolved}, nil
}

// done records the probe's own file as fio left it.
func (r *runner) fioTargetDone(t fioTarget) error {
	if !t.ours {
		return nil
	}
	return r.ledger().record(t.path)
}

// resolvePlaces resolves the symbolic links of the places that exist, so
// that they compare with resolved targets.
func resolvePlaces(places []string) acceptance.WritePlaces {
	out := make(acceptance.WritePlaces, 0, len(places))
	for _, p := range places {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		out = append(out, filepath.Clean(p))
	}
	return out
}

// resolveTarget resolves the target's symbolic links; fi is nil when it
// does not exist (its folder must).
func resolveTarget(target string) (string, os.FileInfo, error) {
	real, err := filepath.EvalSymlinks(target)
	if err == nil {
		fi, err := os.Stat(real)
		if err != nil {
			return "", nil, fmt.Errorf("fio target: %w", err)
		}
		return real, fi, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("fio target: %w", err)
	}
	if _, lerr := os.Lstat(target); lerr == nil {
		return "", nil, fmt.Errorf("refusing fio target %s: a symbolic link to nothing", target)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(target))
	if err != nil {
		return "", nil, fmt.Errorf("fio target: the folder of %s: %w", target, err)
	}
	return filepath.Join(dir, filepath.Base(target)), nil, nil
}

// checkFreeSpace refuses to lay out need bytes in dir's file system when
// fewer are free (for an unprivileged user).
func checkFreeSpace(dir string, need int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if need > free {
		return fmt.Errorf("refusing to lay out %s of fio's file in %s: only %s are free", gib(need), dir, gib(free))
	}
	return nil
}

func gib(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// ledger is the record of files the probe created.
func (r *runner) ledger() createdLedger {
	p := r.plan.CreatedLedger
	switch {
	case p == "":
		p = filepath.Join(r.dir, "created-files.jsonl")
	case !filepath.IsAbs(p):
		p = filepath.Join(r.dir, p)
	}
	return createdLedger{path: p}
}

// createdLedger is a JSON-lines file of the files the probe created, by
// path and identity as the probe last left them (device, inode, size and
// modification time, recorded again after each step that ran on them):
// a file later put in the same place by someone else, even on a reused
// inode, is not taken for ours. The last line of a path counts.
type createdLedger struct{ path string }

type ledgerEntry struct {
	Path    string `json:"path"`
	Dev     uint64 `json:"dev"`
	Inode   uint64 `json:"inode"`
	Size    int64  `json:"size"`
	MTimeNs int64  `json:"mtime_ns"`
}

func entryOf(path string, fi os.FileInfo) ledgerEntry {
	dev, ino := identity(fi)
	return ledgerEntry{Path: path, Dev: dev, Inode: ino, Size: fi.Size(), MTimeNs: fi.ModTime().UnixNano()}
}

// create makes the new file (it must not exist) and records it.
func (l createdLedger) create(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create fio target: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create fio target: %w", err)
	}
	return l.record(path)
}

// record notes the file as the probe leaves it.
func (l createdLedger) record(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("record created file: %w", err)
	}
	line, err := json.Marshal(entryOf(path, fi))
	if err != nil {
		return err
	}
	lf, err := os.OpenFile(l.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("record created file: %w", err)
	}
	if _, err := lf.Write(append(line, '\n')); err != nil {
		_ = lf.Close()
		return fmt.Errorf("record created file: %w", err)
	}
	return lf.Close()
}

// created reports whether the ledger holds this very file.
func (l createdLedger) created(path string, fi os.FileInfo) bool {
	f, err := os.Open(l.path)
	if err != nil {
		return false
	}
	defer f.Close()
	var last *ledgerEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e ledgerEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Path == path {
			last = &e
		}
	}
	return last != nil && *last == entryOf(path, fi)
}

func identity(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino
	}
	return 0, 0
}
