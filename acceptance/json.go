package acceptance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
)

// ImportProfileJSON reads a profile from JSON (the API's form) with the same
// strictness as ImportProfileYAML: unknown or duplicated fields, wrong types,
// trailing data and newer schemas are errors with their path and line.
func ImportProfileJSON(data []byte) (ProfileSpec, error) {
	return importProfile(data, decodeJSON)
}

// ImportGateSetJSON reads a gate set from JSON like ImportProfileJSON.
func ImportGateSetJSON(data []byte) (GateSetSpec, error) {
	return importGateSet(data, decodeJSON)
}

// ExportProfileJSON writes the normalized profile as indented JSON.
func ExportProfileJSON(p ProfileSpec) ([]byte, error) {
	b, err := json.MarshalIndent(p.Normalized(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("export profile %q: %w", p.Name, err)
	}
	return b, nil
}

// ExportGateSetJSON writes the normalized gate set as indented JSON.
func ExportGateSetJSON(g GateSetSpec) ([]byte, error) {
	b, err := json.MarshalIndent(g.Normalized(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("export gate set %q: %w", g.Name, err)
	}
	return b, nil
}

func decodeJSON(data []byte, what string, current int, out any) (lineIndex, ValidationErrors) {
	if len(data) > MaxSpecBytes {
		return nil, sizeError(len(data))
	}
	w := newJSONWalker(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ValidationErrors{{Message: "the document is empty"}}
		}
		return nil, ValidationErrors{w.syntaxError(err)}
	}
	start := int(dec.InputOffset()) - len(raw)
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, ValidationErrors{{Line: w.line(int(dec.InputOffset())), Message: "unexpected data after the JSON object; send exactly one object"}}
	}
	if raw[0] != '{' {
		return nil, ValidationErrors{{Line: w.line(start), Message: fmt.Sprintf("a %s must be a JSON object", what)}}
	}

	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err == nil {
		var v int64
		if sv, ok := top["schema_version"]; ok && json.Unmarshal(sv, &v) == nil && v > int64(current) {
			return nil, newerSchemaError(what, int(min(v, 1<<31-1)), current, 0)
		}
	}

	w.walk(raw, start, reflect.TypeOf(out).Elem(), "")
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	strict := json.NewDecoder(bytes.NewReader(raw))
	strict.DisallowUnknownFields()
	if err := strict.Decode(out); err != nil {
		// The walk above accepts only what decodes; this is a safety net.
		return nil, ValidationErrors{{Message: "JSON: " + err.Error()}}
	}
	return w.lines, nil
}

type jsonWalker struct {
	errs     ValidationErrors
	lines    lineIndex
	newlines []int // offsets of '\n', for offset → line
}

func newJSONWalker(data []byte) *jsonWalker {
	w := &jsonWalker{lines: lineIndex{}}
	for i, b := range data {
		if b == '\n' {
			w.newlines = append(w.newlines, i)
		}
	}
	return w
}

func (w *jsonWalker) line(off int) int {
	return 1 + sort.SearchInts(w.newlines, off)
}

func (w *jsonWalker) syntaxError(err error) FieldError {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return FieldError{Line: w.line(int(se.Offset)), Message: "JSON syntax: " + se.Error()}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return FieldError{Line: 1 + len(w.newlines), Message: "JSON syntax: the document ends too early"}
	}
	return FieldError{Message: "JSON syntax: " + err.Error()}
}

func (w *jsonWalker) fail(off int, path, format string, args ...any) {
	if len(w.errs) == maxImportErrors {
		w.errs = append(w.errs, FieldError{Line: w.line(off), Message: "too many errors; fix these first"})
	}
	if len(w.errs) > maxImportErrors {
		return
	}
	w.errs = append(w.errs, FieldError{Path: path, Line: w.line(off), Message: fmt.Sprintf(format, args...)})
}

func jsonKindWord(raw []byte) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "the text " + quoteShort(s)
		}
	}
	return quoteShort(string(raw))
}

// walk checks raw (one complete JSON value starting at offset off of the
// document) against t.
func (w *jsonWalker) walk(raw []byte, off int, t reflect.Type, p string) {
	if len(w.errs) > maxImportErrors {
		return
	}
	w.lines.set(p, w.line(off))
	if string(raw) == "null" {
		return // null leaves the field empty
	}
	if isLeaf(t) {
		w.scalar(raw, off, t, p)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		w.walk(raw, off, t.Elem(), p)
	case reflect.Slice:
		if raw[0] != '[' {
			w.fail(off, p, "must be a list, not %s", jsonKindWord(raw))
			return
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if _, err := dec.Token(); err != nil {
			w.fail(off, p, "JSON syntax: %v", err)
			return
		}
		for i := 0; dec.More(); i++ {
			if i == maxListItems {
				n := i
				for ; dec.More(); n++ {
					var skip json.RawMessage
					if dec.Decode(&skip) != nil {
						break
					}
				}
				w.fail(off, p, "%s", listTooLong(n))
				return
			}
			var item json.RawMessage
			if err := dec.Decode(&item); err != nil {
				w.fail(off+int(dec.InputOffset()), p, "JSON syntax: %v", err)
				return
			}
			w.walk(item, off+int(dec.InputOffset())-len(item), t.Elem(), specIndex(p, i))
		}
	case reflect.Struct:
		if raw[0] != '{' {
			w.fail(off, p, "must be an object, not %s", jsonKindWord(raw))
			return
		}
		fs := fieldsOf(t, "json")
		seen := map[string]int{}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if _, err := dec.Token(); err != nil {
			w.fail(off, p, "JSON syntax: %v", err)
			return
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				w.fail(off+int(dec.InputOffset()), p, "JSON syntax: %v", err)
				return
			}
			key, _ := tok.(string)
			keyOff := off + int(dec.InputOffset()) - 1
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				w.fail(keyOff, p, "JSON syntax: %v", err)
				return
			}
			fp := specField(p, key)
			if first, dup := seen[key]; dup {
				w.fail(keyOff, fp, "is given twice (first on line %d)", first)
				continue
			}
			seen[key] = w.line(keyOff)
			f, ok := fs.byName[key]
			if !ok {
				w.fail(keyOff, fp, "%s", unknownFieldMessage(key, fs))
				continue
			}
			w.walk(v, off+int(dec.InputOffset())-len(v), f.Type, fp)
		}
	default:
		w.fail(off, p, "cannot be imported (type %s)", t)
	}
}

func (w *jsonWalker) scalar(raw []byte, off int, t reflect.Type, p string) {
	custom := reflect.PointerTo(t).Implements(jsonUnmarshaler)
	k := t.Kind()
	ok := true
	switch {
	case custom:
	case k == reflect.String:
		ok = raw[0] == '"'
	case k == reflect.Bool:
		ok = string(raw) == "true" || string(raw) == "false"
	case isIntKind(k), k == reflect.Float32, k == reflect.Float64:
		ok = raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')
	}
	if !ok {
		w.fail(off, p, "must be %s, not %s", typeWord(t), jsonKindWord(raw))
		return
	}
	if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
		var te *json.UnmarshalTypeError
		if custom && !errors.As(err, &te) {
			w.fail(off, p, "%s", err.Error())
			return
		}
		w.fail(off, p, "must be %s, not %s", typeWord(t), jsonKindWord(raw))
	}
}
