package acceptance

import (
	"testing"

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
		g, err := ImportGateSetJSON(data)
		if err != nil {
			requireLocatedErrors(t, err)
			return
		}
		checkGateSetRoundTrip(t, g)
	})
}
