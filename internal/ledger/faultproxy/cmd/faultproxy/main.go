// Command faultproxy runs the fault-injecting JSON-RPC proxy in front of one
// EVM node, to watch by hand what a client does with a provider's failures:
//
//	go run ./internal/ledger/faultproxy/cmd/faultproxy -upstream http://127.0.0.1:8545 -listen 127.0.0.1:8546 -rate-limit 0.1 -lag 0.1 -lag-blocks 3
//
// It prints the fault counts every -report interval and on SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger/faultproxy"
)

func main() {
	var cfg faultproxy.Config
	upstream := flag.String("upstream", "http://127.0.0.1:8545", "the node's JSON-RPC URL")
	listen := flag.String("listen", "127.0.0.1:8546", "the address to serve on")
	methods := flag.String("methods", "", "comma-separated JSON-RPC methods the faults apply to (empty: all)")
	report := flag.Duration("report", 10*time.Second, "how often to print the counts (0: only at exit)")
	flag.Int64Var(&cfg.Seed, "seed", time.Now().UnixNano(), "seed of the draws")
	flag.Float64Var(&cfg.RateLimit, "rate-limit", 0, "probability of an HTTP 429 with Retry-After")
	flag.DurationVar(&cfg.RetryAfter, "retry-after", time.Second, "the 429's Retry-After")
	flag.Float64Var(&cfg.BadGateway, "bad-gateway", 0, "probability of a 502 or 503")
	flag.Float64Var(&cfg.ResetBeforeForward, "reset", 0, "probability of a connection reset before forwarding")
	flag.Float64Var(&cfg.LoseSendAnswer, "lose-send-answer", 0, "probability that a forwarded eth_sendRawTransaction's answer is lost (reset)")
	flag.Float64Var(&cfg.Slow, "slow", 0, "probability of an answer held for -slow-delay")
	flag.DurationVar(&cfg.SlowDelay, "slow-delay", 10*time.Second, "how long a slow answer is held")
	flag.Float64Var(&cfg.Lag, "lag", 0, "probability of an answer from a node -lag-blocks behind")
	flag.Uint64Var(&cfg.LagBlocks, "lag-blocks", 3, "how many blocks a lagging answer is behind")
	flag.Parse()
	if *methods != "" {
		cfg.Methods = strings.Split(*methods, ",")
	}
	p, err := faultproxy.New(*upstream, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	url, err := p.StartOn(*listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("faultproxy: %s -> %s (seed %d)\n", url, *upstream, cfg.Seed)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	var tick <-chan time.Time
	if *report > 0 {
		t := time.NewTicker(*report)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			printCounts(p)
		case <-sig:
			p.Close()
			printCounts(p)
			return
		}
	}
}

func printCounts(p *faultproxy.Proxy) {
	c := p.Counts()
	if len(c) == 0 {
		fmt.Println("faultproxy: no requests yet")
		return
	}
	parts := make([]string, 0, len(c))
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
	}
	fmt.Printf("faultproxy: %s\n", strings.Join(parts, " "))
}
