package acceptance

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// fieldPatterns lists the help pattern of every field of a spec type, found
// by reflection, so that a field added later without help fails the test.
func fieldPatterns(t reflect.Type, p string, out *[]string) {
	switch t.Kind() {
	case reflect.Pointer:
		fieldPatterns(t.Elem(), p, out)
		return
	case reflect.Slice:
		if !isLeaf(t.Elem()) {
			fieldPatterns(t.Elem(), p+"[*]", out)
		}
		return
	case reflect.Struct:
		if isLeaf(t) {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			name := tagName(t.Field(i), "json")
			if name == "" {
				continue
			}
			fp := specField(p, name)
			*out = append(*out, fp)
			fieldPatterns(t.Field(i).Type, fp, out)
		}
	}
}

func TestEveryFieldHasHelp(t *testing.T) {
	t.Parallel()
	var paths []string
	fieldPatterns(reflect.TypeFor[ProfileSpec](), "", &paths)
	fieldPatterns(reflect.TypeFor[GateSetSpec](), "", &paths)
	require.Greater(t, len(paths), 80)
	for _, p := range paths {
		require.NotEmpty(t, FieldHelp(p), "no help for %s", p)
	}
	// Help is found for concrete paths too, and is one sentence.
	require.Equal(t, FieldHelp("steps[*].fio.block_size"), FieldHelp("steps[12].fio.block_size"))
	for pattern, text := range fieldHelp {
		require.Regexp(t, `^[A-Z0-9<a-z].*\.$`, text, pattern)
	}
	require.Equal(t, "", FieldHelp("steps[0].nope"))
}

func TestFieldChoices(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"read", "write", "randread", "randwrite", "rw", "randrw"}, FieldChoices("steps[3].fio.rw"))
	require.Equal(t, []string{"<=", ">="}, FieldChoices("criteria[0].comparator"))
	require.Contains(t, FieldChoices("criteria[1].metric"), MetricTTFT)
	require.Nil(t, FieldChoices("name"))
	// Callers may change what they get.
	c := FieldChoices("purpose")
	c[0] = "x"
	require.Equal(t, string(PurposeInferenceServing), FieldChoices("purpose")[0])

	// Every choice offered is accepted by validation: a profile with the
	// choice in place validates or fails on something else.
	for _, engine := range FieldChoices("steps[*].fio.ioengine") {
		p := validProfile()
		p.Steps[2].Fio.IOEngine = engine
		require.Nil(t, ValidateProfile(p), engine)
	}
	for _, format := range FieldChoices("steps[*].command.format") {
		p := validProfile()
		p.Steps[5].Command.Format = format
		require.Nil(t, ValidateProfile(p), format)
	}
}

func TestStatisticAndVerdictHelp(t *testing.T) {
	t.Parallel()
	for _, s := range Statistics {
		require.NotEmpty(t, StatisticHelp(s), s)
	}
	for _, v := range []string{"PASS", "FAIL", "INCONCLUSIVE", "INCOMPARABLE", "pass"} {
		require.NotEmpty(t, VerdictHelp(v), v)
	}
	require.Empty(t, VerdictHelp("MAYBE"))
}
