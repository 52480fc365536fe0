package acceptance

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const profileJSON = `{
  "name": "KV lookups",
  "purpose": "storage-microbenchmark",
  "storage": {"transport": "nvmeof-tcp"},
  "warmup": "10s",
  "steps": [
    {
      "name": "randread",
      "kind": "fio",
      "fio": {
        "rw": "randread",
        "block_size": "4KiB",
        "iodepth": 32,
        "size": 10737418240,
        "runtime": "1m",
        "direct": true,
        "target": "/mnt/nvme/accord.dat"
      }
    }
  ]
}
`

func TestImportProfileJSON(t *testing.T) {
	t.Parallel()
	p, err := ImportProfileJSON([]byte(profileJSON))
	require.NoError(t, err)
	fromYAML, err := ImportProfileYAML([]byte(profileYAML))
	require.NoError(t, err)
	require.Equal(t, fromYAML, p)
}

func TestImportGateSetJSON(t *testing.T) {
	t.Parallel()
	g, err := ImportGateSetJSON([]byte(`{"name": "g", "criteria": [
		{"name": "ttft", "metric": "ttft", "statistic": "p99", "comparator": "<=", "threshold": 2, "unit": "s", "stop_loss": 5}
	]}`))
	require.NoError(t, err)
	require.Equal(t, 5.0, *g.Criteria[0].StopLoss)
	require.Equal(t, Blocking, g.Criteria[0].Severity)
}

func TestImportJSONLocatedErrors(t *testing.T) {
	t.Parallel()
	replace := func(old, new string) string {
		require.Contains(t, profileJSON, old)
		return strings.Replace(profileJSON, old, new, 1)
	}
	cases := []struct {
		name string
		doc  string
		want FieldError
	}{
		{"unknown field", replace(`"iodepth": 32`, `"io_depth": 32`),
			FieldError{Path: "steps[0].fio.io_depth", Line: 13, Message: "unknown field; did you mean iodepth?"}},
		{"key in the wrong case", replace(`"name": "KV lookups"`, `"Name": "KV lookups"`),
			FieldError{Path: "Name", Line: 2, Message: "unknown field; did you mean name?"}},
		{"text for a number", replace(`"iodepth": 32`, `"iodepth": "32"`),
			FieldError{Path: "steps[0].fio.iodepth", Line: 13, Message: `must be a whole number, not the text "32"`}},
		{"fraction for a whole number", replace(`"iodepth": 32`, `"iodepth": 1.5`),
			FieldError{Path: "steps[0].fio.iodepth", Line: 13, Message: `must be a whole number, not "1.5"`}},
		{"huge number", replace(`"iodepth": 32`, `"iodepth": 1e40`),
			FieldError{Path: "steps[0].fio.iodepth", Line: 13, Message: `must be a whole number, not "1e40"`}},
		{"text for a bool", replace(`"direct": true`, `"direct": "true"`),
			FieldError{Path: "steps[0].fio.direct", Line: 16, Message: `must be true or false, not the text "true"`}},
		{"number for a duration", replace(`"runtime": "1m"`, `"runtime": 60`),
			FieldError{Path: "steps[0].fio.runtime", Line: 15, Message: `duration must be a string like "30s"`}},
		{"bad size", replace(`"block_size": "4KiB"`, `"block_size": "4 kilobytes"`),
			FieldError{Path: "steps[0].fio.block_size", Line: 12, Message: `"4 kilobytes" is not a size (use forms like 4KiB, 1MiB, 10GiB)`}},
		{"object for a list", replace(`"steps": [`, `"steps": {"a": `) + "",
			FieldError{Line: 20, Message: "JSON syntax: invalid character ']' after object key:value pair"}},
		{"text for a list", `{"steps": "fio"}`,
			FieldError{Path: "steps", Line: 1, Message: `must be a list, not the text "fio"`}},
		{"list for a block", `{"steps": [{"fio": []}]}`,
			FieldError{Path: "steps[0].fio", Line: 1, Message: "must be an object, not a list"}},
		{"duplicate key", replace(`"iodepth": 32,`, `"iodepth": 32, "iodepth": 64,`),
			FieldError{Path: "steps[0].fio.iodepth", Line: 13, Message: "is given twice (first on line 13)"}},
		{"trailing data", profileJSON + `{"name": "second"}`,
			FieldError{Line: 22, Message: "unexpected data after the JSON object; send exactly one object"}},
		{"array at the top", `[{"name": "a"}]`,
			FieldError{Line: 1, Message: "a profile must be a JSON object"}},
		{"syntax error", replace(`"direct": true,`, `"direct": true,,`),
			FieldError{Line: 16, Message: "JSON syntax: invalid character ',' looking for beginning of object key string"}},
		{"cut short", profileJSON[:100],
			FieldError{Line: 4, Message: "JSON syntax: the document ends too early"}},
		{"empty", "  \n", FieldError{Message: "the document is empty"}},
		{"validation error located", replace(`"iodepth": 32`, `"iodepth": 5000`),
			FieldError{Path: "steps[0].fio.iodepth", Line: 13, Message: "must be between 1 and 4096"}},
		{"missing field located at its parent", replace(`"target": "/mnt/nvme/accord.dat"`, `"numjobs": 2`),
			FieldError{Path: "steps[0].fio.target", Line: 10, Message: "is required: a file (/mnt/nvme/accord.dat) or a block device (/dev/nvme1n1)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ImportProfileJSON([]byte(tc.doc))
			require.Equal(t, tc.want, requireOneError(t, err))
		})
	}
}

func TestImportJSONNullIsEmpty(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(profileJSON, `"warmup": "10s",`, `"warmup": null, "description": null, "run_timeout": null,`, 1)
	p, err := ImportProfileJSON([]byte(doc))
	require.NoError(t, err)
	require.Equal(t, Duration(0), p.Warmup)
}

func TestImportJSONNewerSchemaAndSize(t *testing.T) {
	t.Parallel()
	_, err := ImportProfileJSON([]byte(`{"schema_version": 3, "name": "x", "future_field": 1}`))
	require.Equal(t, FieldError{Path: "schema_version",
		Message: "this profile uses schema version 3, but this build of Accord understands versions up to 1; import it with a newer Accord"},
		requireOneError(t, err))

	huge := append([]byte(`{"name": "`), bytes.Repeat([]byte("x"), 10<<20)...)
	_, err = ImportGateSetJSON(huge)
	require.Equal(t, FieldError{Message: "the document is 10.0 MiB; the limit is 256.0 KiB"}, requireOneError(t, err))
}

func TestExportJSONRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tmpl := range ProfileTemplates() {
		b, err := ExportProfileJSON(tmpl.Spec)
		require.NoError(t, err)
		back, err := ImportProfileJSON(b)
		require.NoError(t, err, tmpl.ID)
		require.Equal(t, tmpl.Spec, back, tmpl.ID)
	}
	for _, tmpl := range GateSetTemplates() {
		b, err := ExportGateSetJSON(tmpl.Spec)
		require.NoError(t, err)
		back, err := ImportGateSetJSON(b)
		require.NoError(t, err, tmpl.ID)
		require.Equal(t, tmpl.Spec, back, tmpl.ID)
	}
}
