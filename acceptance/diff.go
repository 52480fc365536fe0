package acceptance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// What changed between two versions of a spec: field by field on the
// normalized form (so that formatting and omitted defaults never show up),
// and as a unified diff of the two YAML exports for reading.

// ChangeKind says how a field changed.
type ChangeKind string

const (
	FieldChanged ChangeKind = "changed"
	FieldAdded   ChangeKind = "added"
	FieldRemoved ChangeKind = "removed"
)

// Change is one field whose value differs. Old is empty when the field was
// added, New when it was removed. Values are written as in JSON, strings
// without quotes.
type Change struct {
	Path string     `json:"path"`
	Kind ChangeKind `json:"kind"`
	Old  string     `json:"old,omitempty"`
	New  string     `json:"new,omitempty"`
}

// SpecDiff is the difference between two versions of a spec.
type SpecDiff struct {
	OldDigest string   `json:"old_digest"`
	NewDigest string   `json:"new_digest"`
	Changes   []Change `json:"changes"`
	// Unified is a unified diff of the two YAML exports ("" when equal).
	Unified string `json:"unified"`
}

// Equal reports whether the two versions mean the same.
func (d SpecDiff) Equal() bool { return d.OldDigest == d.NewDigest }

// DiffProfiles compares two profile versions.
func DiffProfiles(oldSpec, newSpec ProfileSpec) (SpecDiff, error) {
	return diffSpecs(oldSpec.Normalized(), newSpec.Normalized(), "profile")
}

// DiffGateSets compares two gate set versions.
func DiffGateSets(oldSpec, newSpec GateSetSpec) (SpecDiff, error) {
	return diffSpecs(oldSpec.Normalized(), newSpec.Normalized(), "gate set")
}

func diffSpecs(a, b any, what string) (SpecDiff, error) {
	var d SpecDiff
	var err error
	ca, err := canonicalJSON(a)
	if err != nil {
		return d, fmt.Errorf("diff %s: old version: %w", what, err)
	}
	cb, err := canonicalJSON(b)
	if err != nil {
		return d, fmt.Errorf("diff %s: new version: %w", what, err)
	}
	d.OldDigest, d.NewDigest = digestOf(ca), digestOf(cb)

	// Flatten the struct-ordered encoding, so changes read in the order of
	// the form rather than alphabetically.
	ja, err := json.Marshal(a)
	if err != nil {
		return d, fmt.Errorf("diff %s: %w", what, err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return d, fmt.Errorf("diff %s: %w", what, err)
	}
	fa, err := flattenJSON(ja)
	if err != nil {
		return d, fmt.Errorf("diff %s: %w", what, err)
	}
	fb, err := flattenJSON(jb)
	if err != nil {
		return d, fmt.Errorf("diff %s: %w", what, err)
	}
	d.Changes = diffLeaves(fa, fb)

	ya, err := encodeYAML(a)
	if err != nil {
		return d, fmt.Errorf("diff %s: %w", what, err)
	}
	yb, err := encodeYAML(b)
	if err != nil {
		return d, fmt.Errorf("diff %s: %w", what, err)
	}
	d.Unified = UnifiedDiff("old", "new", string(ya), string(yb), 3)
	return d, nil
}

type flatLeaf struct{ path, value string }

// flattenJSON lists every scalar of a JSON document with its path, in
// document order. Empty lists and objects are leaves too.
func flattenJSON(b []byte) ([]flatLeaf, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out []flatLeaf
	if err := flattenValue(dec, "", &out); err != nil {
		return nil, err
	}
	return out, nil
}

func flattenValue(dec *json.Decoder, p string, out *[]flatLeaf) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := 0
		for ; dec.More(); n++ {
			child := specIndex(p, n)
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				child = specField(p, k.(string))
			}
			if err := flattenValue(dec, child, out); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
		if n == 0 {
			empty := "[]"
			if t == '{' {
				empty = "{}"
			}
			*out = append(*out, flatLeaf{p, empty})
		}
	case string:
		*out = append(*out, flatLeaf{p, t})
	case json.Number:
		*out = append(*out, flatLeaf{p, t.String()})
	case bool:
		*out = append(*out, flatLeaf{p, strconv.FormatBool(t)})
	case nil:
		*out = append(*out, flatLeaf{p, "null"})
	}
	return nil
}

// diffLeaves aligns the two path lists (so an added field shows where it
// belongs) and reports the differences.
func diffLeaves(a, b []flatLeaf) []Change {
	pa := make([]string, len(a))
	for i, l := range a {
		pa[i] = l.path
	}
	pb := make([]string, len(b))
	for i, l := range b {
		pb[i] = l.path
	}
	var out []Change
	for _, o := range diffOps(pa, pb) {
		switch o.kind {
		case opEqual:
			if a[o.a].value != b[o.b].value {
				out = append(out, Change{Path: a[o.a].path, Kind: FieldChanged, Old: a[o.a].value, New: b[o.b].value})
			}
		case opDelete:
			out = append(out, Change{Path: a[o.a].path, Kind: FieldRemoved, Old: a[o.a].value})
		case opInsert:
			out = append(out, Change{Path: b[o.b].path, Kind: FieldAdded, New: b[o.b].value})
		}
	}
	return out
}

type opKind byte

const (
	opEqual  opKind = ' '
	opDelete opKind = '-'
	opInsert opKind = '+'
)

// op is one step of an edit script: a[a] kept as b[b], a[a] deleted, or
// b[b] inserted.
type editOp struct {
	kind opKind
	a, b int
}

// maxLCSCells bounds the memory of the LCS table (4 bytes a cell). Beyond
// it, the differing middle is shown as deleted then inserted: still a
// correct diff, only a longer one.
const maxLCSCells = 4 << 20

// diffOps returns an edit script turning a into b, from a longest common
// subsequence after trimming the common prefix and suffix.
func diffOps(a, b []string) []editOp {
	var ops []editOp
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		ops = append(ops, editOp{opEqual, pre, pre})
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	if n > 0 && m > 0 && (n+1)*(m+1) <= maxLCSCells {
		// lcs[i*(m+1)+j] is the LCS length of ma[i:] and mb[j:].
		lcs := make([]int32, (n+1)*(m+1))
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i*(m+1)+j] = lcs[(i+1)*(m+1)+j+1] + 1
				} else {
					lcs[i*(m+1)+j] = max(lcs[(i+1)*(m+1)+j], lcs[i*(m+1)+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n && j < m {
			switch {
			case ma[i] == mb[j]:
				ops = append(ops, editOp{opEqual, pre + i, pre + j})
				i++
				j++
			case lcs[(i+1)*(m+1)+j] >= lcs[i*(m+1)+j+1]:
				ops = append(ops, editOp{opDelete, pre + i, -1})
				i++
			default:
				ops = append(ops, editOp{opInsert, -1, pre + j})
				j++
			}
		}
		for ; i < n; i++ {
			ops = append(ops, editOp{opDelete, pre + i, -1})
		}
		for ; j < m; j++ {
			ops = append(ops, editOp{opInsert, -1, pre + j})
		}
	} else {
		for i := 0; i < n; i++ {
			ops = append(ops, editOp{opDelete, pre + i, -1})
		}
		for j := 0; j < m; j++ {
			ops = append(ops, editOp{opInsert, -1, pre + j})
		}
	}
	for k := 0; k < suf; k++ {
		ops = append(ops, editOp{opEqual, len(a) - suf + k, len(b) - suf + k})
	}
	return ops
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// UnifiedDiff returns the unified diff of two texts with the given lines of
// context, or "" when they are equal.
func UnifiedDiff(oldName, newName, oldText, newText string, context int) string {
	a, b := splitLines(oldText), splitLines(newText)
	ops := diffOps(a, b)
	var changes []int // indexes into ops of non-equal steps
	for i, o := range ops {
		if o.kind != opEqual {
			changes = append(changes, i)
		}
	}
	if len(changes) == 0 {
		return ""
	}
	// aBefore[k] and bBefore[k] count the lines of each side before ops[k].
	aBefore := make([]int, len(ops)+1)
	bBefore := make([]int, len(ops)+1)
	for i, o := range ops {
		aBefore[i+1], bBefore[i+1] = aBefore[i], bBefore[i]
		if o.kind != opInsert {
			aBefore[i+1]++
		}
		if o.kind != opDelete {
			bBefore[i+1]++
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", oldName, newName)
	for k := 0; k < len(changes); {
		// A hunk runs from context before its first change to context after
		// its last, merging changes closer than twice the context.
		start := max(changes[k]-context, 0)
		end := changes[k]
		for k < len(changes) && changes[k] <= end+2*context+1 {
			end = changes[k]
			k++
		}
		end = min(end+context, len(ops)-1)
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n",
			hunkRange(aBefore[start], aBefore[end+1]-aBefore[start]),
			hunkRange(bBefore[start], bBefore[end+1]-bBefore[start]))
		for _, o := range ops[start : end+1] {
			switch o.kind {
			case opEqual:
				sb.WriteString(" " + a[o.a] + "\n")
			case opDelete:
				sb.WriteString("-" + a[o.a] + "\n")
			case opInsert:
				sb.WriteString("+" + b[o.b] + "\n")
			}
		}
	}
	return sb.String()
}

// hunkRange writes "start,count" as diff(1) does: 1-based, the count left
// out when it is 1, and an empty range named by the line before it.
func hunkRange(before, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", before)
	case 1:
		return strconv.Itoa(before + 1)
	}
	return fmt.Sprintf("%d,%d", before+1, count)
}
