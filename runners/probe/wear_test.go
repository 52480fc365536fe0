package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/internal/fakebin"
	"github.com/accordlab/accord/runners/parse"
	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/runners/probe/wire"
)

// fakeNVMeHost is a host with one PCIe NVMe controller (a 3.84 TB
// namespace, seen also through a multipath path) in a fake sysfs, and an
// nvme tool that prints the recorded smart-log before the run and the
// later one after it.
func fakeNVMeHost(t *testing.T) *facts.Runner {
	t.Helper()
	root := t.TempDir()
	put := func(p, v string) {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(v+"\n"), 0o644))
	}
	put("/sys/class/nvme/nvme0/model", "SAMSUNG MZQL23T8HCLS-00A07")
	put("/sys/class/nvme/nvme0/serial", "S64HNE0R901234")
	put("/sys/class/nvme/nvme0/transport", "pcie")
	put("/sys/class/nvme/nvme0/nvme0n1/size", "7501476528")
	put("/sys/class/nvme/nvme0/nvme0c0n1/size", "7501476528")
	bin := t.TempDir()
	data, err := filepath.Abs("facts/testdata")
	require.NoError(t, err)
	marker := filepath.Join(bin, "read-once")
	script := fmt.Sprintf("#!/bin/sh\n[ \"$*\" = \"smart-log /dev/nvme0 -o json\" ] || exit 2\nif [ -e %q ]; then exec cat %q; fi\n: > %q\nexec cat %q\n",
		marker, filepath.Join(data, "nvme-smart-log-2x-after.json"), marker, filepath.Join(data, "nvme-smart-log-2x-before.json"))
	fakebin.Write(t, filepath.Join(bin, "nvme"), script)
	return &facts.Runner{Root: root, LookPath: func(name string) (string, error) {
		if name == "nvme" {
			return filepath.Join(bin, "nvme"), nil
		}
		return "", fmt.Errorf("%s: not found", name)
	}}
}

// TestDriveWearBeforeAndAfter: the smart-log is read before and after
// the run into drive-wear.json with both raw outputs kept, and the
// importer makes the bytes written and the drive writes per day of it.
func TestDriveWearBeforeAndAfter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	w := startDriveWear(ctx, fakeNVMeHost(t), dir)
	w.afterRepetition(ctx, 1)
	msg, err := w.finish()
	require.NoError(t, err)
	require.Equal(t, "drive wear: smart-log of 1 NVMe controllers read before the run and after each repetition", msg)

	b, err := os.ReadFile(filepath.Join(dir, wire.DriveWearFile))
	require.NoError(t, err)
	var wear wire.DriveWear
	require.NoError(t, json.Unmarshal(b, &wear))
	require.Len(t, wear.Drives, 1)
	d := wear.Drives[0]
	require.Equal(t, "nvme0", d.Controller)
	require.Equal(t, "SAMSUNG MZQL23T8HCLS-00A07", d.Model)
	require.Equal(t, int64(7501476528*512), d.CapacityBytes, "the namespace counts once though two paths show it")
	require.Len(t, d.Readings, 2)
	require.Equal(t, 0, d.Readings[0].AfterRepetition)
	require.Equal(t, 1, d.Readings[1].AfterRepetition)
	require.Equal(t, uint64(1474968593), *d.Readings[0].DataUnitsWritten)
	require.Equal(t, uint64(1474968593+39063), *d.Readings[1].DataUnitsWritten)
	require.FileExists(t, filepath.Join(dir, d.Readings[0].Raw))
	require.FileExists(t, filepath.Join(dir, d.Readings[1].Raw))

	ms, _, err := parse.Import(parse.FormatDriveWear, b, parse.Options{Repetition: 1})
	require.NoError(t, err)
	var written float64
	for _, m := range ms {
		if m.Metric == acceptance.MetricDriveBytesWritten {
			written = m.Values[0]
		}
	}
	require.Equal(t, 20_000_256_000.0, written)
}

// A host without NVMe controllers has no drive wear, and says so.
func TestDriveWearWithoutDrives(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := startDriveWear(context.Background(), &facts.Runner{Root: t.TempDir()}, dir)
	w.afterRepetition(context.Background(), 1)
	msg, err := w.finish()
	require.NoError(t, err)
	require.Equal(t, "drive wear: no NVMe controller on this host", msg)
	require.NoFileExists(t, filepath.Join(dir, wire.DriveWearFile))
}
