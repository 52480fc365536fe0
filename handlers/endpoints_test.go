package handlers

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/runners/probe/emulator"
	"github.com/accordlab/accord/runners/sshrun"
	"github.com/accordlab/accord/runners/sshtest"
	"github.com/accordlab/accord/service/labhost"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/htmltest"
)

// startEmulator serves Accord's inference emulator on loopback (model "m").
func startEmulator(t *testing.T) string {
	t.Helper()
	s, err := emulator.New(emulator.Config{Model: "m", BlockTokens: 16, BlockBytes: 4096, CacheBlocks: 64, ITL: time.Millisecond, DefaultMaxTokens: 16, Seed: 7}, io.Discard)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done; _ = s.Close() })
	return "http://" + ln.Addr().String() + "/v1"
}

// A starter template opens on the program's own endpoint, the form offers
// the others, and "Test endpoint" has the probe on a real lab host (sshd on
// loopback) send one small request and shows what came back.
func TestStarterTemplateEndpointsAndTestEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{probe: sshtest.BuildAccord(t)})
	ctx := context.Background()
	vendor, customer := b.createOrg(t, "Vendor", "vendor"), b.createOrg(t, "Customer", "customer")
	pid, err := b.store.CreateProgram(ctx, "Program", "", vendor, customer, nil)
	require.NoError(t, err)
	eng := b.createUser(t, "eng@vendor.example", &vendor, false)
	_, err = b.store.SetMember(ctx, pid, eng, store.RoleEngineer)
	require.NoError(t, err)
	c := b.signIn(t, "eng@vendor.example")
	pb := &programBundle{testBundle: b, programID: pid, engineer: c}

	emu := startEmulator(t)
	existing := ttftProfile("TTFT on the lab's emulator", emu, acceptance.TransportEmulated)
	_, nv, errs, err := prepareSpec(profileOps, existing)
	require.NoError(t, err)
	require.Empty(t, errs)
	_, _, err = b.store.CreateSpec(ctx, store.KindProfile, pid, nv)
	require.NoError(t, err)

	// The lab host: a real sshd with Accord's key, its host key pinned.
	sshd := sshtest.StartSSHD(t, sshtest.Options{})
	host, err := b.store.CreateHost(ctx, pid, store.NewHost{Name: "lab-1", Address: sshd.Addr, Port: sshd.Port, Username: sshd.User, AuthMethod: "key",
		Labels: map[string]string{"endpoint": "http://10.0.0.5:8000/v1"}})
	require.NoError(t, err)
	sealed, err := b.sealer.Seal(sshd.ClientKeyPEM, labhost.SealLabel(host))
	require.NoError(t, err)
	require.NoError(t, b.store.SetHostSealedKey(ctx, host, sealed))
	require.NoError(t, b.store.PinHostKeys(ctx, pid, host, sshrun.AuthorizedKey(sshd.HostKey), sshrun.Fingerprint(sshd.HostKey), nil))

	doc := pb.pageDoc(t, c, pb.url("/profiles/new?template=inference-ttft-sweep"))
	field := htmltest.ByID(doc, "steps[0].inference.endpoint")
	require.Equal(t, emu, htmltest.Attr(field, "value"), "not the template's 127.0.0.1:8000")
	require.Equal(t, "known-endpoints", htmltest.Attr(field, "list"))
	require.Contains(t, htmltest.Text(htmltest.ByID(doc, "spec-notice")), "The template's endpoint is replaced by "+emu+" (used by TTFT on the lab's emulator)")
	var offered []string
	for _, o := range htmltest.All(htmltest.ByID(doc, "known-endpoints"), func(n *html.Node) bool { return n.Data == "option" }) {
		offered = append(offered, htmltest.Attr(o, "value")+" · "+htmltest.Attr(o, "label"))
	}
	require.Equal(t, []string{emu + " · used by TTFT on the lab's emulator", "http://10.0.0.5:8000/v1 · label endpoint of lab host lab-1"}, offered)
	// A template that reads the server's counters reads the new server's.
	reuse := pb.pageDoc(t, c, pb.url("/profiles/new?template=hit-ratio-sensitivity"))
	require.Equal(t, emu, htmltest.Attr(htmltest.ByID(reuse, "steps[0].inference.endpoint"), "value"))
	emuMetrics := strings.TrimSuffix(emu, "/v1") + "/metrics"
	require.Equal(t, emuMetrics, htmltest.Attr(htmltest.ByID(reuse, "steps[0].inference.metrics_url"), "value"))
	require.Contains(t, htmltest.Text(htmltest.ByID(reuse, "spec-notice")), "Its metrics_url is that server's "+emuMetrics)
	button := htmltest.ByID(doc, "test-endpoint-steps[0]")
	require.NotNil(t, button)
	require.Equal(t, pb.url("/endpoint-test"), htmltest.Attr(button, "hx-post"))
	require.Equal(t, `{"_step":"steps[0]"}`, htmltest.Attr(button, "hx-vals"))

	// What the form posts when the button is pressed (the whole form, and _step).
	test := func(model string) *html.Node {
		res, page := pb.postPage(t, c, pb.url("/endpoint-test"), url.Values{"_step": {"steps[0]"}, "steps[0].inference.endpoint": {emu},
			"steps[0].inference.model": {model}, "steps[0].inference.api": {"chat"}, "_test_host.steps[0]": {fmt.Sprint(host)}, "name": {"x"}})
		require.Equal(t, http.StatusOK, res.StatusCode)
		answers := htmltest.All(htmltest.Parse(t, page), func(n *html.Node) bool { return htmltest.Attr(n, "data-ok") != "" })
		require.Len(t, answers, 1, page)
		return answers[0]
	}
	good := test("m")
	require.Equal(t, "true", htmltest.Attr(good, "data-ok"))
	require.Regexp(t, `^The endpoint answered from lab-1: first token after \d+ ms, 8 tokens in \d+ ms \(\d+ chunks; model m, chat API\)\.$`, htmltest.Text(good))
	bad := test("not-served")
	require.Equal(t, "false", htmltest.Attr(bad, "data-ok"))
	require.Contains(t, htmltest.Text(bad), "The endpoint did not answer well from lab-1 (HTTP 404)")
	require.Contains(t, htmltest.Text(bad), "not-served")

	// The URL is checked here before the host is asked anything.
	res, page := pb.postPage(t, c, pb.url("/endpoint-test"), url.Values{"url": {"http://u:p@10.0.0.5/v1"}, "model": {"m"}, "host": {fmt.Sprint(host)}})
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "must not contain a user name or password")
	var audited int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'endpoint_tested'`).Scan(&audited))
	require.Equal(t, 2, audited, "each request sent from a lab host is in the audit log")
}
