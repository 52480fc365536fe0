package probe

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

// fileState is what must not change about a file the probe may not write.
type fileState struct {
	sum   [32]byte
	size  int64
	mtime time.Time
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fileState{sum: fileSum(t, path), size: fi.Size(), mtime: fi.ModTime()}
}

// runConfined runs one fio step with the host's places and a shared
// ledger, and returns the run folder and the probe's exit code.
func runConfined(t *testing.T, step acceptance.StepSpec, places []string, ledger string) (string, int) {
	t.Helper()
	plan := planOf(step)
	plan.WritePlaces = places
	plan.CreatedLedger = ledger
	step.Fio.Runtime = acceptance.Duration(time.Second)
	dir := runDir(t, plan)
	return dir, probe(t, "run", "--dir", dir).code
}

// The probe, with real fio, writes only where the host lets it: never to
// an existing file outside its places nor to one it did not create inside
// them (unless that file is declared), never creates or extends a file
// outside them, follows no symbolic link out of them, and checks the free
// space first. Files it created may be written by later runs.
func TestProbeWritesOnlyWhereTheHostLetsIt(t *testing.T) {
	t.Parallel()
	needBinary(t)
	outside := t.TempDir()
	scratch := t.TempDir()
	ledger := filepath.Join(t.TempDir(), "created-files.jsonl")
	places := []string{scratch}

	victim := filepath.Join(outside, "notes.txt")
	require.NoError(t, os.WriteFile(victim, []byte("the customer's notes, not to be overwritten\n"), 0o644))
	inScratch := filepath.Join(scratch, "dataset.bin")
	require.NoError(t, os.WriteFile(inScratch, make([]byte, 8<<20), 0o644))
	link := filepath.Join(scratch, "link.dat")
	require.NoError(t, os.Symlink(victim, link))
	before, beforeScratch := stateOf(t, victim), stateOf(t, inScratch)

	refused := []struct {
		name, target, rw, reason string
	}{
		{"write-outside", victim, "write", "refusing to write to " + victim + ": it is outside the places this host lets tests write (" + scratch + ")"},
		{"extend-outside", victim, "randread", "refusing to extend (lay out) " + victim},
		{"create-outside", filepath.Join(outside, "new.dat"), "randread", "refusing to create " + filepath.Join(outside, "new.dat")},
		{"not-ours-inside", inScratch, "randwrite", "the file existed before and was not created by Accord's probe"},
		{"symlink-out", link, "write", "refusing to write to " + link + ": it is outside the places"},
	}
	for _, c := range refused {
		dir, code := runConfined(t, fioStep(c.name, c.target, c.rw), places, ledger)
		require.Equal(t, ExitFailed, code, c.name)
		st := status(t, dir)
		require.Contains(t, st.Reason, c.reason, c.name)
		require.NoFileExists(t, filepath.Join(dir, "out", "01-"+c.name, "rep-1", wire.FioOutputFile), "%s: fio never ran", c.name)
	}
	require.Equal(t, before, stateOf(t, victim), "the file outside survives untouched")
	require.Equal(t, beforeScratch, stateOf(t, inScratch), "the file the probe did not create survives untouched")
	require.NoFileExists(t, filepath.Join(outside, "new.dat"))

	// Reading an existing file, large enough, is allowed anywhere.
	_, code := runConfined(t, fioStep("read-inside-size", inScratch, "randread"), nil, ledger)
	require.Equal(t, 0, code)
	require.Equal(t, beforeScratch, stateOf(t, inScratch))

	// Declared by its own path, the file may be written.
	_, code = runConfined(t, fioStep("declared", inScratch, "randwrite"), []string{scratch, inScratch}, ledger)
	require.Equal(t, 0, code)
	require.NotEqual(t, beforeScratch.sum, fileSum(t, inScratch))

	// A new file in the scratch folder is created and recorded; a later
	// run may write it again, but not once it was replaced by another file.
	fresh := filepath.Join(scratch, "fio.dat")
	_, code = runConfined(t, fioStep("create", fresh, "randread"), places, ledger)
	require.Equal(t, 0, code)
	require.FileExists(t, fresh)
	_, code = runConfined(t, fioStep("rewrite-ours", fresh, "randwrite"), places, ledger)
	require.Equal(t, 0, code, "the probe's own file")
	require.NoError(t, os.Remove(fresh))
	require.NoError(t, os.WriteFile(fresh, make([]byte, 8<<20), 0o644))
	dir, code := runConfined(t, fioStep("replaced", fresh, "randwrite"), places, ledger)
	require.Equal(t, ExitFailed, code)
	require.Contains(t, status(t, dir).Reason, "was not created by Accord's probe")

	// Free space is checked before a file is laid out.
	huge := fioStep("huge", filepath.Join(scratch, "huge.dat"), "randread")
	huge.Fio.Size = 1 << 50
	dir, code = runConfined(t, huge, places, ledger)
	require.Equal(t, ExitFailed, code)
	require.Contains(t, status(t, dir).Reason, "refusing to lay out 1048576.0 GiB of fio's file in "+scratch+": only")
	require.NoFileExists(t, filepath.Join(scratch, "huge.dat"))
}

// System locations are refused on the host whatever the host declares,
// once the probe resolved the links: a scratch folder that is a link to
// /etc, a place declared before such places were refused (/etc itself),
// a target through /proc/self/root; and a character device is never written.
// (Each target is a new file's name, so that a failure of this test would
// leave a stray file, removed at cleanup, not a changed one.)
func TestProbeNeverWritesSystemLocations(t *testing.T) {
	t.Parallel()
	needBinary(t)
	scratch := t.TempDir()
	ledger := filepath.Join(t.TempDir(), "created-files.jsonl")
	etcLink := filepath.Join(scratch, "etc-link")
	require.NoError(t, os.Symlink("/etc", etcLink))
	name := "accord-probe-test-" + filepath.Base(scratch) + ".dat"
	t.Cleanup(func() { _ = os.Remove(filepath.Join("/etc", name)) })

	for _, c := range []struct {
		name, target, rw string
		places           []string
		reason           string
	}{
		{"through-a-linked-scratch-folder", filepath.Join(etcLink, name), "randread", []string{scratch},
			"refusing to lay out " + filepath.Join(etcLink, name) + " (/etc/" + name + " once its links are resolved): /etc/" + name + " is under /etc, a system location, where tests never write"},
		{"declared-etc", filepath.Join("/etc", name), "write", []string{"/etc"},
			"refusing to write to /etc/" + name + ": /etc/" + name + " is under /etc, a system location"},
		// /proc/self/root: /proc/1/root is the same for a probe allowed to
		// read PID 1's links, which this test's container may not be.
		{"through-proc-self-root", filepath.Join("/proc/self/root/etc", name), "write", []string{"/proc/self/root/etc"},
			"(/etc/" + name + " once its links are resolved): /etc/" + name + " is under /etc, a system location"},
		{"char-device", "/dev/null", "write", []string{"/dev/null"}, "refusing to write to /dev/null: /dev/null is a system device"},
	} {
		step := fioStep(c.name, c.target, c.rw)
		step.Fio.Destructive = c.target == "/dev/null"
		dir, code := runConfined(t, step, c.places, ledger)
		require.Equal(t, ExitFailed, code, c.name)
		require.Contains(t, status(t, dir).Reason, c.reason, c.name)
		require.NoFileExists(t, filepath.Join(dir, "out", "01-"+c.name, "rep-1", wire.FioOutputFile), "%s: fio never ran", c.name)
	}
	require.NoFileExists(t, filepath.Join("/etc", name))
}
