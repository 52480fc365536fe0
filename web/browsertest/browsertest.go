// Package browsertest drives Debian's Chromium, headless, for Accord's
// browser tests: one Chromium per test binary, and for each test a tab in
// a browser context no other test uses meanwhile, wiped of what an earlier
// test left, that records everything the test must check afterwards:
// console errors, uncaught exceptions, Content Security Policy violations,
// and every URL the page requested. A package that uses it calls Close
// from its TestMain.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Browser is the test's tab of the package's headless Chromium, in a
// browser context no other test uses meanwhile.
type Browser struct {
	Ctx context.Context
	t   testing.TB

	mu       sync.Mutex
	console  []chromedp.ConsoleMessage
	requests []string
}

// ChromiumPath finds Debian's Chromium: ACCORD_CHROMIUM if set, else the
// headless shell (chromium-headless-shell: the browser's engine without its
// windows, about half the CPU for the same pages), else the full browser.
func ChromiumPath() (string, error) {
	if p := os.Getenv("ACCORD_CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	for _, p := range []string{"/usr/bin/chromium-headless-shell", "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("chromium is not installed (Debian: apt-get install chromium-headless-shell)")
}

// WindowWidth and WindowHeight are the size of every tab's window.
const WindowWidth, WindowHeight = 1366, 900

// shared is the test binary's one Chromium, started by the first New and
// stopped by Close (from the package's TestMain), with the tabs tests gave
// back. On this machine starting Chromium costs about 3 CPU-seconds and a
// tab in a new browser context about 2 (a renderer process of its own), as
// much as a short browser test's pages: tests take a tab a finished test
// left, wiped, and open one only when none is free.
var shared struct {
	mu      sync.Mutex
	ctx     context.Context // the browser's first tab: its context holds the browser
	cancel  func()
	dataDir string
	free    []*tab
}

// tab is one tab, in a browser context of its own, that passes from test
// to test; its events go to the Browser of the test holding it.
type tab struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	owner *Browser
}

func browser() (context.Context, error) {
	if shared.ctx != nil {
		return shared.ctx, nil
	}
	path, err := ChromiumPath()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "accord-chromium-")
	if err != nil {
		return nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(WindowWidth, WindowHeight),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	if err := chromedp.Do(ctx); err != nil {
		cancelCtx()
		cancelAlloc()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	shared.ctx, shared.dataDir = ctx, dir
	shared.cancel = func() {
		cancelCtx()
		cancelAlloc()
	}
	return ctx, nil
}

// Close stops the package's Chromium, if one was started, and removes its
// profile. Call it from TestMain after m.Run.
func Close() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.ctx == nil {
		return
	}
	for _, tb := range shared.free {
		tb.cancel()
	}
	shared.free = nil
	shared.cancel()
	os.RemoveAll(shared.dataDir)
	shared.ctx = nil
}

// takeTab gives a free tab, or opens one in a new browser context.
func takeTab() (*tab, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if n := len(shared.free); n > 0 {
		tb := shared.free[n-1]
		shared.free = shared.free[:n-1]
		return tb, nil
	}
	parent, err := browser()
	if err != nil {
		return nil, err
	}
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	tb := &tab{ctx: ctx, cancel: cancel}
	// Open the tab and subscribe before any navigation.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("open a tab: %w", err)
	}
	console := chromedp.Console(ctx)
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			tb.record(func(b *Browser) { b.console = append(b.console, m) })
		}
	}()
	go func() {
		for ev, err := range requests {
			if err != nil {
				return
			}
			tb.record(func(b *Browser) { b.requests = append(b.requests, ev.Request.URL) })
		}
	}()
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		cancel()
		return nil, fmt.Errorf("enable network events: %w", err)
	}
	return tb, nil
}

// record hands an event to the test holding the tab (none: dropped).
func (tb *tab) record(add func(*Browser)) {
	tb.mu.Lock()
	b := tb.owner
	tb.mu.Unlock()
	if b != nil {
		b.mu.Lock()
		add(b)
		b.mu.Unlock()
	}
}

// giveBack wipes the tab for the next test, as a new browser context
// would be: a blank page (the last one's scripts and connections stop),
// no cookies, no cache, no emulated screen or media. A tab of a failed
// test, or one that cannot be wiped, is closed instead.
func (tb *tab) giveBack(failed bool) {
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	err := errors.New("the test failed")
	if !failed {
		err = chromedp.Do(ctx, chromedp.Navigate("about:blank"))
		for _, wipe := range []func() error{
			func() error { _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); return err },
			func() error { _, err := chromedp.Call(ctx, network.ClearBrowserCache, cdp.Empty{}); return err },
			func() error {
				_, err := chromedp.Call(ctx, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
				return err
			},
			func() error {
				_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})
				return err
			},
		} {
			if err == nil {
				err = wipe()
			}
		}
	}
	tb.mu.Lock()
	tb.owner = nil
	tb.mu.Unlock()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if err != nil || shared.ctx == nil {
		tb.cancel()
		return
	}
	shared.free = append(shared.free, tb)
}

// Main runs a package's tests and then stops its Chromium: call it as the
// package's TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Close()
	os.Exit(code)
}

// New gives the test a tab of its own until it ends: a browser context no
// other test uses meanwhile, with no cookies, cache or page of an earlier
// test.
func New(t testing.TB) *Browser {
	t.Helper()
	tb, err := takeTab()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 4*time.Minute)
	b := &Browser{Ctx: ctx, t: t}
	tb.mu.Lock()
	tb.owner = b
	tb.mu.Unlock()
	t.Cleanup(func() {
		cancel()
		tb.giveBack(t.Failed())
	})
	return b
}

// Do runs actions and fails the test on error, with a screenshot.
func (b *Browser) Do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.Ctx, actions...); err != nil {
		b.Screenshot("failure-" + sanitize(b.t.Name()))
		b.t.Fatalf("browser: %v (problems so far: %v)", err, b.Problems())
	}
}

// ClickAndWait clicks an element that loads a new page (a link, a form's
// submit button) and waits for that page, so that later queries never
// see the old document while it unloads.
func (b *Browser) ClickAndWait(css string) {
	b.t.Helper()
	if _, err := chromedp.RunResponse(b.Ctx, chromedp.Click(chromedp.CSS(css))); err != nil {
		b.Screenshot("failure-" + sanitize(b.t.Name()))
		b.t.Fatalf("browser: click %s: %v (problems so far: %v)", css, err, b.Problems())
	}
}

// Text returns the visible text of the first element matching a CSS selector.
func (b *Browser) Text(css string) string {
	b.t.Helper()
	text, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.CSS(css)))
	// A page that reloads itself can replace the document between finding
	// the node and reading it; the node id is then stale. Look again (a
	// few times) in the new document.
	for try := 0; staleNode(err) && try < 10; try++ {
		time.Sleep(200 * time.Millisecond)
		text, err = chromedp.Run(b.Ctx, chromedp.Text(chromedp.CSS(css)))
	}
	if err != nil {
		b.Screenshot("failure-" + sanitize(b.t.Name()))
		b.t.Fatalf("browser: text of %s: %v", css, err)
	}
	return text
}

// staleNode says that a node id found a moment ago belongs to a document
// that has been replaced meanwhile (a page that reloads or swaps itself,
// or DevTools catching up with a navigation on a loaded machine).
func staleNode(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "No node with given id") || strings.Contains(err.Error(), "Could not find node with given id"))
}

// SetValues sets form fields by id, in pairs (id, value, id, value…),
// looking each field up again if its node went stale before it was set.
func (b *Browser) SetValues(pairs ...string) {
	b.t.Helper()
	if len(pairs)%2 != 0 {
		b.t.Fatalf("browser: SetValues takes id and value pairs, got %d strings", len(pairs))
	}
	for i := 0; i < len(pairs); i += 2 {
		set := chromedp.SetValue(chromedp.ID(pairs[i]), pairs[i+1])
		err := chromedp.Do(b.Ctx, set)
		for try := 0; staleNode(err) && try < 10; try++ {
			time.Sleep(200 * time.Millisecond)
			err = chromedp.Do(b.Ctx, set)
		}
		if err != nil {
			b.Screenshot("failure-" + sanitize(b.t.Name()))
			b.t.Fatalf("browser: set #%s: %v (problems so far: %v)", pairs[i], err, b.Problems())
		}
	}
}

// Eval evaluates JavaScript through DevTools (not affected by the page's CSP).
func Eval[T any](b *Browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("browser: evaluate %q: %v", js, err)
	}
	return v
}

// WaitUntil polls a JavaScript expression until it gives "" (the condition
// holds; any other string says what is still missing), through navigations
// the page makes by itself (an evaluation during a reload fails and is
// simply tried again), and fails the test after timeout with the last
// answer.
func (b *Browser) WaitUntil(js string, timeout time.Duration, what string) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(b.Ctx, 5*time.Second)
		missing, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		cancel()
		if err == nil && missing == "" {
			return
		}
		if time.Now().After(deadline) {
			b.Screenshot("failure-" + sanitize(b.t.Name()))
			b.t.Fatalf("browser: waited %s for %s (last answer %q, error %v; problems so far: %v)", timeout, what, missing, err, b.Problems())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Problems returns console errors, exceptions and CSP violations so far.
// Give it a moment after the last action: console events arrive
// asynchronously.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.console {
		text := strings.ToLower(m.Text)
		if m.IsException() || m.Type == "error" || m.Type == "assert" ||
			strings.Contains(text, "content security policy") || strings.Contains(text, "refused to") {
			out = append(out, fmt.Sprintf("%s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1))
		}
	}
	return out
}

// Requests returns every URL the page requested.
func (b *Browser) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}

// ForeignRequests returns the requests that went anywhere but origin
// (data: URLs excepted).
func (b *Browser) ForeignRequests(origin string) []string {
	base, _ := url.Parse(origin)
	var out []string
	for _, r := range b.Requests() {
		u, err := url.Parse(r)
		if err != nil || u.Scheme == "data" || u.Scheme == "blob" {
			continue
		}
		if u.Host != base.Host || u.Scheme != base.Scheme {
			out = append(out, r)
		}
	}
	return out
}

// Screenshot saves a PNG of the whole page under the test artifacts folder
// (ACCORD_TEST_ARTIFACTS, default test-artifacts/ at the repository root)
// and returns its path.
func (b *Browser) Screenshot(name string) string {
	// Quality 100 makes a PNG; anything less a JPEG.
	buf, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	dir := ArtifactsDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(dir, sanitize(name)+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	return path
}

// ArtifactsDir is where browser tests save screenshots and downloads.
func ArtifactsDir() string {
	if d := os.Getenv("ACCORD_TEST_ARTIFACTS"); d != "" {
		return d
	}
	// Walk up to the module root.
	dir, _ := os.Getwd()
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "test-artifacts")
		}
	}
	return filepath.Join(os.TempDir(), "accord-test-artifacts")
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, s)
}
