package acceptance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDigestIgnoresFormattingAndDefaults(t *testing.T) {
	t.Parallel()
	fromYAML, err := ImportProfileYAML([]byte(profileYAML))
	require.NoError(t, err)
	fromJSON, err := ImportProfileJSON([]byte(profileJSON))
	require.NoError(t, err)
	// The same profile written differently: other key order, flow style,
	// other spellings of the same quantities, defaults written out.
	rewritten, err := ImportProfileYAML([]byte(`
steps:
  - fio: {target: /mnt/nvme/accord.dat, direct: true, runtime: 60s, size: 10240MiB,
          iodepth: 32, block_size: 4096, rw: randread, numjobs: 1, ioengine: libaio}
    kind: fio
    name: randread
warmup: 10000ms
storage: {transport: nvmeof-tcp}
purpose: storage-microbenchmark
repetitions: 3
schema_version: 1
name: KV lookups
`))
	require.NoError(t, err)

	want, err := ProfileDigest(fromYAML)
	require.NoError(t, err)
	for _, p := range []ProfileSpec{fromJSON, rewritten} {
		got, err := ProfileDigest(p)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}

	// Any change of meaning changes it.
	changed := fromYAML.Clone()
	changed.Steps[0].Fio.IODepth = 64
	other, err := ProfileDigest(changed)
	require.NoError(t, err)
	require.NotEqual(t, want, other)
}

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	g := GateSetSpec{Name: "a <b> & c", Criteria: []Criterion{{Name: "x", Metric: MetricTTFT, Statistic: StatP99, Comparator: LessOrEqual, Threshold: 0.1, Unit: "s"}}}
	b, err := GateSetCanonicalJSON(g)
	require.NoError(t, err)
	require.Equal(t, `{"correction":"holm","criteria":[{"comparator":"<=","confidence":0.95,"metric":"ttft","mode":"absolute","name":"x","severity":"blocking","statistic":"p99","threshold":0.1,"unit":"s"}],"name":"a <b> & c","schema_version":1,"stop_loss_consecutive":3}`, string(b))

	// The digest is the SHA-256 of exactly these bytes.
	sum := sha256.Sum256(b)
	d, err := GateSetDigest(g)
	require.NoError(t, err)
	require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), d)

	// The canonical form decodes back to the same spec.
	var back GateSetSpec
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, g.Normalized(), back)
}

func TestDigestOfUnencodableSpec(t *testing.T) {
	t.Parallel()
	// NaN has no JSON form: the digest says so instead of hashing garbage.
	g := validGateSet()
	g.Criteria[0].Threshold = math.NaN()
	_, err := GateSetDigest(g)
	require.ErrorContains(t, err, `canonical gate set "Latency and uplift"`)
}
