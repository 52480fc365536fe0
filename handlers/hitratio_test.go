package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/acceptance/chartdata"
	"github.com/accordlab/accord/runners/probe/emulator"
	"github.com/accordlab/accord/runners/probe/emulator/emulatortest"
	"github.com/accordlab/accord/store"
)

// Prompts of reuseSweepProfile: 128 words (the emulator's tokens), in
// blocks of 16; the shares make whole blocks shared (0.5: 4 blocks,
// 0.875: 7).
const (
	reusePromptTokens = 128
	reuseBlockTokens  = 16
)

var reuseShares = []float64{0, 0.5, 0.875}

// reuseSweepProfile sweeps prefix reuse against endpoint, reading the
// emulator's prefix cache counters.
func reuseSweepProfile(endpoint string) acceptance.ProfileSpec {
	return acceptance.ProfileSpec{
		SchemaVersion: acceptance.ProfileSchemaVersion, Name: "hit ratio", Purpose: acceptance.PurposeInferenceServing,
		Storage: acceptance.Storage{Transport: acceptance.TransportEmulated}, Repetitions: 1, Warmup: acceptance.Duration(200 * time.Millisecond),
		Steps: []acceptance.StepSpec{{Name: "reuse", Kind: acceptance.StepInference, Inference: &acceptance.InferenceStep{
			Endpoint: endpoint, Model: "emulated", API: "chat",
			PromptTokens: acceptance.TokenDist{Dist: "fixed", Mean: reusePromptTokens}, OutputTokens: acceptance.TokenDist{Dist: "fixed", Mean: 2},
			Prefix:     &acceptance.PrefixReuse{Distinct: 2, Sweep: reuseShares},
			Load:       acceptance.Load{Mode: "concurrency", Concurrency: 2},
			Requests:   12,
			MetricsURL: strings.TrimSuffix(endpoint, "/v1") + "/metrics",
			Seed:       5,
		}}},
	}.Normalized()
}

// reuseEmulator is an emulator whose prefill costs perToken of compute for
// every prompt token its prefix cache (large enough to keep every prefix)
// does not hold, after reading the missing blocks from a KV file.
func reuseEmulator(t *testing.T, perToken time.Duration) string {
	t.Helper()
	return emulatortest.Serve(t, emulator.Config{KVFile: filepath.Join(t.TempDir(), "kv.bin"), KVFileSize: 8 << 20, BlockBytes: 64 << 10,
		BlockTokens: reuseBlockTokens, CacheBlocks: 4096, PrefillPerToken: perToken, ITL: time.Millisecond, DefaultMaxTokens: 2, Seed: 3}, nil)
}

// A real probe run of a prefix-reuse sweep against the emulator: the hit
// ratio the server's counters measured rises with the share (bounded by
// the blocks the share makes shared, less the first request of each
// prefix), and TTFT falls with it, as the emulator's prefill, paid only
// for what its cache does not hold, makes it. The run page draws TTFT
// against the measured ratio beside the baseline's, and the compare page
// both runs' curves; every point is the stored statistic.
func TestReuseSweepAgainstTheEmulator(t *testing.T) {
	t.Parallel()
	cb := setupCharts(t)
	ctx := context.Background()
	save := func(perToken time.Duration) (int64, time.Duration) {
		p := reuseSweepProfile(reuseEmulator(t, perToken))
		require.Empty(t, acceptance.ValidateProfile(p))
		_, nv, _, err := prepareSpec(profileOps, p)
		require.NoError(t, err)
		_, pv, err := cb.store.CreateSpec(ctx, store.KindProfile, cb.programID, nv)
		require.NoError(t, err)
		return pv.ID, perToken
	}
	slowVersion, slowCost := save(3 * time.Millisecond)
	fastVersion, fastCost := save(2 * time.Millisecond)
	base := cb.labRun(t, labRunOpts{profileVersion: slowVersion, label: "local NVMe"})
	cand := cb.labRun(t, labRunOpts{profileVersion: fastVersion, label: "NVMe-oF", baseline: &base})

	curves := map[int64]chartdata.HitRatioCurve{}
	for run, perToken := range map[int64]time.Duration{base: slowCost, cand: fastCost} {
		docs, err := cb.store.RunCharts(ctx, run, chartdata.KeyMeta, chartdata.KeySummary)
		require.NoError(t, err)
		a, ok, err := chartdata.Decode(docs)
		require.NoError(t, err)
		require.True(t, ok)
		c, ok := chartdata.HitRatioCurveOf(a, "reuse")
		require.True(t, ok)
		require.Empty(t, c.Left, "every level has a measured ratio")
		require.Len(t, c.Points, 3)
		for i, p := range c.Points {
			share := reuseShares[i]
			require.Equal(t, acceptance.ReuseLevel(share), p.Level, "run %d: the ratio rises with the share", run)
			// At most the whole blocks the share makes shared; at least that
			// for every request but the first of each of the 2 prefixes and
			// the one sent beside it (2 streams): 4 at most miss, of the
			// level's measured requests and its warm-up ones.
			most := float64(int(share*reusePromptTokens)/reuseBlockTokens*reuseBlockTokens) / reusePromptTokens
			require.LessOrEqual(t, p.HitRatio, most, "run %d %s", run, p.Level)
			require.GreaterOrEqual(t, p.HitRatio, most*float64(p.N-4)/float64(p.N), "run %d %s", run, p.Level)
			// TTFT includes the prefill of every token not cached: at least
			// that at the median (the first requests pay more).
			uncached := time.Duration(float64(reusePromptTokens)*(1-most)) * perToken
			require.GreaterOrEqual(t, p.P50, float64(uncached.Milliseconds()), "run %d %s: the prefill by construction", run, p.Level)
			if i > 0 {
				require.Less(t, p.P50, c.Points[i-1].P50, "run %d: TTFT falls as the hit ratio rises", run)
			}
		}
		require.Zero(t, c.Points[0].HitRatio, "nothing is shared at share 0")
		for _, p := range c.Points {
			t.Logf("run %d (%v a token) %s: hit ratio %.3f, TTFT p50 %.1f ms, p99 %.1f ms, n %d", run, perToken, p.Level, p.HitRatio, p.P50, p.P99, p.N)
		}
		curves[run] = c
	}

	// The run page: the chart in place of a knee, both runs' points.
	res, body := cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/runs/%d", cand)))
	require.Equal(t, http.StatusOK, res.StatusCode)
	charts := pageCharts(t, body)
	require.NotContains(t, charts, "chart-knee-0", "a reuse sweep is not a load sweep")
	hr, ok := charts["chart-hitratio-0"]
	require.True(t, ok, "the hit-ratio chart: %v", keysOf(charts))
	require.Equal(t, []string{fmt.Sprintf("TTFT p99 run #%d", cand), fmt.Sprintf("TTFT p50 run #%d", cand),
		fmt.Sprintf("TTFT p99 baseline run #%d", base), fmt.Sprintf("TTFT p50 baseline run #%d", base)}, hr.names())
	for k, run := range []int64{cand, cand, base, base} {
		for j, raw := range hr.Series[k].Data {
			var it struct {
				Name  string     `json:"name"`
				Value [2]float64 `json:"value"`
			}
			require.NoError(t, json.Unmarshal(raw, &it))
			p := curves[run].Points[j]
			require.Equal(t, p.Level, it.Name)
			require.InDelta(t, p.HitRatio*100, it.Value[0], 1e-3)
			want := p.P99
			if k%2 == 1 {
				want = p.P50
			}
			require.InDelta(t, want, it.Value[1], want*1e-5)
		}
	}
	rows := blockTable(t, body, "chart-hitratio-0")
	require.Equal(t, []string{"Series", "Level", "Hit ratio (%)", "TTFT p50 (ms)", "TTFT p99 (ms)", "Requests"}, rows[0])
	require.Len(t, rows, 7)
	require.Contains(t, body, "the prefix cache hit ratio the inference server&#39;s own counters measured")

	// The compare page: a curve per run for the reuse step.
	res, body = cb.get(t, cb.viewer, cb.url(fmt.Sprintf("/compare?run=%d&run=%d&series=reuse%%7Creuse%%3D0", base, cand)))
	require.Equal(t, http.StatusOK, res.StatusCode)
	charts = pageCharts(t, body)
	cmp, ok := charts["chart-compare-hitratio"]
	require.True(t, ok, "the compare page's hit-ratio chart: %v", keysOf(charts))
	require.Len(t, cmp.Series, 4, "p99 and p50 of each run")
	require.Contains(t, cmp.Series[0].Name, fmt.Sprintf("run #%d", base))
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
