package specform

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
)

// formValues is what a browser submits for the sections as rendered.
func formValues(sections []Section) url.Values {
	v := url.Values{}
	for _, s := range sections {
		for _, f := range s.Fields {
			if f.Input == InputCheckbox {
				if f.Checked {
					v.Set(f.Path, "on")
				}
				continue
			}
			v.Set(f.Path, f.Value)
		}
	}
	return v
}

// Every starter template survives render → submit → bind unchanged.
func TestFormRoundTripKeepsEveryTemplate(t *testing.T) {
	t.Parallel()
	for _, tmpl := range acceptance.ProfileTemplates() {
		sections, general := Sections(tmpl.Spec, nil)
		require.Empty(t, general)
		var got acceptance.ProfileSpec
		require.Empty(t, Bind(formValues(sections), &got), tmpl.ID)
		got.SchemaVersion = tmpl.Spec.SchemaVersion
		want, err := acceptance.ProfileDigest(tmpl.Spec)
		require.NoError(t, err)
		have, err := acceptance.ProfileDigest(got)
		require.NoError(t, err)
		require.Equal(t, want, have, "profile template %s", tmpl.ID)
	}
	for _, tmpl := range acceptance.GateSetTemplates() {
		sections, _ := Sections(tmpl.Spec, nil)
		var got acceptance.GateSetSpec
		require.Empty(t, Bind(formValues(sections), &got), tmpl.ID)
		got.SchemaVersion = tmpl.Spec.SchemaVersion
		want, _ := acceptance.GateSetDigest(tmpl.Spec)
		have, _ := acceptance.GateSetDigest(got)
		require.Equal(t, want, have, "gate set template %s", tmpl.ID)
	}
}

// A profile's exporters and a gpu-path step survive the form: the
// exporters as one JSON list, the step's own block.
func TestFormRoundTripKeepsExportersAndGPUPath(t *testing.T) {
	t.Parallel()
	spec := acceptance.ProfileTemplates()[0].Spec.Clone()
	spec.Steps = append(spec.Steps, acceptance.StepSpec{Name: "path", Kind: acceptance.StepGPUPath,
		GPUPath: &acceptance.GPUPathStep{Target: "/dev/nvme1n1", BlockSize: 1 << 20, Size: 4 << 30, GPU: 1}})
	spec.Telemetry = &acceptance.TelemetrySpec{Exporters: []acceptance.ExporterSpec{
		{URL: "http://127.0.0.1:9400/metrics", Kind: acceptance.ExporterDCGM},
		{URL: "http://127.0.0.1:9445/metrics", Kind: acceptance.ExporterCustom, Name: "x", Mapping: &acceptance.ExporterMapping{
			DeviceLabel: "card", Power: []acceptance.ExporterSeries{{Metric: "card_watts", Scale: 1}}}},
	}}
	sections, general := Sections(spec, nil)
	require.Empty(t, general)
	values := formValues(sections)
	require.Contains(t, values.Get("telemetry.exporters"), `"kind": "dcgm"`)
	require.Equal(t, "/dev/nvme1n1", values.Get("steps[1].gpu_path.target"))
	var got acceptance.ProfileSpec
	require.Empty(t, Bind(values, &got))
	got.SchemaVersion = spec.SchemaVersion
	want, err := acceptance.ProfileDigest(spec)
	require.NoError(t, err)
	have, err := acceptance.ProfileDigest(got)
	require.NoError(t, err)
	require.Equal(t, want, have)

	// Not JSON: an error at the field, nothing guessed.
	values.Set("telemetry.exporters", "dcgm")
	errs := Bind(values, &acceptance.ProfileSpec{})
	require.Len(t, errs, 1)
	require.Equal(t, "telemetry.exporters", errs[0].Path)
	require.Contains(t, errs[0].Message, "must be a JSON list")
}

func TestSectionsShowOnlyTheStepsOwnBlockAndPlaceErrors(t *testing.T) {
	t.Parallel()
	spec := acceptance.ProfileSpec{Name: "x", Steps: []acceptance.StepSpec{
		{Name: "read", Kind: acceptance.StepFio, Fio: &acceptance.FioStep{RW: "randread"}},
		{Name: "rest", Kind: acceptance.StepPause},
	}}
	errs := acceptance.ValidationErrors{
		{Path: "steps[0].fio.block_size", Message: "block size is required"},
		{Path: "", Message: "the document as a whole"},
	}
	sections, general := Sections(spec, errs)
	require.Equal(t, []string{"the document as a whole"}, general)
	var fioFields, pauseFields int
	var blockSize Field
	for _, s := range sections {
		for _, f := range s.Fields {
			switch {
			case len(f.Path) > 13 && f.Path[:13] == "steps[0].fio.":
				fioFields++
				if f.Path == "steps[0].fio.block_size" {
					blockSize = f
				}
			case f.Path == "steps[1].pause.duration":
				pauseFields++
			}
			require.NotContains(t, f.Path, "steps[0].inference", "only the fio block for a fio step")
		}
	}
	require.Greater(t, fioFields, 5)
	require.Equal(t, 1, pauseFields)
	require.Equal(t, []string{"block size is required"}, blockSize.Errors)
	require.NotEmpty(t, blockSize.Help)
	for _, s := range sections {
		for _, f := range s.Fields {
			if f.Path == "steps[0].fio.rw" {
				require.Equal(t, InputSelect, f.Input)
				require.Contains(t, f.Choices, "randread")
			}
		}
	}
}

func TestBindReportsBadValuesAtTheirFields(t *testing.T) {
	t.Parallel()
	var spec acceptance.ProfileSpec
	errs := Bind(url.Values{
		"name":                    {"p"},
		"repetitions":             {"three"},
		"steps[0].kind":           {"fio"},
		"steps[0].fio.block_size": {"4 potatoes"},
		"steps[0].fio.runtime":    {"soon"},
		"steps[1].kind":           {"pause"},
		"steps[1].pause.duration": {"30s"},
		"no_such_field":           {"x"},
		"steps[x].name":           {"y"},
		"_action":                 {"save"},
	}, &spec)
	paths := map[string]bool{}
	for _, e := range errs {
		paths[e.Path] = true
	}
	require.True(t, paths["repetitions"])
	require.True(t, paths["steps[0].fio.block_size"])
	require.True(t, paths["steps[0].fio.runtime"])
	require.True(t, paths["no_such_field"])
	require.True(t, paths["steps[x].name"])
	require.Len(t, spec.Steps, 2)
	require.Equal(t, acceptance.Duration(30e9), spec.Steps[1].Pause.Duration)
}

func FuzzBind(f *testing.F) {
	f.Add("steps[3].fio.iodepth", "32")
	f.Add("criteria[0].stop_loss", "1e9")
	f.Add("steps[1].inference.load.sweep", "1, 2, 4")
	f.Fuzz(func(t *testing.T, path, value string) {
		var p acceptance.ProfileSpec
		_ = Bind(url.Values{path: {value}}, &p)
		var g acceptance.GateSetSpec
		_ = Bind(url.Values{path: {value}}, &g)
	})
}
