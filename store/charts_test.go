package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

func TestRunCharts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		st *store.Store
		f  runFixture
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		st := txStore(t)
		return &testBundle{st: st, f: newRunFixture(t, st)}
	}

	t.Run("SavingReplacesEveryDocument", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := b.f.run(t, b.st)
		none, err := b.st.RunCharts(ctx, run)
		require.NoError(t, err)
		require.Empty(t, none, "a run without aggregates has an empty map")

		require.NoError(t, b.st.SaveRunCharts(ctx, run, map[string]json.RawMessage{"meta": json.RawMessage(`{"version":1}`),
			"cdf:read|": json.RawMessage(`[1,2]`), "cdf:serve|c=8": json.RawMessage(`[3]`)}))
		require.NoError(t, b.st.SaveRunCharts(ctx, run, map[string]json.RawMessage{"meta": json.RawMessage(`{"version":2}`),
			"cdf:serve|c=8": json.RawMessage(`[4]`)}))
		all, err := b.st.RunCharts(ctx, run)
		require.NoError(t, err)
		require.Len(t, all, 2, "the earlier set is gone")
		require.JSONEq(t, `{"version":2}`, string(all["meta"]))

		cdfs, err := b.st.RunCharts(ctx, run, "cdf:%", "nothing")
		require.NoError(t, err)
		require.Equal(t, []string{"cdf:serve|c=8"}, keys(cdfs))
		require.JSONEq(t, `[4]`, string(cdfs["cdf:serve|c=8"]))
	})

	t.Run("OneDocumentOfManyRuns", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, c, without := b.f.run(t, b.st), b.f.run(t, b.st), b.f.run(t, b.st)
		require.NoError(t, b.st.SaveRunCharts(ctx, a, map[string]json.RawMessage{"hist": json.RawMessage(`"a"`), "meta": json.RawMessage(`{}`)}))
		require.NoError(t, b.st.SaveRunCharts(ctx, c, map[string]json.RawMessage{"hist": json.RawMessage(`"c"`)}))
		require.NoError(t, b.st.SaveRunCharts(ctx, without, map[string]json.RawMessage{"meta": json.RawMessage(`{}`)}))
		got, err := b.st.ChartOfRuns(ctx, []int64{a, c, without}, "hist")
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.JSONEq(t, `"a"`, string(got[a]))
		require.JSONEq(t, `"c"`, string(got[c]))
	})

	t.Run("ADocumentMustBeJSON", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := b.f.run(t, b.st)
		err := inSavepoint(b.st, func(tx *store.Store) error {
			return tx.SaveRunCharts(ctx, run, map[string]json.RawMessage{"meta": json.RawMessage(`{not json`)})
		})
		require.ErrorContains(t, err, "invalid input syntax for type json")
	})
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
