package egress_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/egress"
)

func TestCheckAddr_OnlyPublicUnicastAddressesPass(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		// Public: "" (no refusal).
		"8.8.8.8":              "",
		"1.1.1.1":              "",
		"93.184.215.14":        "",
		"100.63.255.255":       "", // just below carrier-grade NAT
		"100.128.0.0":          "", // just above it
		"172.15.255.255":       "", // just below 172.16/12
		"172.32.0.0":           "", // just above it
		"192.0.1.1":            "",
		"198.17.255.255":       "",
		"198.20.0.0":           "",
		"223.255.255.255":      "",
		"2606:4700:4700::1111": "",
		"2a00:1450:4001::200e": "",
		"::ffff:8.8.8.8":       "", // IPv4-mapped form of a public address
		"64:ff9b::808:808":     "", // NAT64 of 8.8.8.8
		"2002:808:808::1":      "", // 6to4 of 8.8.8.8

		// IPv4.
		"0.0.0.0":         "this network",
		"0.1.2.3":         "this network",
		"10.0.0.1":        "private",
		"10.255.255.255":  "private",
		"100.64.0.1":      "carrier-grade NAT",
		"100.127.255.255": "carrier-grade NAT",
		"127.0.0.1":       "loopback",
		"127.255.255.254": "loopback",
		"169.254.169.254": "link-local",
		"172.16.0.1":      "private",
		"172.31.255.255":  "private",
		"192.0.0.8":       "IETF protocol assignments",
		"192.0.2.1":       "documentation",
		"192.88.99.1":     "6to4 relay anycast",
		"192.168.1.1":     "private",
		"198.18.0.1":      "benchmarking",
		"198.19.255.255":  "benchmarking",
		"198.51.100.7":    "documentation",
		"203.0.113.9":     "documentation",
		"224.0.0.1":       "multicast",
		"239.255.255.250": "multicast",
		"240.0.0.1":       "reserved",
		"255.255.255.255": "broadcast",

		// IPv6.
		"::":                     "unspecified",
		"::1":                    "loopback",
		"fe80::1":                "link-local",
		"febf::1":                "link-local",
		"fec0::1":                "site-local",
		"fc00::1":                "unique local",
		"fd12:3456::1":           "unique local",
		"ff02::1":                "multicast",
		"ff0e::1":                "multicast",
		"2001:db8::1":            "documentation",
		"3fff::1":                "documentation",
		"2001::1":                "Teredo",
		"2001:2::1":              "benchmarking",
		"2001:10::1":             "IETF protocol assignments",
		"100::1":                 "discard-only",
		"64:ff9b:1::1":           "local-use NAT64",
		"5f00::1":                "segment routing",
		"4000::1":                "outside the global unicast range",
		"::ffff:127.0.0.1":       "loopback",
		"::ffff:169.254.169.254": "link-local",
		"::ffff:10.1.2.3":        "private",
		"::127.0.0.1":            "IPv4-compatible",
		"::8.8.8.8":              "IPv4-compatible",
		"::ffff:0:7f00:1":        "IPv4-translated",
		"64:ff9b::7f00:1":        "loopback",
		"64:ff9b::a9fe:a9fe":     "link-local",
		"64:ff9b::c0a8:101":      "private",
		"2002:7f00:1::1":         "loopback",
		"2002:a9fe:a9fe::":       "link-local",
		"2002:c0a8:101::1":       "private",
		"2002:6440:1::1":         "carrier-grade NAT",
		"fe80::1%eth0":           "zone",
	} {
		err := egress.CheckAddr(netip.MustParseAddr(addr))
		if want == "" {
			require.NoError(t, err, addr)
			continue
		}
		require.Error(t, err, addr)
		require.ErrorIs(t, err, egress.ErrNotPublic, addr)
		require.Contains(t, err.Error(), want, addr)
		require.Contains(t, err.Error(), "non-public address", addr)
	}
	require.ErrorIs(t, egress.CheckAddr(netip.Addr{}), egress.ErrNotPublic, "the zero Addr")
}

// hosts is a Resolver over a fixed table; a name not in it does not resolve.
type hosts map[string][]string

func (h hosts) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := h[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = netip.MustParseAddr(a)
	}
	return out, nil
}

func TestCheckTarget_RefusesMalformedAndNonPublicTargets(t *testing.T) {
	t.Parallel()
	r := hosts{
		"hooks.example":    {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
		"mixed.example":    {"93.184.215.14", "10.0.0.7"},
		"metadata.example": {"169.254.169.254"},
		"mapped.example":   {"::ffff:127.0.0.1"},
		"empty.example":    {},
		"localhost":        {"127.0.0.1", "::1"},
	}
	ctx := context.Background()
	for raw, want := range map[string]string{
		"https://hooks.example/a":                 "",
		"http://hooks.example:8080/a?x=1":         "",
		"https://user:pw@hooks.example/a":         "",
		"HTTPS://hooks.example/a":                 "",
		"https://93.184.215.14/a":                 "",
		"https://[2606:4700:4700::1111]:443/":     "",
		"https://hooks.example:65535/":            "",
		"ftp://hooks.example/a":                   "http or https",
		"hooks.example/a":                         "http or https",
		"/a":                                      "http or https",
		"http:hooks.example":                      "absolute",
		"https://":                                "no host",
		"https://:80/":                            "no host",
		"https://user@:80/":                       "no host",
		"https://hooks.example:99999/":            "port",
		"https://hooks.example:0/":                "port",
		"https://hooks.example:/":                 "port",
		"https://hooks.example:http/":             "port",
		"https://hooks.example/a#frag":            "fragment",
		"https://hooks.example/a#":                "fragment",
		"http://169.254.169.254/latest/meta-data": "link-local",
		"http://127.0.0.1:8080/":                  "loopback",
		"http://[::1]/":                           "loopback",
		"http://[::ffff:127.0.0.1]/":              "loopback",
		"http://10.1.2.3/":                        "private",
		"http://100.64.0.1/":                      "carrier-grade NAT",
		"http://0.0.0.0/":                         "this network",
		"http://[fe80::1%25eth0]/":                "zone",
		"http://localhost:9000/":                  "loopback",
		"http://metadata.example/":                "link-local",
		"http://mapped.example/":                  "loopback",
		"http://mixed.example/":                   "private",
		"http://nowhere.example/":                 "does not resolve",
		"http://empty.example/":                   "does not resolve",
	} {
		err := egress.CheckTarget(ctx, raw, false, r)
		if want == "" {
			require.NoError(t, err, raw)
			continue
		}
		require.Error(t, err, raw)
		require.Contains(t, err.Error(), want, raw)
		require.NotContains(t, err.Error(), "pw", "a refusal never repeats a password: %s", raw)
	}

	// Allowed private: loopback and private receivers pass; a malformed URL
	// or a name that does not resolve is still refused.
	for _, raw := range []string{"http://127.0.0.1:8080/", "http://localhost:9000/", "http://10.1.2.3/", "http://[::1]/"} {
		require.NoError(t, egress.CheckTarget(ctx, raw, true, r), raw)
	}
	for raw, want := range map[string]string{
		"https://:80/":                 "no host",
		"http://127.0.0.1:99999/":      "port",
		"http://nowhere.example/":      "does not resolve",
		"http://127.0.0.1/#x":          "fragment",
		"gopher://127.0.0.1/":          "http or https",
		"http://user:pw@127.0.0.1:0/x": "port",
	} {
		err := egress.CheckTarget(ctx, raw, true, r)
		require.Error(t, err, raw)
		require.Contains(t, err.Error(), want, raw)
		require.False(t, strings.Contains(err.Error(), "pw"), raw)
	}
}

func TestRedactURL_HidesThePasswordOnly(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"https://user:secret@hooks.example/a?b=1": "https://user:xxxxx@hooks.example/a?b=1",
		"https://user@hooks.example/a":            "https://user@hooks.example/a",
		"https://hooks.example/a":                 "https://hooks.example/a",
		"https://:secret@hooks.example/":          "https://:xxxxx@hooks.example/",
	} {
		require.Equal(t, want, egress.RedactURL(raw), raw)
	}
}
