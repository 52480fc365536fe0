package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reading an uploaded report bundle (the Verify page, the report import)
// costs, while it lasts, the upload waiting on disk (up to 1 GiB), up to
// 8 MiB of memory and 256 MiB of temporary space for its metadata files
// (attest.DefaultLimits), and a core. bundleGate bounds how many are read
// at once: one per user, maxBundleReads in all. A request past either is
// refused at once, before its body is read, with Retry-After: 429 when the
// user has one going, 503 when the installation is at its limit.
type bundleGate struct {
	slots chan struct{}
	mu    sync.Mutex
	users map[int64]bool
}

const (
	// maxBundleReads is how many bundles the installation reads at once.
	maxBundleReads = 4
	// bundleRetryAfter is the Retry-After of a refused bundle read, in
	// seconds.
	bundleRetryAfter = 10
)

func newBundleGate(n int) *bundleGate {
	return &bundleGate{slots: make(chan struct{}, n), users: map[int64]bool{}}
}

// enter takes a slot for user; it returns the slot's release, or the
// status of the refusal (429 or 503).
func (g *bundleGate) enter(user int64) (release func(), status int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.users[user] {
		return nil, http.StatusTooManyRequests
	}
	select {
	case g.slots <- struct{}{}:
	default:
		return nil, http.StatusServiceUnavailable
	}
	g.users[user] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			delete(g.users, user)
			g.mu.Unlock()
			<-g.slots
		})
	}, 0
}

// gauge reports how many bundles are being read, for /metrics: how close
// the installation is to refusing reads.
func (g *bundleGate) gauge() prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "accord_bundle_reads_in_progress",
		Help: fmt.Sprintf("Report bundles being read (Verify, report import); at %d, further reads are refused with 503.", maxBundleReads),
	}, func() float64 { return float64(len(g.slots)) })
}

// enterBundleRead takes a bundle-reading slot for the signed-in user and
// bounds the upload's reading by the request's time limit (so that an
// upload that stalls gives its slot back). Refused, it sets Retry-After,
// calls refuse with the status and a sentence for the page, and returns
// false; otherwise the caller defers release.
func (s *Server) enterBundleRead(w http.ResponseWriter, r *http.Request, refuse func(status int, msg string)) (release func(), ok bool) {
	release, status := s.bundles.enter(viewerFrom(r.Context()).ID)
	if status != 0 {
		w.Header().Set("Retry-After", strconv.Itoa(bundleRetryAfter))
		msg := "You are having a bundle checked already: wait for it to finish, then send this one."
		if status == http.StatusServiceUnavailable {
			msg = fmt.Sprintf("Accord is checking as many bundles as it does at once (%d): try again in %d seconds.", cap(s.bundles.slots), bundleRetryAfter)
		}
		s.log.Info("bundle read refused", "request_id", requestID(r.Context()), "status", status)
		refuse(status, msg)
		return nil, false
	}
	// Best effort: a ResponseWriter that cannot set deadlines keeps the
	// server's own.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.timeout))
	return release, true
}
