package acceptance

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The importers take text from browsers and API clients. Whatever arrives,
// they must not panic, every error must be a located ValidationErrors, and
// anything accepted must be valid and survive export → import with the same
// digest (and the same export).

func profileSeeds(f *testing.F) {
	for _, tmpl := range ProfileTemplates() {
		y, err := ExportProfileYAML(tmpl.Spec)
		require.NoError(f, err)
		f.Add(y)
	}
	p := validProfile()
	y, err := ExportProfileYAML(p)
	require.NoError(f, err)
	f.Add(y)
	f.Add([]byte(profileYAML))
	f.Add([]byte(profileJSON)) // JSON is YAML too
	f.Add([]byte("name: [\n"))
	f.Add([]byte("a: &x 1\nb: *x\n"))
	f.Add([]byte("---\nname: a\n---\nname: b\n"))
	f.Add([]byte("schema_version: 9\n"))
	f.Add([]byte("steps:\n  - {name: a, kind: pause, pause: {duration: 1s}}\n"))
}

func gateSeeds(f *testing.F) {
	for _, tmpl := range GateSetTemplates() {
		y, err := ExportGateSetYAML(tmpl.Spec)
		require.NoError(f, err)
		f.Add(y)
	}
	y, err := ExportGateSetYAML(validGateSet())
	require.NoError(f, err)
	f.Add(y)
	f.Add([]byte(gateSetYAML))
	f.Add([]byte("criteria:\n  - {name: a, metric: ttft, statistic: p99, comparator: <=, threshold: .nan}\n"))
	f.Add([]byte("criteria: [{stop_loss: 1e400}]\n"))
}

// watchdog turns a hang into a crash, which the fuzzer records with its
// input (it has no timeout of its own). An import takes milliseconds.
func watchdog(data []byte) *time.Timer {
	return time.AfterFunc(10*time.Second, func() {
		panic(fmt.Sprintf("import of %d bytes still running after 10s: %q", len(data), data))
	})
}

func requireLocatedErrors(t *testing.T, err error) {
	t.Helper()
	errs, ok := err.(ValidationErrors)
	require.True(t, ok, "error of type %T: %v", err, err)
	require.NotEmpty(t, errs)
	for _, e := range errs {
		require.NotEmpty(t, e.Message)
	}
}

func checkProfileRoundTrip(t *testing.T, p ProfileSpec) {
	t.Helper()
	require.Nil(t, ValidateProfile(p))
	want, err := ProfileDigest(p)
	require.NoError(t, err)
	for _, export := range []func(ProfileSpec) ([]byte, error){ExportProfileYAML, ExportProfileJSON} {
		out, err := export(p)
		require.NoError(t, err)
		var back ProfileSpec
		if out[0] == '{' {
			back, err = ImportProfileJSON(out)
		} else {
			back, err = ImportProfileYAML(out)
		}
		require.NoError(t, err, "re-import of\n%s", out)
		got, err := ProfileDigest(back)
		require.NoError(t, err)
		require.Equal(t, want, got, "export:\n%s", out)
		again, err := export(back)
		require.NoError(t, err)
		require.Equal(t, string(out), string(again))
	}
}

func checkGateSetRoundTrip(t *testing.T, g GateSetSpec) {
	t.Helper()
	require.Nil(t, ValidateGateSet(g))
	want, err := GateSetDigest(g)
	require.NoError(t, err)
	for _, export := range []func(GateSetSpec) ([]byte, error){ExportGateSetYAML, ExportGateSetJSON} {
		out, err := export(g)
		require.NoError(t, err)
		var back GateSetSpec
		if out[0] == '{' {
			back, err = ImportGateSetJSON(out)
		} else {
			back, err = ImportGateSetYAML(out)
		}
		require.NoError(t, err, "re-import of\n%s", out)
		got, err := GateSetDigest(back)
		require.NoError(t, err)
		require.Equal(t, want, got, "export:\n%s", out)
		again, err := export(back)
		require.NoError(t, err)
		require.Equal(t, string(out), string(again))
	}
}

func FuzzImportProfileYAML(f *testing.F) {
	profileSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog(data).Stop()
		p, err := ImportProfileYAML(data)
		if err != nil {
			requireLocatedErrors(t, err)
			return
		}
		checkProfileRoundTrip(t, p)
	})
}

func FuzzImportGateSetYAML(f *testing.F) {
	gateSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog(data).Stop()
		g, err := ImportGateSetYAML(data)
		if err != nil {
			requireLocatedErrors(t, err)
			return
		}
		checkGateSetRoundTrip(t, g)
	})
}

func FuzzImportProfileJSON(f *testing.F) {
	for _, tmpl := range ProfileTemplates() {
		b, err := ExportProfileJSON(tmpl.Spec)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(profileJSON))
	f.Add([]byte(`{"name": "a", "name": "b"}`))
	f.Add([]byte(`{"steps": [{"fio": {"iodepth": 1e3}}]} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog(data).Stop()
		p, err := ImportProfileJSON(data)
		if err != nil {
			requireLocatedErrors(t, err)
			return
		}
		checkProfileRoundTrip(t, p)
	})
}

func FuzzImportGateSetJSON(f *testing.F) {
	for _, tmpl := range GateSetTemplates() {
		b, err := ExportGateSetJSON(tmpl.Spec)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{"criteria": [{"Threshold": 1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog(data).Stop()
		g, err := ImportGateSetJSON(data)
		if err != nil {
			requireLocatedErrors(t, err)
			return
		}
		checkGateSetRoundTrip(t, g)
	})
}

// FuzzSpecTextRoundTrip puts arbitrary text and numbers into the free fields
// of valid specs: whatever validation accepts must export and re-import to
// the same digest (quoting, line breaks, Unicode, number formats).
func FuzzSpecTextRoundTrip(f *testing.F) {
	f.Add("Every step kind", "line one\nline two", "llama", "--flag=a b", "AF-9000", 25.0, 1.5)
	f.Add("yes", "no", "null", "~", "0x10", 1e-7, 1e21)
	f.Add("- x", "# not a comment", "a: b", "'", "\"", -99.5, 0.0)
	f.Add("a\u2028b", "\u0085", "\ufeffx", "\t", " ", 3.0, 1e300)
	f.Fuzz(func(t *testing.T, name, description, model, arg, arrayModel string, threshold, stopLoss float64) {
		defer watchdog([]byte(name + description + model + arg)).Stop()
		p := validProfile()
		p.Name, p.Description, p.Storage.ArrayModel = name, description, arrayModel
		p.Steps[4].Inference.Model = model
		p.Steps[5].Command.Args = append(p.Steps[5].Command.Args, arg)
		if ValidateProfile(p) == nil {
			checkProfileRoundTrip(t, p)
		}
		g := validGateSet()
		g.Name, g.Description = name, description
		g.Criteria[1].Threshold, g.Criteria[1].StopLoss = threshold, &stopLoss
		g.Criteria[0].Help = arg
		if ValidateGateSet(g) == nil {
			checkGateSetRoundTrip(t, g)
		}
	})
}
