package acceptance

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ImportProfileYAML reads a profile from YAML, strictly (see MaxSpecBytes),
// fills its defaults and validates it. The error is always ValidationErrors
// with lines. When only validation fails, the decoded, normalized profile is
// returned with the errors, so that an editor can show it.
func ImportProfileYAML(data []byte) (ProfileSpec, error) {
	return importProfile(data, decodeYAML)
}

// ImportGateSetYAML reads a gate set from YAML like ImportProfileYAML.
func ImportGateSetYAML(data []byte) (GateSetSpec, error) {
	return importGateSet(data, decodeYAML)
}

// specDecoder decodes a spec document strictly into out, checking its
// schema version, and indexes its lines for error positions.
type specDecoder func(data []byte, what string, current int, out any) (lineIndex, ValidationErrors)

// importProfile decodes, normalizes and validates a profile document.
func importProfile(data []byte, decode specDecoder) (ProfileSpec, error) {
	var p ProfileSpec
	lines, errs := decode(data, "profile", ProfileSchemaVersion, &p)
	if errs != nil {
		return ProfileSpec{}, errs
	}
	p.Normalize()
	if verrs := ValidateProfile(p); verrs != nil {
		return p, lines.locate(verrs)
	}
	return p, nil
}

// importGateSet decodes, normalizes and validates a gate set document.
func importGateSet(data []byte, decode specDecoder) (GateSetSpec, error) {
	var g GateSetSpec
	lines, errs := decode(data, "gate set", GateSchemaVersion, &g)
	if errs != nil {
		return GateSetSpec{}, errs
	}
	g.Normalize()
	if verrs := ValidateGateSet(g); verrs != nil {
		return g, lines.locate(verrs)
	}
	return g, nil
}

// ExportProfileYAML writes the normalized profile as YAML.
func ExportProfileYAML(p ProfileSpec) ([]byte, error) {
	b, err := encodeYAML(p.Normalized())
	if err != nil {
		return nil, fmt.Errorf("export profile %q: %w", p.Name, err)
	}
	return b, nil
}

// ExportGateSetYAML writes the normalized gate set as YAML.
func ExportGateSetYAML(g GateSetSpec) ([]byte, error) {
	b, err := encodeYAML(g.Normalized())
	if err != nil {
		return nil, fmt.Errorf("export gate set %q: %w", g.Name, err)
	}
	return b, nil
}

func encodeYAML(v any) (out []byte, err error) {
	// The encoder panics on values it cannot represent; a spec has none, but
	// an export must never take the server down.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml encode: %v", r)
		}
	}()
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlParserProblems are the messages of the YAML parser (as opposed to its
// scanner), whose line numbers come out one too low.
var yamlParserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// yamlError turns a parser error into a located FieldError.
func yamlError(err error) FieldError {
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if yamlParserProblems[m[2]] {
			// The parser reports its (zero-based) context line without
			// adding one, unlike the scanner.
			line++
		}
		return FieldError{Line: line, Message: "YAML syntax: " + m[2]}
	}
	return FieldError{Message: "YAML syntax: " + msg}
}

// decodeYAML parses one YAML document into out (a pointer to a spec),
// checking its structure against out's type first so that every problem is
// reported with its path and line.
func decodeYAML(data []byte, what string, current int, out any) (lineIndex, ValidationErrors) {
	if len(data) > MaxSpecBytes {
		return nil, sizeError(len(data))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ValidationErrors{{Message: "the document is empty"}}
		}
		return nil, ValidationErrors{yamlError(err)}
	}
	for {
		// A trailing "---" with nothing after it is harmless; a second
		// document with content is refused rather than ignored.
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, ValidationErrors{yamlError(err)}
		}
		if len(extra.Content) > 0 && !(extra.Content[0].Kind == yaml.ScalarNode && extra.Content[0].ShortTag() == "!!null" && extra.Content[0].Value == "") {
			return nil, ValidationErrors{{Line: extra.Line, Message: "only one document is allowed, but another one starts here (remove the --- separator and what follows)"}}
		}
	}
	if len(doc.Content) == 0 {
		return nil, ValidationErrors{{Message: "the document is empty"}}
	}
	root := doc.Content[0]

	if root.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(root.Content); i += 2 {
			k, v := root.Content[i], root.Content[i+1]
			if k.Value != "schema_version" || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
				continue
			}
			if n, err := strconv.ParseInt(strings.ReplaceAll(v.Value, "_", ""), 0, 64); err == nil && n > int64(current) {
				return nil, newerSchemaError(what, int(min(n, 1<<31-1)), current, v.Line)
			}
		}
	}

	w := &yamlWalker{lines: lineIndex{}}
	t := reflect.TypeOf(out).Elem()
	if root.Kind != yaml.MappingNode {
		return nil, ValidationErrors{{Line: root.Line, Message: fmt.Sprintf("a %s must be a mapping of fields (name: value), not %s", what, yamlKindWord(root))}}
	}
	w.walk(root, t, "", root.Line)
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	if err := root.Decode(out); err != nil {
		// The walk above accepts only what decodes; this is a safety net.
		return nil, ValidationErrors{yamlError(err)}
	}
	return w.lines, nil
}

type yamlWalker struct {
	errs  ValidationErrors
	lines lineIndex
}

func (w *yamlWalker) fail(line int, path, format string, args ...any) {
	if len(w.errs) == maxImportErrors {
		w.errs = append(w.errs, FieldError{Line: line, Message: "too many errors; fix these first"})
	}
	if len(w.errs) > maxImportErrors {
		return
	}
	w.errs = append(w.errs, FieldError{Path: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

func yamlKindWord(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return "the single value " + quoteShort(n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "an empty document"
}

// walk checks node n against type t. line is where the field starts: the
// line of its key, or of the list item.
func (w *yamlWalker) walk(n *yaml.Node, t reflect.Type, p string, line int) {
	if len(w.errs) > maxImportErrors {
		return
	}
	w.lines.set(p, line)
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		w.fail(line, p, "anchors and aliases (& and *) are not supported; write the value out")
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // null leaves the field empty
	}
	if isLeaf(t) {
		w.scalar(n, t, p, line)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		w.walk(n, t.Elem(), p, line)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.fail(line, p, "must be a list, not %s", yamlKindWord(n))
			return
		}
		if len(n.Content) > maxListItems {
			w.fail(line, p, "%s", listTooLong(len(n.Content)))
			return
		}
		for i, item := range n.Content {
			w.walk(item, t.Elem(), specIndex(p, i), item.Line)
		}
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.fail(line, p, "must be a mapping of fields, not %s", yamlKindWord(n))
			return
		}
		fs := fieldsOf(t, "yaml")
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Anchor != "" || k.Tag == "!!merge" || k.Value == "<<" {
				w.fail(k.Line, p, "field names must be plain words (no lists, mappings, anchors or << merges as keys)")
				continue
			}
			fp := specField(p, k.Value)
			if first, dup := seen[k.Value]; dup {
				w.fail(k.Line, fp, "is given twice (first on line %d)", first)
				continue
			}
			seen[k.Value] = k.Line
			f, ok := fs.byName[k.Value]
			if !ok {
				w.fail(k.Line, fp, "%s", unknownFieldMessage(k.Value, fs))
				continue
			}
			w.walk(v, f.Type, fp, k.Line)
		}
	default:
		w.fail(line, p, "cannot be imported (type %s)", t)
	}
}

// scalar checks a leaf value: one scalar that decodes into t.
func (w *yamlWalker) scalar(n *yaml.Node, t reflect.Type, p string, line int) {
	if n.Kind != yaml.ScalarNode {
		w.fail(line, p, "must be %s, not %s", typeWord(t), yamlKindWord(n))
		return
	}
	tag := n.ShortTag()
	ok := true
	switch k := t.Kind(); {
	case reflect.PointerTo(t).Implements(yamlUnmarshaler):
		// Duration and ByteSize parse their own text.
	case k == reflect.String:
		ok = tag != "!!binary" // decoded bytes could be anything; write the text
	case k == reflect.Bool:
		ok = tag == "!!bool"
	case isIntKind(k):
		ok = tag == "!!int"
	case k == reflect.Float32 || k == reflect.Float64:
		ok = tag == "!!int" || tag == "!!float"
	}
	if !ok {
		w.fail(line, p, "must be %s, not %s", typeWord(t), quoteShort(n.Value))
		return
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		if reflect.PointerTo(t).Implements(yamlUnmarshaler) {
			// Our own types' messages are already plain.
			w.fail(line, p, "%s", strings.TrimPrefix(yamlError(err).Message, "YAML syntax: "))
			return
		}
		w.fail(line, p, "must be %s, not %s (out of range?)", typeWord(t), quoteShort(n.Value))
	}
}
