package egress

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// NewClient returns an HTTP client for requests to users' URLs. Its dialer checks the
// address it is about to connect to (dialControl), after the name was
// resolved, so a name that resolved to a public address at registration and
// to an internal one now (DNS rebinding) is still refused. It uses no proxy
// from the environment (the proxy would make the connection, to wherever
// the URL says) and follows no redirect (a 3xx is a failed attempt, and a
// redirect could point anywhere).
func NewClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: dialControl(allowPrivate)}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// dialControl is a net.Dialer's Control: it runs for every address the
// dialer tries, resolved, just before it connects, and refuses a
// non-public one (CheckAddr) unless allowPrivate. A name resolving to
// several addresses is connected to on a public one only.
func dialControl(allowPrivate bool) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if allowPrivate {
			return nil
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("egress: connecting to %s %q: not an IP address and port", network, address)
		}
		return CheckAddr(ap.Addr())
	}
}
