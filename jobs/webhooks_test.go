package jobs

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/egress"
	"github.com/accordlab/accord/service/rollout"
	"github.com/accordlab/accord/store"
)

// A webhook that fails is retried with a growing delay until it answers;
// one that never answers 2xx is marked failed after the last attempt; each
// attempt is in the delivery log and each body is signed.
func TestWebhookDeliveriesAreSignedAndRetried(t *testing.T) {
	t.Parallel()
	b := setupRollouts(t, "lab-acceptance", "pilot-5pct")
	b.startRiver(t, 20*time.Millisecond)
	flaky := startHookServer(t, http.StatusInternalServerError, http.StatusBadGateway)
	down := startHookServer(t, repeat(http.StatusServiceUnavailable, WebhookAttempts)...)
	flakyID, flakySecret := b.addWebhook(t, flaky.URL, store.EventStageApproved)
	downID, _ := b.addWebhook(t, down.URL, store.EventStageApproved)
	haltOnly, _ := b.addWebhook(t, flaky.URL, store.EventStageHalted)
	b.judgedRun(t, "PASS")

	// One side's approval raises nothing.
	out := b.decide(t, b.river, acceptance.DecisionApprove, "lab-acceptance", vera, "")
	require.Empty(t, out.Events)
	out = b.decide(t, b.river, acceptance.DecisionApprove, "lab-acceptance", chen, "")
	require.Equal(t, []string{store.EventStageApproved}, out.Events)
	require.Equal(t, 2, out.Deliveries, "the halt-only webhook is not called")

	ds := b.waitDeliveries(t, flakyID, 1, 30*time.Second)
	require.Equal(t, store.DeliveryDelivered, ds[0].State)
	require.Equal(t, 3, ds[0].Attempts)
	require.Equal(t, 200, *ds[0].LastStatus)
	got := flaky.requests()
	require.Len(t, got, 3)
	for _, r := range got {
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		require.Equal(t, "stage_approved", r.Header.Get(rollout.HeaderWebhookEvent))
		require.True(t, rollout.VerifyWebhookSignature(flakySecret, r.Body, r.Header.Get(rollout.HeaderWebhookSignature)), "every attempt is signed")
		require.Equal(t, got[0].Body, r.Body, "every attempt sends the same body")
	}
	require.False(t, rollout.VerifyWebhookSignature("whsec_other", got[0].Body, got[0].Header.Get(rollout.HeaderWebhookSignature)))
	var body rollout.WebhookBody
	require.NoError(t, json.Unmarshal(got[0].Body, &body))
	require.Equal(t, "lab-acceptance", body.Stage)
	require.Equal(t, "approved", body.StageState)
	require.Equal(t, "pilot-5pct", body.NextStage)
	require.Equal(t, "in-progress", body.RolloutStatus)
	require.Equal(t, "chen@bigcloud.example", body.Decision.Record.Actor)
	require.Len(t, body.Approvals, 2, "both sides' sign-offs, not only the last decision")
	require.Equal(t, vera.UserID, body.Approvals[0].Actor.UserID)
	require.Equal(t, chen.UserID, body.Approvals[1].Actor.UserID)

	ds = b.waitDeliveries(t, downID, 1, 60*time.Second)
	require.Equal(t, store.DeliveryFailed, ds[0].State)
	require.Equal(t, WebhookAttempts, ds[0].Attempts)
	require.Equal(t, http.StatusServiceUnavailable, *ds[0].LastStatus)
	require.Equal(t, "HTTP 503", ds[0].LastError)
	require.Len(t, down.requests(), WebhookAttempts)

	none, err := b.store.ListDeliveries(context.Background(), b.programID, haltOnly, 10)
	require.NoError(t, err)
	require.Empty(t, none)

	// A disabled webhook is not called.
	require.NoError(t, b.store.SetWebhookActive(context.Background(), b.programID, haltOnly, false))
	out = b.decide(t, b.river, acceptance.DecisionHalt, "pilot-5pct", chen, "pilot burning its error budget")
	require.Equal(t, []string{store.EventStageHalted}, out.Events)
	require.Zero(t, out.Deliveries)
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func jobWithAttempt(n int) *river.Job[DeliverWebhookArgs] {
	return &river.Job[DeliverWebhookArgs]{JobRow: &rivertype.JobRow{Attempt: n}}
}

func TestWebhookRetryDelayDoubles(t *testing.T) {
	t.Parallel()
	w := &DeliverWebhookWorker{}
	for attempt, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 4: 80 * time.Second, 12: time.Hour, 40: time.Hour} {
		job := jobWithAttempt(attempt)
		got := time.Until(w.NextRetry(job))
		require.InDelta(t, want.Seconds(), got.Seconds(), 1, "attempt %d", attempt)
	}
}

// flippingResolver answers first with a public address, then with
// another: a name re-pointed after registration (DNS rebinding).
type flippingResolver struct {
	mu            sync.Mutex
	first, second netip.Addr
	calls         int
}

func (f *flippingResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls == 1 {
		return []netip.Addr{f.first}, nil
	}
	return []netip.Addr{f.second}, nil
}

// Deliveries reached the server's own network (loopback answered, and the
// log told what: "connection refused", "HTTP 302"). Now a hook whose name
// passed registration but resolves to loopback at delivery, and one stored
// with a loopback address (registered before the check), are refused at
// dial time: the loopback server hears nothing and the log says only
// "could not connect". A redirect from an allowed address toward a refused
// one is not followed.
func TestAttackWebhookDeliveryReachesTheServersOwnNetwork(t *testing.T) {
	t.Parallel()
	b := setupRollouts(t, "lab-acceptance", "pilot-5pct")
	hooks := startHookServer(t)
	_, port, err := net.SplitHostPort(hooks.Listener.Addr().String())
	require.NoError(t, err)
	resolver := &flippingResolver{first: netip.MustParseAddr("203.0.113.7"), second: netip.MustParseAddr("127.0.0.1")}
	// Only 127.0.0.3 is allowed, for the redirecting hook below; the hook
	// server's 127.0.0.1 and 127.0.0.2 stay refused.
	policy := egress.NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}, resolver)
	strict := egress.NewPolicy(nil, resolver)
	rebound := "http://argo.example.test:" + port + "/hook"
	require.NoError(t, strict.CheckURL(context.Background(), rebound), "registration saw a public address")
	reboundID, _ := b.addWebhook(t, rebound, store.EventStageApproved)
	storedID, _ := b.addWebhook(t, hooks.URL+"/stored", store.EventStageApproved)

	// A redirect toward 127.0.0.2, which nothing allows.
	var elsewhere atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	other := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) })}}
	other.Start()
	t.Cleanup(other.Close)
	ln3, err := net.Listen("tcp", "127.0.0.3:0")
	require.NoError(t, err)
	redirecting := &httptest.Server{Listener: ln3, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/internal", http.StatusTemporaryRedirect)
	})}}
	redirecting.Start()
	t.Cleanup(redirecting.Close)
	redirectID, _ := b.addWebhook(t, redirecting.URL+"/hook", store.EventStageApproved)

	b.startRiverWith(t, 5*time.Millisecond, func(d *Deps) { d.Egress = policy })
	b.judgedRun(t, "PASS")
	b.decide(t, b.river, acceptance.DecisionApprove, "lab-acceptance", vera, "")
	b.decide(t, b.river, acceptance.DecisionApprove, "lab-acceptance", chen, "")

	for _, id := range []int64{reboundID, storedID} {
		ds := b.waitDeliveries(t, id, 1, 60*time.Second)
		require.Equal(t, store.DeliveryFailed, ds[0].State)
		require.Equal(t, "could not connect", ds[0].LastError, "never the socket's error")
		require.Nil(t, ds[0].LastStatus)
	}
	require.Empty(t, hooks.requests(), "nothing reached the loopback hook server")
	ds := b.waitDeliveries(t, redirectID, 1, 60*time.Second)
	require.Equal(t, http.StatusTemporaryRedirect, *ds[0].LastStatus)
	require.Zero(t, elsewhere.Load(), "the redirect was not followed")
}
