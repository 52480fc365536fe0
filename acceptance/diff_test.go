package acceptance

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDiffProfiles(t *testing.T) {
	t.Parallel()
	kv, _ := LookupProfileTemplate("kv-cache-lookup")
	old := kv.Spec
	next := old.Clone()
	next.Description = "Deeper queues."
	next.Steps[0].Fio.IODepth = 64
	next.Steps = append(next.Steps, StepSpec{Name: "settle", Kind: StepPause, Pause: &PauseStep{Duration: Duration(5 * time.Second)}})

	d, err := DiffProfiles(old, next)
	require.NoError(t, err)
	require.False(t, d.Equal())
	require.Equal(t, []Change{
		{Path: "description", Kind: FieldChanged, Old: old.Description, New: "Deeper queues."},
		{Path: "steps[0].fio.iodepth", Kind: FieldChanged, Old: "32", New: "64"},
		{Path: "steps[1].name", Kind: FieldAdded, New: "settle"},
		{Path: "steps[1].kind", Kind: FieldAdded, New: "pause"},
		{Path: "steps[1].pause.duration", Kind: FieldAdded, New: "5s"},
	}, d.Changes)
	require.Equal(t, `--- old
+++ new
@@ -1,6 +1,6 @@
 schema_version: 1
 name: KV-cache lookup (4 KiB random read, QD 32)
-description: 'Small random reads at queue depth 32: how an offloaded KV cache is looked up.'
+description: Deeper queues.
 purpose: storage-microbenchmark
 storage:
   transport: nvmeof-tcp
@@ -12,10 +12,14 @@
     fio:
       rw: randread
       block_size: 4KiB
-      iodepth: 32
+      iodepth: 64
       numjobs: 4
       size: 16GiB
       runtime: 1m0s
       ioengine: io_uring
       direct: true
       target: /mnt/accord/kvcache.dat
+  - name: settle
+    kind: pause
+    pause:
+      duration: 5s
`, d.Unified)

	// And back: the same fields, removed.
	back, err := DiffProfiles(next, old)
	require.NoError(t, err)
	require.Equal(t, Change{Path: "steps[1].pause.duration", Kind: FieldRemoved, Old: "5s"}, back.Changes[len(back.Changes)-1])
}

func TestDiffOfEqualVersions(t *testing.T) {
	t.Parallel()
	a, err := ImportProfileYAML([]byte(profileYAML))
	require.NoError(t, err)
	b, err := ImportProfileJSON([]byte(profileJSON))
	require.NoError(t, err)
	d, err := DiffProfiles(a, b)
	require.NoError(t, err)
	require.True(t, d.Equal())
	require.Empty(t, d.Changes)
	require.Equal(t, "", d.Unified)
}

func TestDiffGateSets(t *testing.T) {
	t.Parallel()
	old := validGateSet()
	next := old.Clone()
	next.Criteria[0].StopLoss = nil
	next.Criteria[1].Threshold = 30
	next.Criteria[1].Severity = Advisory
	d, err := DiffGateSets(old, next)
	require.NoError(t, err)
	require.Equal(t, []Change{
		{Path: "criteria[0].stop_loss", Kind: FieldRemoved, Old: "4"},
		{Path: "criteria[1].threshold", Kind: FieldChanged, Old: "25", New: "30"},
		{Path: "criteria[1].severity", Kind: FieldChanged, Old: "blocking", New: "advisory"},
	}, d.Changes)
}

// TestUnifiedDiffMatchesDiffU compares with diff(1) on inputs whose
// shortest edit is unique, so both tools must print the same hunks.
func TestUnifiedDiffMatchesDiffU(t *testing.T) {
	t.Parallel()
	diffBin, err := exec.LookPath("diff")
	if err != nil {
		t.Skip("diff(1) is not installed")
	}
	lines := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			b.WriteString(f(i) + "\n")
		}
		return b.String()
	}
	base := lines(30, func(i int) string { return "line " + strconv.Itoa(i) })
	cases := map[string][2]string{
		"one change in the middle": {base, strings.Replace(base, "line 15\n", "line fifteen\n", 1)},
		"two far apart":            {base, strings.Replace(strings.Replace(base, "line 3\n", "three\n", 1), "line 27\n", "", 1)},
		"two close together":       {base, strings.Replace(strings.Replace(base, "line 10\n", "ten\n", 1), "line 15\n", "fifteen\n", 1)},
		"insert at the start":      {base, "zero\n" + base},
		"append at the end":        {base, base + "thirty-one\n"},
		"from empty":               {"", "a\nb\n"},
		"to empty":                 {"a\nb\n", ""},
	}
	dir := t.TempDir()
	for name, c := range cases {
		oldFile := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".old")
		newFile := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".new")
		require.NoError(t, os.WriteFile(oldFile, []byte(c[0]), 0o600))
		require.NoError(t, os.WriteFile(newFile, []byte(c[1]), 0o600))
		out, _ := exec.Command(diffBin, "-u", oldFile, newFile).Output() // exit 1 means "differ"
		want := string(out)
		want = want[strings.Index(want, "\n@@")+1:] // drop the --- and +++ lines with their dates
		got := UnifiedDiff("a", "b", c[0], c[1], 3)
		require.True(t, strings.HasPrefix(got, "--- a\n+++ b\n"), name)
		require.Equal(t, want, strings.TrimPrefix(got, "--- a\n+++ b\n"), name)
	}
}

// TestUnifiedDiffApplies feeds random edits to patch(1): applying our diff
// to the old text must give the new one.
func TestUnifiedDiffApplies(t *testing.T) {
	t.Parallel()
	patchBin, err := exec.LookPath("patch")
	if err != nil {
		t.Skip("patch(1) is not installed")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"alpha", "beta", "gamma", "delta", "  - x", "k: v", ""}
	dir := t.TempDir()
	for round := 0; round < 40; round++ {
		var a []string
		for i := 0; i < 5+rng.IntN(60); i++ {
			a = append(a, words[rng.IntN(len(words))]+strconv.Itoa(rng.IntN(4)))
		}
		b := append([]string(nil), a...)
		for e := 0; e < 1+rng.IntN(8); e++ {
			switch i := rng.IntN(len(b) + 1); rng.IntN(3) {
			case 0:
				b = append(b[:i], append([]string{"new" + strconv.Itoa(e)}, b[i:]...)...)
			case 1:
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			case 2:
				if i < len(b) {
					b[i] = "changed" + strconv.Itoa(e)
				}
			}
		}
		oldText, newText := strings.Join(a, "\n")+"\n", strings.Join(b, "\n")+"\n"
		if len(b) == 0 {
			newText = ""
		}
		file := filepath.Join(dir, "f"+strconv.Itoa(round))
		require.NoError(t, os.WriteFile(file, []byte(oldText), 0o600))
		ud := UnifiedDiff("a", "b", oldText, newText, 1+rng.IntN(3))
		if oldText == newText {
			require.Equal(t, "", ud)
			continue
		}
		cmd := exec.Command(patchBin, "--quiet", "--force", file)
		cmd.Stdin = strings.NewReader(ud)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "round %d: %s\n%s", round, out, ud)
		got, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Equal(t, newText, string(got), "round %d:\n%s", round, ud)
	}
}

func TestDiffOpsLargeInputFallsBack(t *testing.T) {
	t.Parallel()
	// Beyond the LCS table's bound the middle is replaced wholesale: still a
	// correct edit script.
	var a, b []string
	for i := 0; i < 3000; i++ {
		a = append(a, "a"+strconv.Itoa(i))
		b = append(b, "b"+strconv.Itoa(i))
	}
	ops := diffOps(a, b)
	require.Len(t, ops, 6000)
	var rebuilt []string
	for _, o := range ops {
		if o.kind == opInsert {
			rebuilt = append(rebuilt, b[o.b])
		}
		if o.kind == opEqual {
			rebuilt = append(rebuilt, a[o.a])
		}
	}
	require.Equal(t, b, rebuilt)
}
