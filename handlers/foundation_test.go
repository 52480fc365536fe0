package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/accordlab/accord/web/htmltest"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/static"
)

func TestHealthReadinessAndMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)

	res, body := b.get(t, c, "/healthz")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "ok\n", body)

	res, body = b.get(t, c, "/readyz")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.JSONEq(t, `{"ready":true,"database":"ok","migrations":"current"}`, body)

	b.get(t, c, "/")
	b.get(t, c, "/no-such-page")
	res, body = b.get(t, c, "/metrics")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, `accord_http_requests_total{code="200",method="GET",route="/"}`)
	require.Contains(t, body, `accord_http_requests_total{code="404",method="GET",route="unmatched"}`)
	require.Contains(t, body, `accord_http_request_duration_seconds_bucket{method="GET",route="/healthz"`)
}

func TestSecurityHeadersOnEveryPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	for _, path := range []string{"/", "/signin", "/help", "/no-such-page"} {
		res, _ := b.get(t, c, path)
		h := res.Header
		require.Equal(t, contentSecurityPolicy, h.Get("Content-Security-Policy"), path)
		require.Contains(t, h.Get("Content-Security-Policy"), "script-src 'self';")
		require.NotContains(t, h.Get("Content-Security-Policy"), "unsafe-inline")
		require.Equal(t, "DENY", h.Get("X-Frame-Options"))
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
		require.Equal(t, "same-origin", h.Get("Referrer-Policy"))
		require.NotEmpty(t, h.Get("X-Request-Id"))
	}
}

func TestErrorPagesLeakNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	res, body := b.get(t, c, "/no-such-page")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Contains(t, body, "There is nothing here.")
	require.Contains(t, body, res.Header.Get("X-Request-Id"))

	// A panic becomes the 500 page without the panic's text.
	b.server.handler = b.server.withRecovery(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("secret internal detail: password=hunter2")
	}))
	res, body = b.get(t, c, "/")
	require.Equal(t, http.StatusInternalServerError, res.StatusCode)
	require.Contains(t, body, "Something went wrong on our side.")
	require.NotContains(t, body, "hunter2")
	require.NotContains(t, body, "goroutine")
}

func TestStaticFilesAreHashedAndCachedForever(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	for _, name := range []string{"css/app.css", "js/charts.js", "vendor/htmx.min.js", "vendor/echarts.min.js"} {
		require.True(t, static.Has(name), "%s must be embedded (run make assets)", name)
		u := static.URL(name)
		require.NotEqual(t, "/static/"+name, u, "hashed URL for %s", name)
		res, body := b.get(t, c, u)
		require.Equal(t, http.StatusOK, res.StatusCode, u)
		require.Equal(t, "public, max-age=31536000, immutable", res.Header.Get("Cache-Control"))
		require.NotEmpty(t, body)
	}
	// A made-up hash is not served.
	res, _ := b.get(t, c, "/static/css/app.00000000.css")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	// The layout links the hashed URLs.
	_, body := b.get(t, c, "/")
	require.Contains(t, body, static.URL("vendor/htmx.min.js"))
	require.False(t, strings.Contains(body, "<script>"), "no inline script")
}

func TestCompression(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req, _ := http.NewRequest(http.MethodGet, b.ts.URL+"/help", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	res, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, "gzip", res.Header.Get("Content-Encoding"))
}

// The help page says what the probe collects on a lab host: the vendor
// tools, the exporters a profile may name, the counters and drive wear.
func TestHelpSaysWhatTheProbeCollects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, body := b.get(t, b.client(t), "/help")
	require.Equal(t, http.StatusOK, res.StatusCode)
	section := htmltest.Text(htmltest.ByID(htmltest.Parse(t, body), "probe-collects").Parent)
	for _, want := range []string{"amd-smi", "npu-smi", "nvidia-smi topo -m", "telemetry.exporters", "DCGM exporter", "RDMA retransmits", "nvme smart-log", "drive_writes_per_day", "SGLang"} {
		require.Contains(t, section, want)
	}
}
