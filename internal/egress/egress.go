// Package egress decides which addresses ledgerq may connect to on a user's
// behalf: webhook endpoints are URLs a wallet's owner chooses, and ledgerq
// POSTs to them from inside the operator's network, so a URL naming a
// loopback, private, link-local or otherwise internal address (a cloud's
// metadata service at 169.254.169.254, an admin port on 127.0.0.1) would let
// any API key holder make ledgerq send requests there. The rule is applied
// twice: when an endpoint is registered (CheckTarget, on the literal address
// or every address its name resolves to), and when a delivery connects
// (NewClient's dialer, on the address actually dialled), because a name may
// resolve elsewhere by then (DNS rebinding). allowPrivate lifts it for
// loopback receivers (tests, ledgerq dev).
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrNotPublic is what CheckAddr's refusals match (errors.Is).
var ErrNotPublic = errors.New("non-public address")

// AddrError is CheckAddr's refusal: the address and the range it is in.
type AddrError struct {
	Addr  netip.Addr
	Range string
}

func (e *AddrError) Error() string {
	return fmt.Sprintf("%s is a %s (%s)", e.Addr, ErrNotPublic, e.Range)
}

// Unwrap makes errors.Is(err, ErrNotPublic) hold.
func (e *AddrError) Unwrap() error { return ErrNotPublic }

// addrRange is a prefix CheckAddr refuses and the name it gives it.
type addrRange struct {
	prefix netip.Prefix
	name   string
}

func ranges(pairs ...string) []addrRange {
	out := make([]addrRange, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, addrRange{prefix: netip.MustParsePrefix(pairs[i]), name: pairs[i+1]})
	}
	return out
}

// nonPublic4 are the IPv4 ranges that are not the public internet (the IANA
// special-purpose registry's not-globally-reachable entries and the
// reserved space), most specific first where they nest.
var nonPublic4 = ranges(
	"0.0.0.0/8", "this network",
	"10.0.0.0/8", "private",
	"100.64.0.0/10", "carrier-grade NAT",
	"127.0.0.0/8", "loopback",
	"169.254.0.0/16", "link-local",
	"172.16.0.0/12", "private",
	"192.0.0.0/24", "IETF protocol assignments",
	"192.0.2.0/24", "documentation",
	"192.88.99.0/24", "6to4 relay anycast",
	"192.168.0.0/16", "private",
	"198.18.0.0/15", "benchmarking",
	"198.51.100.0/24", "documentation",
	"203.0.113.0/24", "documentation",
	"224.0.0.0/4", "multicast",
	"255.255.255.255/32", "broadcast",
	"240.0.0.0/4", "reserved",
)

// nonPublic6 are the IPv6 ranges refused by name; anything else outside
// 2000::/3 (global unicast) is refused too, except NAT64 and 6to4, which
// are judged by the IPv4 address they carry.
var nonPublic6 = ranges(
	"::/128", "unspecified",
	"::1/128", "loopback",
	"::ffff:0:0:0/96", "IPv4-translated",
	"::/96", "IPv4-compatible, deprecated",
	"64:ff9b:1::/48", "local-use NAT64",
	"100::/64", "discard-only",
	"2001::/32", "Teredo",
	"2001:2::/48", "benchmarking",
	"2001::/23", "IETF protocol assignments",
	"2001:db8::/32", "documentation",
	"3fff::/20", "documentation",
	"5f00::/16", "segment routing",
	"fc00::/7", "unique local",
	"fe80::/10", "link-local",
	"fec0::/10", "site-local, deprecated",
	"ff00::/8", "multicast",
)

var (
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour     = netip.MustParsePrefix("2002::/16")
	globalUnicast = netip.MustParsePrefix("2000::/3")
)

// CheckAddr returns nil when a is a public unicast address, one a webhook
// may be delivered to, and else an *AddrError (errors.Is ErrNotPublic)
// naming why not: loopback, private (RFC 1918, fc00::/7), link-local,
// carrier-grade NAT, unspecified, multicast, broadcast, reserved,
// documentation and benchmarking ranges, and IPv6 outside global unicast.
// An IPv4-mapped address is judged as its IPv4 address, and so are the
// IPv4 addresses NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses carry.
// An address with a zone is link-scoped, so it is refused whatever it is.
func CheckAddr(a netip.Addr) error {
	switch {
	case !a.IsValid():
		return &AddrError{Addr: a, Range: "not an IP address"}
	case a.Zone() != "":
		return &AddrError{Addr: a, Range: "has a zone, so is link-scoped"}
	case a.Is4In6():
		if err := CheckAddr(a.Unmap()); err != nil {
			return &AddrError{Addr: a, Range: err.(*AddrError).Range + ", IPv4-mapped"}
		}
		return nil
	case a.Is4():
		for _, r := range nonPublic4 {
			if r.prefix.Contains(a) {
				return &AddrError{Addr: a, Range: r.name}
			}
		}
		return nil
	}
	for _, r := range nonPublic6 {
		if r.prefix.Contains(a) {
			return &AddrError{Addr: a, Range: r.name}
		}
	}
	b := a.As16()
	var carried netip.Addr
	switch {
	case nat64.Contains(a):
		carried = netip.AddrFrom4([4]byte(b[12:16]))
	case sixToFour.Contains(a):
		carried = netip.AddrFrom4([4]byte(b[2:6]))
	case !globalUnicast.Contains(a):
		return &AddrError{Addr: a, Range: "outside the global unicast range 2000::/3"}
	default:
		return nil
	}
	if err := CheckAddr(carried); err != nil {
		return &AddrError{Addr: a, Range: fmt.Sprintf("%s, carries %s", err.(*AddrError).Range, carried)}
	}
	return nil
}

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// resolveTimeout bounds the lookup of an endpoint's host name at
// registration.
const resolveTimeout = 3 * time.Second

// ParseURL parses an endpoint's URL and refuses what no delivery could
// reach: anything but an absolute http or https URL with a host and, if
// given, a port from 1 to 65535. A user and password are allowed (they are
// sent as basic authentication); a fragment is refused, since it is never
// sent. Its errors never repeat the URL, which may hold a password.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("want an http or https URL")
	case u.Opaque != "":
		return nil, errors.New("want an absolute URL: http:// or https://, then the host")
	case strings.Contains(raw, "#"):
		return nil, errors.New("a fragment (#…) is never sent to the endpoint: leave it out")
	case u.Hostname() == "":
		return nil, errors.New("no host")
	}
	if port, given := urlPort(u.Host); given {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %q: want a number from 1 to 65535", port)
		}
	}
	return u, nil
}

// urlPort returns the port of a URL's host[:port] and whether one was given:
// a colon after the host, even with nothing after it (which is refused).
func urlPort(hostport string) (port string, given bool) {
	i := strings.LastIndex(hostport, ":")
	if i < 0 || i < strings.LastIndex(hostport, "]") {
		return "", false
	}
	return hostport[i+1:], true
}

// CheckTarget refuses an endpoint's URL at registration: one ParseURL
// refuses, one whose host name does not resolve (within a few seconds),
// and, unless allowPrivate, one whose literal address or any address its
// name resolves to is not public (CheckAddr). r resolves names.
func CheckTarget(ctx context.Context, raw string, allowPrivate bool, r Resolver) error {
	u, err := ParseURL(raw)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		if allowPrivate && a.Zone() == "" {
			return nil
		}
		return CheckAddr(a)
	}
	if strings.HasPrefix(u.Host, "[") {
		return fmt.Errorf("host %q is not an IP address", host)
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err == nil && len(addrs) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			err = errors.New(dnsErr.Err)
		}
		return fmt.Errorf("host %q does not resolve: %v", host, err)
	}
	if allowPrivate {
		return nil
	}
	for _, a := range addrs {
		var refused *AddrError
		if errors.As(CheckAddr(a), &refused) {
			return fmt.Errorf("host %q resolves to %s, a %w (%s)", host, refused.Addr, ErrNotPublic, refused.Range)
		}
	}
	return nil
}

// RedactURL returns a URL with its password, if it has one, replaced by
// xxxxx: an endpoint's URL as the API shows it (the stored URL keeps it, for
// delivery), and the database's as logs and errors show it.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}
