package acceptance

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Importing a spec (YAML from the editor, JSON from the API) is strict: an
// unknown field, a wrong type, a duplicated key or a schema newer than this
// build is an error that names the field and its line, never silently
// dropped. Both formats share this file's pieces.

// MaxSpecBytes bounds an imported document. Real specs are a few KiB; a
// larger paste is refused before it is parsed.
const MaxSpecBytes = 256 << 10

// maxImportErrors bounds the errors reported for one document.
const maxImportErrors = 50

// maxListItems bounds every list of an imported document, far above what
// any spec allows (100 steps, 64 sweep levels, 256 arguments), so that an
// absurd list is refused before its items are looked at.
const maxListItems = 1000

func listTooLong(n int) string {
	return fmt.Sprintf("has %d items; no list in a spec may have more than %d", n, maxListItems)
}

func sizeError(n int) ValidationErrors {
	return ValidationErrors{{Message: fmt.Sprintf("the document is %s; the limit is %s", humanSize(int64(n)), humanSize(MaxSpecBytes))}}
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func newerSchemaError(what string, got, current, line int) ValidationErrors {
	return ValidationErrors{{
		Path: "schema_version", Line: line,
		Message: fmt.Sprintf("this %s uses schema version %d, but this build of Accord understands versions up to %d; import it with a newer Accord", what, got, current),
	}}
}

// lineIndex maps field paths to the line where the field's value starts.
type lineIndex map[string]int

func (li lineIndex) set(path string, line int) {
	if _, ok := li[path]; !ok && line > 0 {
		li[path] = line
	}
}

// locate gives each error without a line the line of its field, or of the
// nearest enclosing field present in the document (a missing field is
// reported at its parent).
func (li lineIndex) locate(errs ValidationErrors) ValidationErrors {
	for i := range errs {
		if errs[i].Line != 0 {
			continue
		}
		for p := errs[i].Path; ; p = parentPath(p) {
			if line, ok := li[p]; ok {
				errs[i].Line = line
				break
			}
			if p == "" {
				break
			}
		}
	}
	return errs
}

// parentPath strips the last ".field" or "[i]" of a path.
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

var (
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

// isLeaf reports whether values of t are decoded as a whole: scalars and
// types with their own decoding (Duration, ByteSize).
func isLeaf(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(yamlUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Slice, reflect.Pointer, reflect.Map, reflect.Interface, reflect.Array:
		return false
	}
	return true
}

type fieldSet struct {
	byName map[string]reflect.StructField
	names  []string // in declaration order
}

var fieldSets sync.Map // reflect.Type+tag → *fieldSet

func fieldsOf(t reflect.Type, tag string) *fieldSet {
	key := t.String() + "/" + tag
	if fs, ok := fieldSets.Load(key); ok {
		return fs.(*fieldSet)
	}
	fs := &fieldSet{byName: map[string]reflect.StructField{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name := tagName(f, tag); name != "" {
			fs.byName[name] = f
			fs.names = append(fs.names, name)
		}
	}
	fieldSets.Store(key, fs)
	return fs
}

// unknownFieldMessage suggests the field the author probably meant.
func unknownFieldMessage(name string, fs *fieldSet) string {
	squash := func(s string) string {
		return strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(s))
	}
	best, bestDist := "", 3
	for _, known := range fs.names {
		if squash(known) == squash(name) {
			best, bestDist = known, 0
			break
		}
		if d := editDistance(name, known); d < bestDist && len(known) > 2 {
			best, bestDist = known, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown field; did you mean %s?", best)
	}
	names := append([]string(nil), fs.names...)
	sort.Strings(names)
	return "unknown field; allowed here: " + strings.Join(names, ", ")
}

// editDistance is the Levenshtein distance, for suggestions on short names.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// typeWord says in plain words what a leaf of type t must be.
func typeWord(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Duration]():
		return "a duration like 30s, 5m or 1h30m"
	case reflect.TypeFor[ByteSize]():
		return "a size like 4KiB, 1MiB or 10GiB"
	}
	switch t.Kind() {
	case reflect.String:
		return "text"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a value of type " + t.String()
}

func isIntKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// quoteShort quotes a value for a message, cut to a readable length.
func quoteShort(s string) string {
	const n = 40
	if len(s) > n {
		s = s[:n] + "…"
	}
	return fmt.Sprintf("%q", s)
}
