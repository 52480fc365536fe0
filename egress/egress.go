// Package egress decides which addresses Accord's outbound calls to
// URLs its users give (webhooks, production watches' Prometheus APIs) may
// reach. By default they may not reach the server's own networks:
// loopback, private, CGNAT, unique-local, link-local, multicast and
// reserved ranges, nor names that stand for them (localhost,
// metadata.google.internal). An operator can allow CIDRs
// (ACCORD_EGRESS_ALLOW_CIDRS), for example the private network where
// production Prometheus lives. Cloud metadata addresses are refused
// whatever the operator allows: no watch or webhook has a reason to
// reach them, and an allow-list written as a wide CIDR must not open them.
//
// A URL is checked when it is registered (CheckURL) and again at every
// connection (Policy.DialContext): the address actually dialed, after
// resolution, so that a name re-pointed at an internal address later
// (DNS rebinding) is refused too.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is wrapped by every refusal of this package; the text after
// "egress: refused: " says why, fit for the user who gave the URL.
var ErrRefused = errors.New("egress: refused")

// blocked are the ranges of the server's own networks and of addresses no
// webhook has a reason to reach.
var blocked = mustPrefixes(
	"0.0.0.0/8",      // "this network"
	"10.0.0.0/8",     // private
	"100.64.0.0/10",  // carrier-grade NAT (100.100.100.200: a cloud's metadata)
	"127.0.0.0/8",    // loopback
	"169.254.0.0/16", // link-local (169.254.169.254: cloud metadata)
	"172.16.0.0/12",  // private
	"192.0.0.0/24",   // IETF protocol assignments (192.0.0.192: a cloud's metadata)
	"192.168.0.0/16", // private
	"198.18.0.0/15",  // benchmarking
	"224.0.0.0/4",    // multicast
	"240.0.0.0/4",    // reserved, broadcast
	"::/96",          // unspecified, loopback, IPv4-compatible (deprecated)
	"fc00::/7",       // unique-local (fd00:ec2::254: a cloud's metadata)
	"fe80::/10",      // link-local
	"ff00::/8",       // multicast
)

// metadata are the addresses of cloud metadata and host services that
// hand out credentials: refused even inside an allowed CIDR.
var metadata = mustPrefixes(
	"169.254.169.254/32", // AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean... instance metadata
	"169.254.170.2/32",   // AWS ECS task metadata and credentials
	"169.254.170.23/32",  // AWS EKS Pod Identity agent
	"100.100.100.200/32", // Alibaba Cloud metadata
	"192.0.0.192/32",     // Oracle Cloud (classic) metadata
	"168.63.129.16/32",   // Azure WireServer (a public address: outside every blocked range)
	"fd00:ec2::254/128",  // AWS instance metadata over IPv6
	"fd00:ec2::23/128",   // AWS EKS Pod Identity agent over IPv6
)

// metadataNames are host names that stand for cloud metadata services or
// the server itself whatever they resolve to.
var metadataNames = []string{"localhost", "metadata.google.internal", "metadata.goog", "metadata"}

func mustPrefixes(cidrs ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		out[i] = netip.MustParsePrefix(c)
	}
	return out
}

// Resolver looks host names up; *net.Resolver is one, tests give their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy is what outbound calls may reach.
type Policy struct {
	allow    []netip.Prefix
	resolver Resolver
}

// NewPolicy refuses the blocked ranges except the allowed prefixes, and
// resolves names with resolver (nil: the system's).
func NewPolicy(allow []netip.Prefix, resolver Resolver) *Policy {
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	return &Policy{allow: allow, resolver: resolver}
}

// ParseCIDRs reads a comma-separated list of CIDRs (or single addresses).
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR such as 10.20.0.0/16 or fd12::/64", part)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// CheckAddr refuses a cloud metadata address always, and an address of
// the blocked ranges unless allowed. An IPv4 address written as IPv6
// (::ffff:a.b.c.d, NAT64 64:ff9b::/96) is judged as the IPv4 address it
// stands for.
func (p *Policy) CheckAddr(a netip.Addr) error {
	a = a.Unmap().WithZone("") // a zoned address is in no prefix otherwise
	if err := checkMetadata(a); err != nil {
		return err
	}
	for _, pre := range p.allow {
		if pre.Contains(a) {
			return nil
		}
	}
	if v4, ok := embeddedIPv4(a); ok {
		return p.CheckAddr(v4)
	}
	for _, pre := range blocked {
		if pre.Contains(a) {
			return fmt.Errorf("%w: %s is inside the server's own networks (%s)", ErrRefused, a, pre)
		}
	}
	return nil
}

// checkMetadata refuses a cloud metadata address, also written as IPv6.
func checkMetadata(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	if v4, ok := embeddedIPv4(a); ok {
		a = v4
	}
	for _, pre := range metadata {
		if pre.Contains(a) {
			return metadataError{a}
		}
	}
	return nil
}

// ErrMetadata is wrapped by the refusal of a cloud metadata address,
// which no allow-list opens.
var ErrMetadata = errors.New("egress: cloud metadata address")

type metadataError struct{ addr netip.Addr }

func (e metadataError) Error() string {
	return fmt.Sprintf("%s: %s is a cloud metadata address, which outbound calls never reach", ErrRefused, e.addr)
}

func (e metadataError) Is(target error) bool { return target == ErrRefused || target == ErrMetadata }

// RefuseMetadata is a net.Dialer Control function that refuses only cloud
// metadata addresses (the address the socket is about to connect to). It
// is for dials to addresses that are rightly on the server's own
// networks, such as the lab hosts engineers register (SSH), which the
// full policy would refuse.
func RefuseMetadata(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s is not an address", ErrRefused, address)
	}
	return checkMetadata(ap.Addr())
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || !nat64.Contains(a) {
		return netip.Addr{}, false
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:16])), true
}

// CheckURL checks a webhook's URL when it is registered: http or https, no
// user name, and a host CheckEndpoint would accept.
func (p *Policy) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("%w: give an http:// or https:// URL without a user name or password", ErrRefused)
	}
	return p.checkHost(ctx, u.Hostname())
}

// CheckEndpoint checks a production watch's endpoint when it is set: an
// http or https URL (credentials allowed: a Prometheus behind basic
// authentication) whose host is neither a blocked address (in any
// spelling: decimal, hex, octal or short IPv4 forms are refused outright)
// nor a metadata name, and whose every resolved address is allowed.
func (p *Policy) CheckEndpoint(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: give an http:// or https:// URL", ErrRefused)
	}
	return p.checkHost(ctx, u.Hostname())
}

// checkHost checks a URL's host: an address, or a name and every address
// it resolves to.
func (p *Policy) checkHost(ctx context.Context, host string) error {
	if a, err := netip.ParseAddr(strings.TrimSuffix(host, ".")); err == nil {
		return p.CheckAddr(a)
	}
	if err := p.checkName(host); err != nil {
		return err
	}
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("%w: the host name %s does not resolve from the server", ErrRefused, host)
	}
	for _, a := range addrs {
		if err := p.CheckAddr(a); err != nil {
			return fmt.Errorf("%w: %s resolves to %s, inside the server's own networks", ErrRefused, host, a.Unmap())
		}
	}
	return nil
}

// checkName refuses metadata and localhost names and numbers that some
// resolvers read as IPv4 addresses (2130706433, 0x7f.1, 0177.0.0.1, 127.1).
func (p *Policy) checkName(host string) error {
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, m := range metadataNames {
		if name == m || strings.HasSuffix(name, "."+m) {
			return fmt.Errorf("%w: %s names the server itself or a cloud metadata service", ErrRefused, host)
		}
	}
	if _, ok := legacyIPv4(name); ok {
		return fmt.Errorf("%w: %s is an IPv4 address in another spelling; write it as four decimal numbers", ErrRefused, host)
	}
	return nil
}

// legacyIPv4 parses the forms inet_aton accepts: one to four parts, each
// decimal, octal (leading 0) or hex (0x), the last filling the rest.
func legacyIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, part := range parts {
		if part == "" {
			return netip.Addr{}, false
		}
		base := 10
		digits := part
		switch {
		case strings.HasPrefix(digits, "0x") || strings.HasPrefix(digits, "0X"):
			base, digits = 16, digits[2:]
			if digits == "" {
				digits = "0"
			}
		case len(digits) > 1 && digits[0] == '0':
			base, digits = 8, digits[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// DialContext connects to address (host:port) only through addresses the
// policy allows: a name is resolved here and each address checked before
// it is dialed, and the socket's own remote address is checked again
// before connect.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.TrimSuffix(host, ".")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if err := p.checkName(host); err != nil {
			return nil, err
		}
		if addrs, err = p.resolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, fmt.Errorf("egress: resolve %s: %w", host, err)
		}
	}
	for _, a := range addrs {
		if err := p.CheckAddr(a); err != nil {
			return nil, err
		}
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}
	var errs []error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("egress: %s has no address", host)
	}
	return nil, errors.Join(errs...)
}

// control checks the address the socket is about to connect to.
func (p *Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s is not an address", ErrRefused, address)
	}
	return p.CheckAddr(ap.Addr())
}

// Transport is an HTTP transport that dials through the policy and never
// through a proxy (a proxy would dial on our behalf, unchecked).
func (p *Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = p.DialContext
	t.Proxy = nil
	return t
}
