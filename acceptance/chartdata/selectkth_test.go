package chartdata

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSelectKthAgreesWithSort(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 10, 101, 5000} {
		for _, kind := range []string{"random", "sorted", "reversed", "equal", "two values"} {
			r := rand.New(rand.NewPCG(uint64(n), 1))
			v := make([]float64, n)
			for i := range v {
				v[i] = 100 * math.Exp(r.NormFloat64())
			}
			switch kind {
			case "sorted":
				slices.Sort(v)
			case "reversed":
				slices.Sort(v)
				slices.Reverse(v)
			case "equal":
				for i := range v {
					v[i] = 7
				}
			case "two values":
				for i := range v {
					v[i] = float64(i % 2)
				}
			}
			want := slices.Sorted(slices.Values(v))
			for _, k := range []int{0, n / 2, n * 99 / 100, n - 1} {
				require.Equal(t, want[k], selectKth(slices.Clone(v), k), "%s n=%d k=%d", kind, n, k)
			}
		}
	}
}
