package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// FakeResolver answers from a table: the tests' own DNS.
type FakeResolver map[string][]netip.Addr

func (f FakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs, ok := f[strings.TrimSuffix(host, ".")]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// Every target of the report is refused when registered, in every
// spelling; public addresses and names pass. Nothing here dials.
func TestCheckURLRefusesTheServersOwnNetworks(t *testing.T) {
	t.Parallel()
	resolver := FakeResolver{
		"hooks.example.test":   addrs("203.0.113.7"),
		"private.example.test": addrs("203.0.113.8", "10.1.2.3"), // one internal address is enough
		"cgnat.example.test":   addrs("100.64.0.9"),
		"v6.example.test":      addrs("fd00::1"),
		"mapped.example.test":  addrs("::ffff:192.168.1.1"),
	}
	p := NewPolicy(nil, resolver)
	ctx := context.Background()
	for _, target := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://10.0.0.1/", "http://10.255.255.255:8080/", "http://172.16.0.1/", "http://172.31.255.254/",
		"http://192.168.1.1/", "http://100.64.0.1/", "http://100.100.100.200/", "http://127.0.0.1:9/", "http://127.1.2.3/",
		"http://[::1]/", "http://[fd00::1]/", "http://[fd00:ec2::254]/", "http://[fe80::1%25eth0]/", "http://[::ffff:127.0.0.1]/",
		"http://[::ffff:169.254.169.254]/", "http://[64:ff9b::a9fe:a9fe]/", "http://0.0.0.0/", "http://224.0.0.1/", "http://255.255.255.255/",
		"http://2130706433/", "http://0x7f000001/", "http://0x7f.1/", "http://0177.0.0.1/", "http://127.1/", "http://017700000001/",
		"http://3232235777/", "http://0xa9fea9fe/", "http://127.0.0.1./",
		"http://metadata.google.internal/computeMetadata/v1/", "http://METADATA.GOOGLE.INTERNAL./", "http://metadata/",
		"http://localhost:8080/", "http://api.localhost/",
		"http://private.example.test/", "http://cgnat.example.test/", "http://v6.example.test/", "http://mapped.example.test/",
		"http://nowhere.example.test/",
		"file:///etc/passwd", "gopher://hooks.example.test/", "http://user:pw@hooks.example.test/", "http:///x",
	} {
		err := p.CheckURL(ctx, target)
		require.ErrorIs(t, err, ErrRefused, target)
	}
	for _, target := range []string{"https://hooks.example.test/argo", "http://203.0.113.9:8443/x", "https://[2001:db8::1]/"} {
		require.NoError(t, p.CheckURL(ctx, target), target)
	}

	// The operator's allow-list opens exactly its CIDRs.
	allow, err := ParseCIDRs("10.20.0.0/16, 127.0.0.1,fd12::/64")
	require.NoError(t, err)
	open := NewPolicy(allow, resolver)
	for _, target := range []string{"http://10.20.3.4/", "http://127.0.0.1:9/", "http://[fd12::5]/"} {
		require.NoError(t, open.CheckURL(ctx, target), target)
	}
	for _, target := range []string{"http://10.21.0.1/", "http://127.0.0.2/", "http://169.254.169.254/", "http://metadata.google.internal/"} {
		require.ErrorIs(t, open.CheckURL(ctx, target), ErrRefused, target)
	}
	_, err = ParseCIDRs("10.0.0.0/33")
	require.Error(t, err)
	_, err = ParseCIDRs("intranet")
	require.Error(t, err)
}

func TestLegacyIPv4Forms(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"2130706433": "127.0.0.1", "0x7f000001": "127.0.0.1", "0x7f.1": "127.0.0.1", "0177.0.0.1": "127.0.0.1",
		"127.1": "127.0.0.1", "10.1.257": "10.1.1.1", "0": "0.0.0.0", "0xA9FEA9FE": "169.254.169.254", "1.2.3.4": "1.2.3.4",
	} {
		got, ok := legacyIPv4(in)
		require.True(t, ok, in)
		require.Equal(t, want, got.String(), in)
	}
	for _, in := range []string{"", "a.b", "1.2.3.4.5", "256.1.1.1", "1.2.3.256", "08", "1..2", "4294967296", "hooks"} {
		_, ok := legacyIPv4(in)
		require.False(t, ok, in)
	}
}

func FuzzLegacyIPv4(f *testing.F) {
	for _, s := range []string{"2130706433", "0x7f.1", "0177.0.0.1", "127.1", "1.2.3.4", "a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := legacyIPv4(s)
		if canonical, err := netip.ParseAddr(s); err == nil && canonical.Is4() {
			if !ok || a != canonical {
				t.Fatalf("%q: canonical %s, legacy %v %s", s, canonical, ok, a)
			}
		}
		if ok && !a.Is4() {
			t.Fatalf("%q: %s is not IPv4", s, a)
		}
	})
}

// loopbackServer counts the requests it gets.
func loopbackServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// At dial time the address actually dialed is checked: a name that a
// resolver we control points at loopback (as a rebinding DNS would after
// registration) is refused and the server never hears of it; allowed,
// the same call goes through.
func TestDialChecksTheAddressAfterResolution(t *testing.T) {
	t.Parallel()
	srv, hits := loopbackServer(t)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	resolver := FakeResolver{"rebind.example.test": addrs("127.0.0.1"), "mixed.example.test": addrs("203.0.113.7", "127.0.0.1")}
	ctx := context.Background()
	get := func(p *Policy, target string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		require.NoError(t, err)
		res, err := (&http.Client{Transport: p.Transport()}).Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		return nil
	}
	strict := NewPolicy(nil, resolver)
	for _, target := range []string{
		"http://rebind.example.test:" + port + "/", "http://mixed.example.test:" + port + "/", "http://127.0.0.1:" + port + "/",
		"http://[::ffff:127.0.0.1]:" + port + "/", "http://localhost:" + port + "/",
	} {
		err := get(strict, target)
		require.ErrorIs(t, err, ErrRefused, target)
	}
	require.Zero(t, hits.Load(), "no connection reached the loopback server")

	allowed := NewPolicy(mustPrefixes("127.0.0.1/32"), resolver)
	require.NoError(t, get(allowed, "http://rebind.example.test:"+port+"/"))
	require.NoError(t, get(allowed, "http://127.0.0.1:"+port+"/"))
	require.EqualValues(t, 2, hits.Load())

	// The socket's own check holds even for an address the dialer did not
	// resolve itself.
	require.ErrorIs(t, strict.control("tcp4", "127.0.0.1:"+port, nil), ErrRefused)
	require.ErrorIs(t, strict.control("tcp6", "[fe80::1%lo]:80", nil), ErrRefused)
	require.NoError(t, strict.control("tcp4", "203.0.113.7:443", nil))
	var dnsErr *net.DNSError
	_, err = strict.DialContext(ctx, "tcp", "nowhere.example.test:80")
	require.True(t, errors.As(err, &dnsErr), fmt.Sprint(err))
}

// Cloud metadata addresses are refused whatever the operator allows: an
// allow-list written as a wide CIDR (all of link-local, all of IPv4, the
// AWS IPv6 range) opens its networks but never the metadata services in
// them, in any spelling, and names resolving to them are refused too.
// Nothing here dials.
func TestMetadataAddressesRefusedWhateverIsAllowed(t *testing.T) {
	t.Parallel()
	allow, err := ParseCIDRs("169.254.0.0/16, 0.0.0.0/0, fd00::/8, 100.64.0.0/10")
	require.NoError(t, err)
	resolver := FakeResolver{"imds.example.test": addrs("169.254.169.254"), "wire.example.test": addrs("10.0.0.1", "168.63.129.16")}
	open := NewPolicy(allow, resolver)
	ctx := context.Background()
	for _, target := range []string{
		"http://169.254.169.254/latest/meta-data/", "http://169.254.170.2/v2/credentials", "http://169.254.170.23/v1/credentials",
		"http://100.100.100.200/latest/meta-data/", "http://168.63.129.16/machine", "http://[fd00:ec2::254]/", "http://[fd00:ec2::23]/",
		"http://[::ffff:169.254.169.254]/", "http://[64:ff9b::a9fe:a9fe]/", "http://imds.example.test/", "http://wire.example.test/",
		"http://metadata.google.internal/",
	} {
		require.ErrorIs(t, open.CheckEndpoint(ctx, target), ErrRefused, target)
		require.ErrorIs(t, open.CheckURL(ctx, target), ErrRefused, target)
	}
	// The rest of what was allowed is open.
	for _, target := range []string{"http://169.254.1.2:9090/", "http://10.1.2.3:9090/", "http://[fd00:1::5]:9090/", "http://100.64.0.9/"} {
		require.NoError(t, open.CheckEndpoint(ctx, target), target)
	}
	// At the socket too, for the full policy and for the metadata-only
	// check that SSH dials to lab hosts use.
	for _, address := range []string{"169.254.169.254:80", "[fd00:ec2::254]:80", "[::ffff:169.254.169.254]:80", "168.63.129.16:80"} {
		require.ErrorIs(t, open.control("tcp", address, nil), ErrRefused, address)
		require.ErrorIs(t, RefuseMetadata("tcp", address, nil), ErrRefused, address)
	}
	for _, address := range []string{"127.0.0.1:22", "10.1.2.3:22", "192.168.7.7:2222", "[fe80::1%eth0]:22"} {
		require.NoError(t, RefuseMetadata("tcp", address, nil), address)
	}
}

// A watch's endpoint may carry credentials (a Prometheus behind basic
// authentication); a webhook's URL may not. Both refuse the server's own
// networks alike.
func TestCheckEndpointAllowsCredentialsButNotInternalAddresses(t *testing.T) {
	t.Parallel()
	p := NewPolicy(nil, FakeResolver{"prom.example.test": addrs("203.0.113.10"), "prom.internal.test": addrs("10.9.0.4")})
	ctx := context.Background()
	require.NoError(t, p.CheckEndpoint(ctx, "https://watch:s3cret@prom.example.test/"))
	require.ErrorIs(t, p.CheckURL(ctx, "https://watch:s3cret@prom.example.test/"), ErrRefused)
	for _, target := range []string{"http://prom.internal.test:9090/", "http://10.9.0.4:9090", "http://u:p@127.0.0.1:9090/", "ftp://prom.example.test/", "http:///x"} {
		require.ErrorIs(t, p.CheckEndpoint(ctx, target), ErrRefused, target)
	}
	allowed := NewPolicy(mustPrefixes("10.9.0.0/24"), FakeResolver{"prom.internal.test": addrs("10.9.0.4")})
	require.NoError(t, allowed.CheckEndpoint(ctx, "http://prom.internal.test:9090/"))
}

func TestMetadataRefusalIsItsOwnKind(t *testing.T) {
	t.Parallel()
	p := NewPolicy(nil, nil)
	err := p.CheckAddr(netip.MustParseAddr("169.254.169.254"))
	require.ErrorIs(t, err, ErrRefused)
	require.ErrorIs(t, err, ErrMetadata)
	err = p.CheckAddr(netip.MustParseAddr("169.254.1.1"))
	require.ErrorIs(t, err, ErrRefused)
	require.NotErrorIs(t, err, ErrMetadata, "the rest of link-local an allow-list may open")
}
