package parse

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/wire"
)

func u(v uint64) *uint64 { return &v }
func n(v int64) *int64   { return &v }

// One hour of a run writing 1/24 of a 1 TB drive is exactly one drive
// write per day; what cannot give a wear figure says why.
func TestImportDriveWear(t *testing.T) {
	t.Parallel()
	const capacity = 1_000_000_000_000
	units := uint64(capacity / 24 / 512000) // 81380 units: 41,666,560,000 bytes
	rd := func(rep int, at string, units uint64) wire.SmartReading {
		return wire.SmartReading{AfterRepetition: rep, At: at, DataUnitsWritten: u(units), PercentUsed: n(3)}
	}
	w := wire.DriveWear{Drives: []wire.DriveWearDrive{
		{Controller: "nvme0", Transport: "pcie", CapacityBytes: capacity, Readings: []wire.SmartReading{
			rd(0, "2026-12-01T10:00:00Z", 1_000_000), rd(1, "2026-12-01T11:00:00Z", 1_000_000+units), rd(2, "2026-12-01T13:00:00Z", 1_000_000+2*units)}},
		{Controller: "nvme1", Transport: "tcp", Readings: []wire.SmartReading{rd(0, "2026-12-01T10:00:00Z", 5), rd(1, "2026-12-01T11:00:00Z", 5)}},
		{Controller: "nvme2", Readings: []wire.SmartReading{rd(0, "2026-12-01T10:00:00Z", 9), rd(1, "2026-12-01T11:00:00Z", 8)}},
		{Controller: "nvme3", Readings: []wire.SmartReading{{At: "2026-12-01T10:00:00Z", Error: "nvme-cli is not installed"}, {AfterRepetition: 1, At: "2026-12-01T11:00:00Z", Error: "nvme-cli is not installed"}}},
	}}
	b, err := json.Marshal(w)
	require.NoError(t, err)
	ms, warns, err := Import(FormatDriveWear, b, Options{Repetition: 1})
	require.NoError(t, err)
	got := map[string]acceptance.Measurement{}
	for _, m := range ms {
		require.Empty(t, m.Step, "the whole repetition, not a step")
		got[fmt.Sprintf("%s/%s/%d", m.Metric, m.Level, m.Repetition)] = m
	}
	require.Len(t, got, 5)
	written := got[acceptance.MetricDriveBytesWritten+"/nvme0/1"]
	require.Equal(t, []float64{float64(units) * 512000}, written.Values)
	require.Contains(t, written.Source.Field, "nvme0 data_units_written 1000000 → 1081380 over 3600 s, percent_used 3% → 3%")
	require.InDelta(t, float64(units)*512000/capacity*24, got[acceptance.MetricDriveWritesPerDay+"/nvme0/1"].Values[0], 1e-12)
	require.InDelta(t, 1.0, got[acceptance.MetricDriveWritesPerDay+"/nvme0/1"].Values[0], 1e-5)
	require.InDelta(t, 0.5, got[acceptance.MetricDriveWritesPerDay+"/nvme0/2"].Values[0], 1e-5, "the same bytes over two hours")
	require.Equal(t, []float64{0}, got[acceptance.MetricDriveBytesWritten+"/nvme1/1"].Values)
	require.Contains(t, warns, "drive nvme1: no namespace size in sysfs: no drive writes per day")
	require.Contains(t, warns, "drive nvme1 is an NVMe-oF (tcp) controller: its smart-log is the target's, which other hosts may be writing too")
	require.Contains(t, warns, "drive wear of nvme2 in repetition 1 not measured: data_units_written went down (9 → 8): another drive, or its log was reset")
	require.Contains(t, warns, "drive wear of nvme3 in repetition 1 not measured: the reading before it: nvme-cli is not installed")

	_, _, err = Import(FormatDriveWear, []byte(`{"drives":[{"before":{}}]}`), Options{})
	require.ErrorContains(t, err, "drives[0].controller: missing")
}

func FuzzImportDriveWear(f *testing.F) {
	f.Add([]byte(`{"drives":[{"controller":"nvme0","capacity_bytes":1000,"readings":[{"at":"2026-12-01T10:00:00Z","data_units_written":1},{"after_repetition":1,"at":"2026-12-01T10:00:01Z","data_units_written":2}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, _, err := Import(FormatDriveWear, b, Options{})
		if err != nil {
			return
		}
		for _, m := range ms {
			for _, v := range m.Values {
				if v < 0 || v != v {
					t.Fatalf("%s: %v", m.Metric, v)
				}
			}
		}
	})
}
