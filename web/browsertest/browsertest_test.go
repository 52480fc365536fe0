package browsertest

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Close()
	os.Exit(code)
}

// cookieServer answers with the cookie "who" it was sent ("none" without
// one); /set?who=X sets it.
func cookieServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("who"); v != "" {
			http.SetCookie(w, &http.Cookie{Name: "who", Value: v, Path: "/"})
		}
		seen := "none"
		if c, err := r.Cookie("who"); err == nil {
			seen = c.Value
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>t</title><p id="seen">` + seen + `</p>`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Tests share one Chromium and pass tabs on, so each test's tab must be as
// apart from the others as a fresh profile: tabs held at the same time do
// not share cookies, and a tab a finished test gave back keeps neither its
// cookies nor its emulated screen.
func TestTabsShareNothingButTheBrowser(t *testing.T) {
	srv := cookieServer(t)
	seen := func(b *Browser, path string) string {
		b.Do(chromedp.Navigate(srv.URL + path))
		return b.Text("#seen")
	}

	first, second := New(t), New(t)
	if got := seen(first, "/set?who=first"); got != "none" {
		t.Fatalf("a new tab was sent a cookie: %q", got)
	}
	if got := seen(first, "/"); got != "first" {
		t.Fatalf("the first tab does not keep its own cookie: %q", got)
	}
	if got := seen(second, "/"); got != "none" {
		t.Fatalf("the second tab was sent the first tab's cookie: %q", got)
	}

	// A finished test's tab is the next test's.
	t.Run("leaves a cookie and a narrow screen", func(t *testing.T) {
		b := New(t)
		seen(b, "/set?who=earlier")
		if _, err := chromedp.Call(b.Ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 703, Height: 1000, DeviceScaleFactor: 1}); err != nil {
			t.Fatal(err)
		}
		if w := Eval[int](b, "window.innerWidth"); w != 703 {
			t.Fatalf("emulated width %d", w)
		}
	})
	shared.mu.Lock()
	reused := len(shared.free) == 1
	shared.mu.Unlock()
	if !reused {
		t.Fatal("the finished test's tab was not given back")
	}
	t.Run("takes the tab it left", func(t *testing.T) {
		b := New(t)
		if got := seen(b, "/"); got != "none" {
			t.Fatalf("the tab kept an earlier test's cookie: %q", got)
		}
		if w := Eval[int](b, "window.innerWidth"); w != WindowWidth {
			t.Fatalf("window %d wide, want %d", w, WindowWidth)
		}
		for _, r := range b.Requests() {
			if strings.Contains(r, "earlier") || r == "about:blank" {
				t.Fatalf("the test was given an earlier test's requests: %v", b.Requests())
			}
		}
	})
}
