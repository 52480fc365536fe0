package acceptance

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const profileYAML = `# A profile as a person writes it: comments, defaults left out.
name: KV lookups
purpose: storage-microbenchmark
storage:
  transport: nvmeof-tcp
warmup: 10s
steps:
  - name: randread
    kind: fio
    fio:
      rw: randread
      block_size: 4KiB
      iodepth: 32
      size: 10GiB
      runtime: 1m
      direct: true
      target: /mnt/nvme/accord.dat
`

const gateSetYAML = `name: KV gates
criteria:
  - name: clat-p99
    metric: read_clat
    statistic: p99
    comparator: <=
    threshold: 0.5
    unit: ms
    stop_loss: 2
  - name: iops
    metric: read_iops
    statistic: rate
    mode: relative
    comparator: '>='
    threshold: -5
`

// requireOneError asserts that err is ValidationErrors with exactly one
// error, and returns it.
func requireOneError(t *testing.T, err error) FieldError {
	t.Helper()
	var errs ValidationErrors
	require.ErrorAs(t, err, &errs)
	require.Len(t, errs, 1, "errors: %v", errs)
	return errs[0]
}

func TestImportProfileYAML(t *testing.T) {
	t.Parallel()
	p, err := ImportProfileYAML([]byte(profileYAML))
	require.NoError(t, err)
	require.Equal(t, "KV lookups", p.Name)
	require.Equal(t, 3, p.Repetitions) // default filled
	f := p.Steps[0].Fio
	require.Equal(t, ByteSize(4<<10), f.BlockSize)
	require.Equal(t, Duration(time.Minute), f.Runtime)
	require.Equal(t, IOEngineLibaio, f.IOEngine)
	require.Equal(t, 1, f.NumJobs)
	require.True(t, f.Direct)
}

func TestImportGateSetYAML(t *testing.T) {
	t.Parallel()
	g, err := ImportGateSetYAML([]byte(gateSetYAML))
	require.NoError(t, err)
	require.Len(t, g.Criteria, 2)
	require.Equal(t, LessOrEqual, g.Criteria[0].Comparator)
	require.Equal(t, 0.95, g.Criteria[0].Confidence)
	require.Equal(t, "%", g.Criteria[1].Unit)
	v, err := CanonicalThreshold(g.Criteria[0])
	require.NoError(t, err)
	require.Equal(t, 500.0, v)
}

func TestImportYAMLLocatedErrors(t *testing.T) {
	t.Parallel()
	replace := func(old, new string) string {
		require.Contains(t, profileYAML, old)
		return strings.Replace(profileYAML, old, new, 1)
	}
	cases := []struct {
		name string
		doc  string
		want FieldError
	}{
		{"unknown field with suggestion", replace("      iodepth: 32", "      io_depth: 32"),
			FieldError{Path: "steps[0].fio.io_depth", Line: 13, Message: "unknown field; did you mean iodepth?"}},
		{"unknown field, typo", replace("      direct: true", "      drect: true"),
			FieldError{Path: "steps[0].fio.drect", Line: 16, Message: "unknown field; did you mean direct?"}},
		{"unknown top-level field", profileYAML + "owner: alice\n",
			FieldError{Path: "owner", Line: 18, Message: "unknown field; allowed here: description, name, purpose, repetitions, roles, run_timeout, schema_version, steps, storage, telemetry, warmup"}},
		{"text for a number", replace("iodepth: 32", "iodepth: deep"),
			FieldError{Path: "steps[0].fio.iodepth", Line: 13, Message: `must be a whole number, not "deep"`}},
		{"quoted number", replace("iodepth: 32", `iodepth: "32"`),
			FieldError{Path: "steps[0].fio.iodepth", Line: 13, Message: `must be a whole number, not "32"`}},
		{"fraction for a whole number", replace("iodepth: 32", "iodepth: 1.5"),
			FieldError{Path: "steps[0].fio.iodepth", Line: 13, Message: `must be a whole number, not "1.5"`}},
		{"number out of range", replace("iodepth: 32", "iodepth: 99999999999999999999"),
			FieldError{Path: "steps[0].fio.iodepth", Line: 13, Message: `must be a whole number, not "99999999999999999999"`}},
		{"yes for a bool", replace("direct: true", "direct: yes"),
			FieldError{Path: "steps[0].fio.direct", Line: 16, Message: `must be true or false, not "yes"`}},
		{"list for a size", replace("block_size: 4KiB", "block_size: [4KiB]"),
			FieldError{Path: "steps[0].fio.block_size", Line: 12, Message: "must be a size like 4KiB, 1MiB or 10GiB, not a list"}},
		{"bad size", replace("block_size: 4KiB", "block_size: 4 kilobytes"),
			FieldError{Path: "steps[0].fio.block_size", Line: 12, Message: `"4 kilobytes" is not a size (use forms like 4KiB, 1MiB, 10GiB)`}},
		{"duration without unit", replace("runtime: 1m", "runtime: 60"),
			FieldError{Path: "steps[0].fio.runtime", Line: 15, Message: `"60" is not a duration (use forms like 30s, 5m, 1h30m)`}},
		{"mapping for a list", "name: x\npurpose: custom\nstorage: {transport: emulated}\nsteps:\n  name: a\n",
			FieldError{Path: "steps", Line: 4, Message: "must be a list, not a mapping"}},
		{"text for a block", "name: x\npurpose: custom\nstorage: {transport: emulated}\nsteps:\n  - name: a\n    kind: fio\n    fio: randread\n",
			FieldError{Path: "steps[0].fio", Line: 7, Message: `must be a mapping of fields, not the single value "randread"`}},
		{"duplicate key", replace("      iodepth: 32", "      iodepth: 32\n      iodepth: 64"),
			FieldError{Path: "steps[0].fio.iodepth", Line: 14, Message: "is given twice (first on line 13)"}},
		{"anchor", replace("storage:\n  transport: nvmeof-tcp", "storage: &s\n  transport: nvmeof-tcp"),
			FieldError{Path: "storage", Line: 4, Message: "anchors and aliases (& and *) are not supported; write the value out"}},
		{"merge key", replace("storage:\n  transport: nvmeof-tcp", "storage:\n  <<: {transport: nvmeof-tcp}"),
			FieldError{Path: "storage", Line: 5, Message: "field names must be plain words (no lists, mappings, anchors or << merges as keys)"}},
		{"syntax error", replace("  transport: nvmeof-tcp", "  transport: [nvmeof-tcp"),
			FieldError{Line: 5, Message: "YAML syntax: did not find expected ',' or ']'"}},
		{"tab indentation", replace("  transport: nvmeof-tcp", "\ttransport: nvmeof-tcp"),
			FieldError{Line: 5, Message: "YAML syntax: found character that cannot start any token"}},
		{"second document", profileYAML + "---\nname: other\n",
			FieldError{Line: 18, Message: "only one document is allowed, but another one starts here (remove the --- separator and what follows)"}},
		{"second document after an empty one", profileYAML + "---\n---\nname: other\n",
			FieldError{Line: 19, Message: "only one document is allowed, but another one starts here (remove the --- separator and what follows)"}},
		{"list at the top", "- name: a\n",
			FieldError{Line: 1, Message: "a profile must be a mapping of fields (name: value), not a list"}},
		{"empty", "", FieldError{Message: "the document is empty"}},
		{"only a comment", "# nothing\n", FieldError{Message: "the document is empty"}},
		// Validation errors carry the line of their field ...
		{"invalid value", replace("iodepth: 32", "iodepth: 5000"),
			FieldError{Path: "steps[0].fio.iodepth", Line: 13, Message: "must be between 1 and 4096"}},
		// ... or of the nearest field present, when the field is missing.
		{"missing field", replace("      target: /mnt/nvme/accord.dat\n", ""),
			FieldError{Path: "steps[0].fio.target", Line: 10, Message: "is required: a file (/mnt/nvme/accord.dat) or a block device (/dev/nvme1n1)"}},
		{"missing name", replace("name: KV lookups\n", ""),
			FieldError{Path: "name", Line: 2, Message: "is required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ImportProfileYAML([]byte(tc.doc))
			require.Equal(t, tc.want, requireOneError(t, err))
		})
	}
}

func TestImportYAMLDocumentMarkers(t *testing.T) {
	t.Parallel()
	// Start and end markers, and a trailing empty document, are harmless.
	for _, doc := range []string{"---\n" + profileYAML, profileYAML + "...\n", profileYAML + "---\n", profileYAML + "--- # end\n---\n"} {
		_, err := ImportProfileYAML([]byte(doc))
		require.NoError(t, err, doc)
	}
}

func TestImportYAMLNewerSchema(t *testing.T) {
	t.Parallel()
	// A newer schema may have fields this build does not know: the version
	// is the one error reported, not the unknown fields.
	doc := "schema_version: 2\n" + profileYAML + "placement: rack-7\n"
	_, err := ImportProfileYAML([]byte(doc))
	require.Equal(t, FieldError{Path: "schema_version", Line: 1,
		Message: "this profile uses schema version 2, but this build of Accord understands versions up to 1; import it with a newer Accord"},
		requireOneError(t, err))

	_, err = ImportGateSetYAML([]byte("schema_version: 99\n" + gateSetYAML))
	require.Equal(t, FieldError{Path: "schema_version", Line: 1,
		Message: "this gate set uses schema version 99, but this build of Accord understands versions up to 1; import it with a newer Accord"},
		requireOneError(t, err))

	// The current version is accepted, zero means current.
	p, err := ImportProfileYAML([]byte("schema_version: 1\n" + profileYAML))
	require.NoError(t, err)
	require.Equal(t, 1, p.SchemaVersion)
	_, err = ImportProfileYAML([]byte("schema_version: -1\n" + profileYAML))
	require.Equal(t, FieldError{Path: "schema_version", Line: 1, Message: "must be between 1 and 1"}, requireOneError(t, err))
}

func TestImportYAMLSizeLimit(t *testing.T) {
	t.Parallel()
	// 10 MB of what would be very slow to parse if it were parsed.
	huge := bytes.Repeat([]byte("[[[[[[[[[["), 1<<20)
	_, err := ImportProfileYAML(huge)
	require.Equal(t, FieldError{Message: "the document is 10.0 MiB; the limit is 256.0 KiB"}, requireOneError(t, err))
	_, err = ImportGateSetYAML(huge)
	require.Equal(t, FieldError{Message: "the document is 10.0 MiB; the limit is 256.0 KiB"}, requireOneError(t, err))

	// Just under the limit is parsed (and here valid: padding is a comment).
	doc := []byte(profileYAML)
	doc = append(doc, '#')
	doc = append(doc, bytes.Repeat([]byte("x"), MaxSpecBytes-len(doc)-1)...)
	doc = append(doc, '\n')
	require.Len(t, doc, MaxSpecBytes)
	_, err = ImportProfileYAML(doc)
	require.NoError(t, err)
	_, err = ImportProfileYAML(append(doc, '\n'))
	require.Equal(t, FieldError{Message: "the document is 256.0 KiB; the limit is 256.0 KiB"}, requireOneError(t, err))
}

func TestImportYAMLReturnsSpecWithValidationErrors(t *testing.T) {
	t.Parallel()
	// An editor re-renders what was pasted next to its errors.
	p, err := ImportProfileYAML([]byte(strings.Replace(profileYAML, "iodepth: 32", "iodepth: 5000", 1)))
	require.Error(t, err)
	require.Equal(t, "KV lookups", p.Name)
	require.Equal(t, 5000, p.Steps[0].Fio.IODepth)
	require.Equal(t, 1, p.Steps[0].Fio.NumJobs) // defaults filled

	// A document that cannot be decoded gives nothing back.
	p, err = ImportProfileYAML([]byte("name: [\n"))
	require.Error(t, err)
	require.Equal(t, ProfileSpec{}, p)
}

func TestImportYAMLManyErrors(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(profileYAML)
	for i := 0; i < 200; i++ {
		b.WriteString("unknown_" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "_" + string(rune('a'+i/26)) + ": 1\n")
	}
	_, err := ImportProfileYAML([]byte(b.String()))
	var errs ValidationErrors
	require.ErrorAs(t, err, &errs)
	require.Len(t, errs, maxImportErrors+1)
	require.Equal(t, "too many errors; fix these first", errs[maxImportErrors].Message)
}

func TestExportYAMLIsNormalized(t *testing.T) {
	t.Parallel()
	p, err := ImportProfileYAML([]byte(profileYAML))
	require.NoError(t, err)
	out, err := ExportProfileYAML(p)
	require.NoError(t, err)
	require.Equal(t, `schema_version: 1
name: KV lookups
purpose: storage-microbenchmark
storage:
  transport: nvmeof-tcp
repetitions: 3
warmup: 10s
steps:
  - name: randread
    kind: fio
    fio:
      rw: randread
      block_size: 4KiB
      iodepth: 32
      numjobs: 1
      size: 10GiB
      runtime: 1m0s
      ioengine: libaio
      direct: true
      target: /mnt/nvme/accord.dat
`, string(out))

	// Export of a spec with no defaults filled is the same.
	raw := ProfileSpec{Name: p.Name, Purpose: p.Purpose, Storage: p.Storage, Warmup: p.Warmup, Steps: []StepSpec{{
		Name: "randread", Kind: StepFio, Fio: &FioStep{RW: RWRandRead, BlockSize: 4 << 10, IODepth: 32, Size: 10 << 30,
			Runtime: Duration(time.Minute), Direct: true, Target: "/mnt/nvme/accord.dat"},
	}}}
	out2, err := ExportProfileYAML(raw)
	require.NoError(t, err)
	require.Equal(t, string(out), string(out2))
}

func TestImportBoundsAbsurdDocuments(t *testing.T) {
	t.Parallel()
	sweep := "name: x\nsteps:\n  - name: a\n    inference:\n      load:\n        sweep: [" + strings.Repeat("1, ", 5000) + "1]\n"
	_, err := ImportProfileYAML([]byte(sweep))
	require.Equal(t, FieldError{Path: "steps[0].inference.load.sweep", Line: 6, Message: "has 5001 items; no list in a spec may have more than 1000"},
		requireOneError(t, err))

	jsonSweep := `{"steps": [{"inference": {"load": {"sweep": [` + strings.Repeat("1, ", 5000) + `1]}}}]}`
	_, err = ImportProfileJSON([]byte(jsonSweep))
	require.Equal(t, FieldError{Path: "steps[0].inference.load.sweep", Line: 1, Message: "has 5001 items; no list in a spec may have more than 1000"},
		requireOneError(t, err))

	// 500 broken steps give a bounded list of errors.
	steps := "name: x\npurpose: custom\nstorage: {transport: emulated}\nsteps:\n" + strings.Repeat("  - {name: a, kind: pause}\n", 500)
	_, err = ImportProfileYAML([]byte(steps))
	var errs ValidationErrors
	require.ErrorAs(t, err, &errs)
	require.Len(t, errs, maxValidationErrors+1)
	require.Equal(t, "too many errors; fix these first", errs[maxValidationErrors].Message)
}
