package acceptance

import (
	"fmt"
	"math"
	"strings"
)

// Thresholds may be written in any unit of the metric's dimension; values
// are stored in the canonical unit, so thresholds are converted once, here.

// dimension groups units that convert into each other; factor is the size of
// one unit in the dimension's base (nanoseconds, bytes per second, ratio).
type unitDef struct {
	name   string
	dim    string
	factor float64
}

const (
	dimTime      = "time"
	dimBandwidth = "bandwidth"
	dimIOPS      = "iops"
	dimRequests  = "requests"
	dimTokens    = "tokens"
	dimShare     = "share"
	dimEvents    = "events"  // counted events per second
	dimPower     = "power"   // watts
	dimBytes     = "bytes"   // an amount of memory
	dimCPUCost   = "cpucost" // CPU seconds per GiB moved
	dimDWPD      = "dwpd"    // drive writes per day
)

// unitDefs lists the units accepted in thresholds, in the order forms offer
// them within a dimension.
var unitDefs = []unitDef{
	{"ns", dimTime, 1},
	{"us", dimTime, 1e3},
	{"µs", dimTime, 1e3}, // U+00B5 MICRO SIGN
	{"μs", dimTime, 1e3}, // U+03BC GREEK SMALL LETTER MU
	{"ms", dimTime, 1e6},
	{"s", dimTime, 1e9},

	{"B/s", dimBandwidth, 1},
	{"KB/s", dimBandwidth, 1e3},
	{"MB/s", dimBandwidth, 1e6},
	{"GB/s", dimBandwidth, 1e9},
	{"KiB/s", dimBandwidth, 1 << 10},
	{"MiB/s", dimBandwidth, 1 << 20},
	{"GiB/s", dimBandwidth, 1 << 30},

	{"IOPS", dimIOPS, 1},
	{"req/s", dimRequests, 1},
	{"tok/s", dimTokens, 1},

	{"ratio", dimShare, 1},
	{"%", dimShare, 0.01},

	{"/s", dimEvents, 1},
	{"W", dimPower, 1},
	{"B", dimBytes, 1},
	{"KiB", dimBytes, 1 << 10},
	{"MiB", dimBytes, 1 << 20},
	{"GiB", dimBytes, 1 << 30},
	{"s/GiB", dimCPUCost, 1},
	{"DWPD", dimDWPD, 1},
	{"GB", dimBytes, 1e9},
	{"TB", dimBytes, 1e12},
}

func lookupUnit(name string) (unitDef, bool) {
	for _, u := range unitDefs {
		if u.name == name {
			return u, true
		}
	}
	return unitDef{}, false
}

// UnitsFor lists the units a threshold on the metric may be written in,
// the canonical unit first.
func UnitsFor(m Metric) []string {
	canon, ok := lookupUnit(string(m.Unit))
	if !ok {
		return nil
	}
	out := []string{canon.name}
	for _, u := range unitDefs {
		if u.dim == canon.dim && u.name != canon.name {
			out = append(out, u.name)
		}
	}
	return out
}

// ConvertToCanonical converts value in unit into the canonical unit of m.
func ConvertToCanonical(value float64, unit string, m Metric) (float64, error) {
	to, ok := lookupUnit(string(m.Unit))
	if !ok {
		return 0, fmt.Errorf("metric %s has no known canonical unit %q", m.ID, m.Unit)
	}
	from, ok := lookupUnit(unit)
	if !ok {
		return 0, fmt.Errorf("unit %q is unknown; use one of %s", unit, strings.Join(UnitsFor(m), ", "))
	}
	if from.dim != to.dim {
		return 0, fmt.Errorf("unit %q does not measure %s; use one of %s", unit, m.Name, strings.Join(UnitsFor(m), ", "))
	}
	if from.factor == to.factor {
		return value, nil // no rounding when nothing changes
	}
	v := value * from.factor / to.factor
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%g %s is out of range", value, unit)
	}
	return v, nil
}

// CanonicalThreshold returns the criterion's threshold in the unit it is
// compared in: the metric's canonical unit for absolute criteria, percent
// for relative ones.
func CanonicalThreshold(c Criterion) (float64, error) {
	return canonicalValue(c, c.Threshold)
}

// CanonicalStopLoss returns the criterion's stop-loss line converted like
// its threshold; ok is false when the criterion has none.
func CanonicalStopLoss(c Criterion) (value float64, ok bool, err error) {
	if c.StopLoss == nil {
		return 0, false, nil
	}
	v, err := canonicalValue(c, *c.StopLoss)
	if err != nil {
		return 0, true, err
	}
	return v, true, nil
}

func canonicalValue(c Criterion, v float64) (float64, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("criterion %s: %v is not a finite number", c.Name, v)
	}
	m, ok := LookupMetric(c.Metric)
	if !ok {
		return 0, fmt.Errorf("criterion %s: unknown metric %q", c.Name, c.Metric)
	}
	mode := c.Mode
	if mode == "" {
		mode = Absolute
	}
	switch mode {
	case Relative, Isolation, Drift:
		if c.Unit != "%" && c.Unit != "" {
			return 0, fmt.Errorf("criterion %s: a relative threshold is in %%, not %q", c.Name, c.Unit)
		}
		return v, nil
	case Absolute:
		unit := c.Unit
		if unit == "" {
			unit = string(m.Unit)
		}
		out, err := ConvertToCanonical(v, unit, m)
		if err != nil {
			return 0, fmt.Errorf("criterion %s: %w", c.Name, err)
		}
		return out, nil
	}
	return 0, fmt.Errorf("criterion %s: unknown mode %q", c.Name, c.Mode)
}
