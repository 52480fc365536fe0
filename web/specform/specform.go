// Package specform turns a spec (a profile or a gate set) into form fields
// and a submitted form back into a spec, by walking the spec's Go type with
// its JSON field names. A field's path ("steps[2].fio.block_size") is the
// same path that validation errors, help texts and choices use, so an error
// lands next to its input without a mapping table.
package specform

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/accordlab/accord/acceptance"
)

// Input kinds.
const (
	InputText     = "text"
	InputNumber   = "number"
	InputCheckbox = "checkbox"
	InputSelect   = "select"
	InputTextarea = "textarea"
)

// Field is one input.
type Field struct {
	Path    string
	Label   string
	Input   string
	Value   string
	Checked bool
	Choices []string
	Help    string
	Errors  []string
}

// Section groups the fields of one part of the spec: the general fields,
// a nested object, or one element of a list (a step, a criterion).
type Section struct {
	Title  string
	Path   string // "", "storage", "steps[2]"
	List   string // "steps" or "criteria" for list elements
	Index  int
	Fields []Field
}

var (
	durationType = reflect.TypeOf(acceptance.Duration(0))
	byteSizeType = reflect.TypeOf(acceptance.ByteSize(0))
)

// stepBlocks maps a step kind to the field holding its parameters; only
// the block of the step's kind is shown.
var stepBlocks = map[string]string{
	string(acceptance.StepFio): "fio", string(acceptance.StepInference): "inference",
	string(acceptance.StepCommand): "command", string(acceptance.StepPause): "pause", string(acceptance.StepFault): "fault",
	string(acceptance.StepGPUPath): "gpu_path",
}

// Hidden lists paths a form never shows (fixed by the server).
var hidden = map[string]bool{"schema_version": true}

// Sections describes spec (a pointer or a value) as form sections, with
// the validation errors placed at their fields. Errors whose path matches
// no field are returned as general errors.
func Sections(spec any, errs acceptance.ValidationErrors) (sections []Section, general []string) {
	v := reflect.Indirect(reflect.ValueOf(spec))
	placed := map[int]bool{}
	main := Section{Title: "General"}
	var nested []Section
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name := jsonName(sf)
		if name == "" || hidden[name] {
			continue
		}
		fv := v.Field(i)
		switch {
		case sf.Type.Kind() == reflect.Slice && sf.Type.Elem().Kind() == reflect.Struct:
			for j := 0; j < fv.Len(); j++ {
				path := fmt.Sprintf("%s[%d]", name, j)
				sec := Section{Title: elementTitle(name, j, fv.Index(j)), Path: path, List: name, Index: j}
				sec.Fields = structFields(fv.Index(j), path)
				nested = append(nested, sec)
			}
		case isNestedStruct(sf.Type):
			sec := Section{Title: labelOf(name), Path: name}
			sec.Fields = structFields(derefOrZero(fv), name)
			nested = append(nested, sec)
		default:
			main.Fields = append(main.Fields, leafField(fv, name))
		}
	}
	sections = append([]Section{main}, nested...)
	for si := range sections {
		for fi := range sections[si].Fields {
			f := &sections[si].Fields[fi]
			for ei, e := range errs {
				if e.Path == f.Path {
					f.Errors = append(f.Errors, e.Message)
					placed[ei] = true
				}
			}
		}
	}
	// An error on a block or a list element (not a leaf) goes to the first
	// field of that section, or stays general.
	for ei, e := range errs {
		if placed[ei] {
			continue
		}
		done := false
		for si := range sections {
			s := &sections[si]
			if e.Path != "" && s.Path != "" && strings.HasPrefix(e.Path, s.Path) && len(s.Fields) > 0 {
				s.Fields[0].Errors = append(s.Fields[0].Errors, e.Path+": "+e.Message)
				done = true
				break
			}
		}
		if !done {
			general = append(general, e.Error())
		}
	}
	return sections, general
}

func elementTitle(list string, i int, v reflect.Value) string {
	name := v.FieldByName("Name")
	label := ""
	if name.IsValid() && name.String() != "" {
		label = name.String()
	}
	switch list {
	case "steps":
		kind := v.FieldByName("Kind").String()
		return strings.TrimSpace(fmt.Sprintf("Step %d: %s (%s)", i+1, label, kind))
	case "criteria":
		return strings.TrimSpace(fmt.Sprintf("Criterion %d: %s", i+1, label))
	}
	return fmt.Sprintf("%s %d", labelOf(list), i+1)
}

// structFields flattens a struct's fields (and nested structs) into inputs.
func structFields(v reflect.Value, prefix string) []Field {
	var out []Field
	t := v.Type()
	kind := ""
	if k := v.FieldByName("Kind"); k.IsValid() && t.Name() == "StepSpec" {
		kind = k.String()
	}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name := jsonName(sf)
		if name == "" {
			continue
		}
		path := prefix + "." + name
		fv := v.Field(i)
		if t.Name() == "StepSpec" && isNestedStruct(sf.Type) {
			// Only the block of the step's kind.
			if stepBlocks[kind] != name {
				continue
			}
		}
		if isNestedStruct(sf.Type) {
			out = append(out, structFields(derefOrZero(fv), path)...)
			continue
		}
		out = append(out, leafField(fv, path))
	}
	return out
}

func leafField(v reflect.Value, path string) Field {
	f := Field{Path: path, Label: labelFromPath(path), Input: InputText, Help: acceptance.FieldHelp(path), Choices: acceptance.FieldChoices(path)}
	t := v.Type()
	switch {
	case t == durationType:
		if d := time.Duration(v.Int()); d != 0 {
			f.Value = acceptance.Duration(d).String()
		}
	case t == byteSizeType:
		if v.Int() != 0 {
			f.Value = acceptance.ByteSize(v.Int()).String()
		}
	case t.Kind() == reflect.Bool:
		f.Input = InputCheckbox
		f.Checked = v.Bool()
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		f.Input = InputNumber
		if v.Int() != 0 {
			f.Value = strconv.FormatInt(v.Int(), 10)
		}
	case t.Kind() == reflect.Float64:
		f.Input = InputNumber
		if v.Float() != 0 {
			f.Value = strconv.FormatFloat(v.Float(), 'g', -1, 64)
		}
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Float64:
		f.Input = InputNumber
		if !v.IsNil() {
			f.Value = strconv.FormatFloat(v.Elem().Float(), 'g', -1, 64)
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		f.Input = InputTextarea
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = v.Index(i).String()
		}
		f.Value = strings.Join(parts, "\n")
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Float64:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = strconv.FormatFloat(v.Index(i).Float(), 'g', -1, 64)
		}
		f.Value = strings.Join(parts, ", ")
	case t.Kind() == reflect.String:
		f.Value = v.String()
		if len(f.Value) > 120 || path == "description" {
			f.Input = InputTextarea
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		// A list inside a block (telemetry.exporters) is edited as JSON;
		// the YAML tab edits it more comfortably.
		f.Input = InputTextarea
		if v.Len() > 0 {
			b, _ := json.MarshalIndent(v.Interface(), "", "  ")
			f.Value = string(b)
		}
	default:
		f.Value = fmt.Sprint(v.Interface())
	}
	if len(f.Choices) > 0 {
		f.Input = InputSelect
	}
	return f
}

// Bind builds a spec of the type of target from submitted form values.
// Values that cannot be converted (text in a number field) come back as
// field errors at their paths. Empty values leave fields at their zero
// value; optional blocks are created only when one of their fields has a
// value.
func Bind(values url.Values, target any) acceptance.ValidationErrors {
	root := reflect.ValueOf(target).Elem()
	var errs acceptance.ValidationErrors
	paths := make([]string, 0, len(values))
	for p := range values {
		paths = append(paths, p)
	}
	// Set list elements in index order, so slices grow predictably.
	sort.Slice(paths, func(i, j int) bool { return pathLess(paths[i], paths[j]) })
	for _, p := range paths {
		if strings.HasPrefix(p, "_") {
			continue // form controls, not fields
		}
		raw := values.Get(p)
		if err := setPath(root, p, raw); err != nil {
			errs = append(errs, acceptance.FieldError{Path: p, Message: err.Error()})
		}
	}
	return errs
}

// pathLess orders "steps[2].x" before "steps[10].x".
func pathLess(a, b string) bool {
	ka, kb := sortKey(a), sortKey(b)
	return ka < kb
}

func sortKey(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '[' {
			j := strings.IndexByte(p[i:], ']')
			if j > 0 {
				n, _ := strconv.Atoi(p[i+1 : i+j])
				fmt.Fprintf(&b, "[%06d]", n)
				i += j
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

type segment struct {
	name  string
	index int // -1 when not a list element
}

func parsePath(p string) ([]segment, error) {
	var out []segment
	for _, part := range strings.Split(p, ".") {
		seg := segment{name: part, index: -1}
		if i := strings.IndexByte(part, '['); i >= 0 {
			if !strings.HasSuffix(part, "]") {
				return nil, fmt.Errorf("bad field path")
			}
			n, err := strconv.Atoi(part[i+1 : len(part)-1])
			if err != nil || n < 0 || n > 999 {
				return nil, fmt.Errorf("bad field path")
			}
			seg.name, seg.index = part[:i], n
		}
		out = append(out, seg)
	}
	return out, nil
}

func setPath(root reflect.Value, p, raw string) error {
	segs, err := parsePath(p)
	if err != nil {
		return err
	}
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil // leave the zero value; validation says what is missing
	}
	v := root
	for i, seg := range segs {
		field, ok := fieldByJSONName(v, seg.name)
		if !ok {
			return fmt.Errorf("this form has no field %q", seg.name)
		}
		if seg.index >= 0 {
			if field.Kind() != reflect.Slice {
				return fmt.Errorf("bad field path")
			}
			for field.Len() <= seg.index {
				field.Set(reflect.Append(field, reflect.Zero(field.Type().Elem())))
			}
			field = field.Index(seg.index)
		}
		if i == len(segs)-1 {
			return setLeaf(field, raw)
		}
		if field.Kind() == reflect.Pointer {
			if field.IsNil() {
				field.Set(reflect.New(field.Type().Elem()))
			}
			field = field.Elem()
		}
		if field.Kind() != reflect.Struct {
			return fmt.Errorf("bad field path")
		}
		v = field
	}
	return nil
}

func setLeaf(f reflect.Value, raw string) error {
	t := f.Type()
	switch {
	case t == durationType:
		d, err := acceptance.ParseDuration(raw)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
	case t == byteSizeType:
		b, err := acceptance.ParseByteSize(raw)
		if err != nil {
			return err
		}
		f.SetInt(int64(b))
	case t.Kind() == reflect.Bool:
		f.SetBool(raw == "on" || raw == "true" || raw == "1")
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", raw)
		}
		f.SetInt(n)
	case t.Kind() == reflect.Float64:
		x, err := parseNumber(raw)
		if err != nil {
			return err
		}
		f.SetFloat(x)
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Float64:
		x, err := parseNumber(raw)
		if err != nil {
			return err
		}
		f.Set(reflect.ValueOf(&x))
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		var items []string
		for _, line := range strings.Split(raw, "\n") {
			if line = strings.TrimRight(line, "\r"); line != "" {
				items = append(items, line)
			}
		}
		f.Set(reflect.ValueOf(items))
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Float64:
		var items []float64
		for _, part := range strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || r == ' ' || r == ';' }) {
			x, err := parseNumber(part)
			if err != nil {
				return err
			}
			items = append(items, x)
		}
		f.Set(reflect.ValueOf(items))
	case t.Kind() == reflect.String:
		f.SetString(raw)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		list := reflect.New(t)
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(list.Interface()); err != nil {
			return fmt.Errorf("must be a JSON list, like the YAML tab shows as a list: %v", err)
		}
		f.Set(list.Elem())
	default:
		return fmt.Errorf("this field cannot be set from a form")
	}
	return nil
}

func parseNumber(raw string) (float64, error) {
	x, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(raw), "+"), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", raw)
	}
	return x, nil
}

func fieldByJSONName(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if jsonName(t.Field(i)) == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func jsonName(sf reflect.StructField) string {
	tag := sf.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" || !sf.IsExported() {
		return ""
	}
	if name == "" {
		return strings.ToLower(sf.Name)
	}
	return name
}

func isNestedStruct(t reflect.Type) bool {
	if t == durationType || t == byteSizeType {
		return false
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

func derefOrZero(v reflect.Value) reflect.Value {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Zero(v.Type().Elem())
		}
		return v.Elem()
	}
	return v
}

func labelOf(name string) string {
	s := strings.ReplaceAll(name, "_", " ")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// labelFromPath labels a field by its last two path parts inside a block
// ("prompt_tokens.mean" → "Prompt tokens: mean").
func labelFromPath(path string) string {
	parts := strings.Split(path, ".")
	last := parts[len(parts)-1]
	if len(parts) >= 3 {
		parent := parts[len(parts)-2]
		switch parent {
		case "fio", "inference", "command", "pause", "fault":
		default:
			if !strings.Contains(parent, "[") {
				return labelOf(parent) + ": " + strings.ReplaceAll(last, "_", " ")
			}
		}
	}
	return labelOf(last)
}
