package promtext

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPromParseErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{a="b"} 1`,
		`m{a="b} 1`,
		`m{a=b} 1`,
		`m one`,
		`m 1 2 3`,
		`m{a="b",} x`,
	} {
		_, err := Parse(bad)
		require.Error(t, err, bad)
	}
	d, err := Parse("m{a=\"b\",} 1\nm NaN\nm +Inf\n")
	require.NoError(t, err)
	require.Len(t, d.Samples, 3)
	require.True(t, math.IsNaN(d.Samples[1].Value))
}

func FuzzPromText(f *testing.F) {
	f.Add("# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{engine=\"0\"} 250\n")
	f.Add("m{a=\"\\\\\\n\\\"\"} -1e9 123\n# TYPE m counter\n")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		// Keys of what parses must parse back to the same series.
		for _, smp := range d.Samples {
			k := smp.Key()
			back, err := ParseSample(k + " 1")
			if err != nil {
				t.Fatalf("key %q of %q does not parse back: %v", k, s, err)
			}
			if back.Key() != k {
				t.Fatalf("key %q reparsed as %q", k, back.Key())
			}
		}
		_ = Delta(d, d)
	})
}

// Scrape reads a real HTTP server and refuses an error status with its
// code named.
func TestScrape(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		w.Write([]byte("up 1\n"))
	}))
	defer srv.Close()
	text, err := Scrape(context.Background(), srv.URL+"/metrics", time.Second)
	require.NoError(t, err)
	require.Equal(t, "up 1\n", text)
	_, err = Scrape(context.Background(), srv.URL+"/other", time.Second)
	require.ErrorContains(t, err, "HTTP 404")
	require.True(t, strings.HasPrefix(err.Error(), "scrape "+srv.URL))
}
