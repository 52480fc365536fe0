package acceptance

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as text ("90s", "2h", "250ms") in
// YAML and JSON, so that specs stay readable and hash the same everywhere.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string {
	if d == 0 {
		return "0s"
	}
	return time.Duration(d).String()
}

// ParseDuration accepts Go duration syntax ("1h30m", "250ms").
func ParseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (use forms like 30s, 5m, 1h30m)", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return Duration(v), nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // the encoding/json convention: null leaves the value alone
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"30s\"")
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: duration must be a string like 30s", n.Line)
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}

// ByteSize is a size in bytes written with binary or decimal suffixes
// ("4KiB", "1MiB", "10GB", "512").
type ByteSize int64

var byteSuffixes = []struct {
	suffix string
	factor int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000},
	{"k", 1 << 10}, {"K", 1 << 10}, {"m", 1 << 20}, {"M", 1 << 20}, {"g", 1 << 30}, {"G", 1 << 30},
	{"B", 1},
}

// ParseByteSize parses "4KiB", "1M" (fio's binary meaning) or a plain number of bytes.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	factor := int64(1)
	for _, suf := range byteSuffixes {
		if strings.HasSuffix(t, suf.suffix) {
			factor = suf.factor
			t = strings.TrimSpace(strings.TrimSuffix(t, suf.suffix))
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (use forms like 4KiB, 1MiB, 10GiB)", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	if n > (1<<62)/factor {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return ByteSize(n * factor), nil
}

// String writes the size with the largest binary suffix that divides it.
func (b ByteSize) String() string {
	v := int64(b)
	for _, u := range []struct {
		s string
		f int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v != 0 && v%u.f == 0 {
			return strconv.FormatInt(v/u.f, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}

func (b ByteSize) MarshalJSON() ([]byte, error) { return json.Marshal(b.String()) }

func (b *ByteSize) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil // the encoding/json convention: null leaves the value alone
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(data, &n); err2 != nil {
			return fmt.Errorf("size must be a string like \"4KiB\" or a number of bytes")
		}
		s = strconv.FormatInt(n, 10)
	}
	v, err := ParseByteSize(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: size must be a scalar like 4KiB", n.Line)
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}
