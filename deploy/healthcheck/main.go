// Command healthcheck asks a ledgerq API in the same container whether it is
// up, for Docker and compose healthchecks: the image has no shell and no
// curl. It exits 0 when the answer is 2xx and 1 otherwise, with the reason on
// stderr.
//
// Usage: healthcheck [PATH | URL]
//
// PATH (default /healthz; /readyz asks whether the database answers and is
// migrated) is asked of the address in LEDGERQ_API_ADDR (or its old name
// LEDGERQ_HTTP_ADDR, which ledgerq still reads), the one the API listens on
// (127.0.0.1:8080 when unset), with a wildcard host such as
// 0.0.0.0 replaced by the loopback address. A full http:// URL is asked as
// is.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// timeout bounds the whole request: Docker's own healthcheck timeout (30s by
// default) would otherwise be the only bound.
const timeout = 3 * time.Second

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "healthcheck: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 1 {
		return fmt.Errorf("usage: healthcheck [PATH | URL]")
	}
	target := "/healthz"
	if len(args) == 1 {
		target = args[0]
	}
	url, err := targetURL(target, apiAddr())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// apiAddr is the API's listen address as ledgerq reads it from the
// environment: LEDGERQ_API_ADDR, else its deprecated name LEDGERQ_HTTP_ADDR.
func apiAddr() string {
	if addr := os.Getenv("LEDGERQ_API_ADDR"); addr != "" {
		return addr
	}
	return os.Getenv("LEDGERQ_HTTP_ADDR")
}

// targetURL turns the argument into the URL to ask, using addr (the API's
// listen address) for a bare path.
func targetURL(target, addr string) (string, error) {
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		return target, nil
	}
	if !strings.HasPrefix(target, "/") {
		return "", fmt.Errorf("%q is neither a path nor an http:// URL", target)
	}
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("the API's address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + target, nil
}
