package jobs

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/internal/closedport"
	"github.com/accordlab/accord/store"
)

// lockedBuffer is a log the test reads while a worker may write to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The production watch's Prometheus calls refused only link-local
// addresses: a watch could query anything on the server's own networks
// (loopback, 10/8...) and its page told what answered. Now they go
// through the egress policy, as webhooks do: a watch stored with a
// loopback endpoint, and one whose name resolved to a public address
// when it was set and to loopback at the check (DNS rebinding), are
// refused at dial time (the address dialed), and the loopback Prometheus
// hears nothing; a redirect from an allowed address toward a refused one
// is refused at its own dial; the operator's allow-list opens exactly
// its CIDRs; a failed connection is recorded as "could not connect", its
// detail only in the server's log. The River worker asks through the
// policy of its Deps.
func TestAttackWatchQueryReachesTheServersOwnNetwork(t *testing.T) {
	t.Parallel()
	b := setupRollouts(t, "lab-acceptance", "pilot-5pct")
	ins := b.insertOnly(t)
	ctx := context.Background()
	b.judgedRun(t, "PASS")
	b.decide(t, ins, acceptance.DecisionApprove, "lab-acceptance", vera, "")
	b.decide(t, ins, acceptance.DecisionApprove, "lab-acceptance", chen, "")

	prom := startProm(t) // 127.0.0.1
	_, port, err := net.SplitHostPort(prom.Listener.Addr().String())
	require.NoError(t, err)
	heard := func() int {
		prom.mu.Lock()
		defer prom.mu.Unlock()
		return len(prom.queries)
	}
	resolver := &flippingResolver{first: netip.MustParseAddr("203.0.113.7"), second: netip.MustParseAddr("127.0.0.1")}
	strict := egress.NewPolicy(nil, resolver)
	rebound := "http://prom.example.test:" + port + "/prom"
	require.NoError(t, strict.CheckEndpoint(ctx, rebound), "when the watch was set the name had a public address")

	var log lockedBuffer
	api := NewPrometheusAPI(strict, slog.New(slog.NewTextHandler(&log, nil)))
	for _, endpoint := range []string{rebound, prom.URL + "/prom", "http://[::ffff:127.0.0.1]:" + port + "/prom"} {
		_, err := api.Value(ctx, endpoint, "up", "<=")
		require.ErrorContains(t, err, "inside the server's own networks", endpoint)
		require.ErrorContains(t, err, "ACCORD_EGRESS_ALLOW_CIDRS", endpoint)
	}
	_, err = api.Range(ctx, prom.URL+"/prom", "up", "<=", time.Now().Add(-time.Minute), time.Now(), time.Second)
	require.ErrorContains(t, err, "inside the server's own networks")
	require.Zero(t, heard(), "nothing reached the loopback Prometheus")

	// A redirect from an allowed address (127.0.0.3) toward one nothing
	// allows (127.0.0.2) is refused when it is dialed.
	var elsewhere atomic.Int64
	ln2, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	other := &httptest.Server{Listener: ln2, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) })}}
	other.Start()
	t.Cleanup(other.Close)
	ln3, err := net.Listen("tcp", "127.0.0.3:0")
	require.NoError(t, err)
	redirecting := &httptest.Server{Listener: ln3, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	})}}
	redirecting.Start()
	t.Cleanup(redirecting.Close)
	allowed := NewPrometheusAPI(egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("127.0.0.3/32")}, nil), nil)
	_, err = allowed.Value(ctx, redirecting.URL+"/prom", "up", "<=")
	require.ErrorContains(t, err, "127.0.0.2 is inside the server's own networks")
	require.Zero(t, elsewhere.Load(), "the redirect's target heard nothing")

	// Allowed, the same Prometheus answers.
	prom.push("0.5")
	v, err := allowed.Value(ctx, prom.URL+"/prom", "up", "<=")
	require.NoError(t, err)
	require.Equal(t, 0.5, v)
	require.Equal(t, 1, heard())

	// A port where nothing listens, inside the allowed networks: the
	// record says "could not connect", never "connection refused".
	closedURL := "http://" + closedport.Addr(t) + "/prom"
	logged := NewPrometheusAPI(egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, nil), slog.New(slog.NewTextHandler(&log, nil)))
	_, err = logged.Value(ctx, closedURL, "up", "<=")
	require.EqualError(t, err, "query: could not connect")
	require.Contains(t, log.String(), "connection refused", "the operator's log has the detail")

	// Through River: the check worker asks through its Deps' policy, and
	// the watch's record says why it was refused.
	w := b.addWatch(t, "pilot-5pct", prom.URL+"/prom", 3)
	b.deps.Egress = strict
	b.startRiverWith(t, time.Millisecond, func(*Deps) {})
	_, err = b.river.Insert(ctx, WatchCheckArgs{WatchID: w.ID}, nil)
	require.NoError(t, err)
	deadline := time.Now().Add(60 * time.Second)
	var got store.Watch
	for got.LastCheckedAt == nil {
		require.True(t, time.Now().Before(deadline), "the check was not recorded")
		time.Sleep(20 * time.Millisecond)
		ws, err := b.store.ListWatches(ctx, b.programID)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		got = ws[0]
	}
	require.Contains(t, got.LastError, "127.0.0.1 is inside the server's own networks")
	require.Nil(t, got.LastValue)
	require.Zero(t, got.Breaches, "a refused check counts no breach")
	require.Equal(t, 1, heard(), "the worker's check reached nothing")
}

// Cloud metadata is refused to the watch and to webhooks with the strict
// policy and with an allow-list as wide as all of link-local and IPv4
// (the policy refuses before it dials: no packet leaves for the address).
func TestOutboundCallsNeverReachCloudMetadata(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wide := egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("0.0.0.0/0")}, nil)
	for _, endpoint := range []string{"http://169.254.169.254/latest", "http://[fd00:ec2::254]:9090", "http://[::ffff:169.254.169.254]/", "http://168.63.129.16/machine"} {
		_, err := QueryPrometheus(ctx, nil, endpoint, "up", "<=")
		require.ErrorContains(t, err, "refused", endpoint)
		_, err = NewPrometheusAPI(wide, nil).Value(ctx, endpoint, "up", "<=")
		require.ErrorContains(t, err, "is a cloud metadata address", endpoint)
	}
	for _, w := range []*DeliverWebhookWorker{{}, {deps: Deps{Egress: wide}}} {
		_, err := w.send(ctx, "http://169.254.169.254/hook", store.WebhookDelivery{ID: 1, Event: "stop_loss", Body: []byte(`{}`)}, "whsec_x")
		require.Equal(t, errCouldNotConnect, err, "the delivery log says no more")
	}
}
