package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evm"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// ChainNodes is one chain of a run over several (--chain): its name and
// the JSON-RPC URLs of its nodes. The lane reaches the chain through every
// node (evmnodes, as serve does); the run funds the chain's wallets from
// the first node's developer account and checks the chain through it.
type ChainNodes struct {
	Name  string
	Nodes []string
}

// ParseChainNodes reads --chain's NAME=URL[,URL...].
func ParseChainNodes(s string) (ChainNodes, error) {
	name, urls, ok := strings.Cut(s, "=")
	if !ok || !keystore.ValidID(name) {
		return ChainNodes{}, fmt.Errorf("--chain %q: want NAME=URL[,URL...], a name of letters, digits, '_', '.' or '-'", s)
	}
	c := ChainNodes{Name: name}
	for u := range strings.SplitSeq(urls, ",") {
		p, err := url.ParseRequestURI(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return ChainNodes{}, fmt.Errorf("--chain %s: node %q is not an http or https URL", name, node.RedactURL(u))
		}
		c.Nodes = append(c.Nodes, u)
	}
	return c, nil
}

// validateChains reports the first problem with a run over several chains.
func (c *WalletConfig) validateChains() error {
	if len(c.Chains) == 0 {
		return nil
	}
	names := map[string]bool{}
	for _, ch := range c.Chains {
		if names[ch.Name] {
			return fmt.Errorf("--chain %s is given twice", ch.Name)
		}
		names[ch.Name] = true
		if len(ch.Nodes) == 0 {
			return fmt.Errorf("--chain %s has no node", ch.Name)
		}
	}
	switch {
	case c.Ledger != WalletLedgerEVM:
		return errors.New("--chain is for --ledger evm")
	case c.LedgerURL != "":
		return errors.New("--chain and --ledger-url are two ways to name the chains: give one")
	case c.Baseline != BaselineNone:
		return errors.New("--baseline direct runs on one chain (--ledger-url)")
	case c.Wallets < len(c.Chains):
		return fmt.Errorf("--wallets %d: each of the %d chains needs a wallet at least", c.Wallets, len(c.Chains))
	}
	return nil
}

// runChain is one chain of a run.
type runChain struct {
	name string
	// nodes are its nodes' URLs; none for the simulated chain.
	nodes []string
	id    int64
	// ledger is the chain read directly, through its first node (the
	// funding, the direct sender, the chain-side checks and the block
	// clock); lane is what the node is given: the node layer over every
	// node, counted.
	ledger ledger.WalletLedger
	lane   *countingLedger
	// blocks tells when each of its blocks was first seen.
	blocks *blockClock
	// wallets are the indexes of its wallets in walletRun.wallets.
	wallets []int
	closers []func()
}

func (c *runChain) close() {
	if c.blocks != nil {
		c.blocks.close()
	}
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
}

// specs are the run's chains as configured: --chain's, or the one chain
// of --ledger-url.
func (c *WalletConfig) specs() []ChainNodes {
	if len(c.Chains) > 0 {
		return c.Chains
	}
	return []ChainNodes{{Name: "bench", Nodes: []string{c.LedgerURL}}}
}

// openEVMChain dials a chain's first node (for the run's own reads) and
// reads its chain id.
func (r *walletRun) openEVMChain(ctx context.Context, spec ChainNodes) (*runChain, error) {
	timeout := r.cfg.Node.Wallet.Lane.LedgerTimeout
	l, err := evm.Dial(ctx, spec.Nodes[0], evm.Config{CallTimeout: timeout})
	if err != nil {
		return nil, err
	}
	ch := &runChain{name: spec.Name, nodes: spec.Nodes, ledger: l, closers: []func(){l.Close}}
	if ch.id, err = node.ReadChainID(ctx, l, timeout); err != nil {
		ch.close()
		return nil, fmt.Errorf("chain %s: %w", spec.Name, err)
	}
	return ch, nil
}

// openLane puts the chain behind the node layer over all of its nodes, as
// serve does for a chain declared with its nodes, and counts the lane's
// calls into counts.
func (ch *runChain) openLane(laneTimeout time.Duration, counts *callCounts) error {
	cfg := evmnodes.Config{Name: ch.name, ChainID: ch.id, CallTimeout: min(laneTimeout/2, 4*time.Second)}
	for _, u := range ch.nodes {
		cfg.Nodes = append(cfg.Nodes, evmnodes.NodeConfig{URL: u})
	}
	nodes, err := evmnodes.New(cfg)
	if err != nil {
		return fmt.Errorf("chain %s: %w", ch.name, err)
	}
	ch.closers = append(ch.closers, nodes.Close)
	ch.lane = newCountingLedger(nodes, counts)
	return nil
}

// decl declares the chain to the node, its ledger the run's counted node
// layer.
func (ch *runChain) decl() wallet.ChainDecl {
	return wallet.ChainDecl{Name: ch.name, ChainID: ch.id, Instance: ch.lane}
}

// ChainResult is one chain's part of a run.
type ChainResult struct {
	Name    string
	ChainID int64
	// Nodes counts the nodes the lane reached it through; 0 for the
	// simulated chain.
	Nodes   int
	Wallets int
	Done    int
	// MinedTime runs from the run's first enqueue to when the block of the
	// chain's last done task's transaction was first seen; MinedRate is
	// Done / MinedTime.
	MinedTime time.Duration
	MinedRate float64
}

// minedOn reads when the chain's done transactions were mined, by its own
// block clock, into res; it returns the last time and each transaction's
// latency from its task's creation.
func (ch *runChain) minedOn(ctx context.Context, start time.Time, hashes []common.Hash, created []time.Time, timeout time.Duration, res *ChainResult) (time.Time, []time.Duration, error) {
	mined, err := ch.blocks.minedTimes(ctx, ch.ledger, hashes, timeout)
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("chain %s: %w", ch.name, err)
	}
	last, lat := lastAndLatencies(mined, created)
	res.MinedTime = last.Sub(start)
	if res.MinedTime > 0 {
		res.MinedRate = float64(len(mined)) / res.MinedTime.Seconds()
	}
	return last, lat, nil
}

// chainsLines are the summary's lines of a run over several chains: the
// chains and their nodes, then mined/s on each.
func chainsLines(rep *WalletReport) (config, results []string) {
	if len(rep.Config.Chains) == 0 {
		return nil, nil
	}
	for i, ch := range rep.Chains {
		nodes := make([]string, len(rep.Config.Chains[i].Nodes))
		for j, u := range rep.Config.Chains[i].Nodes {
			nodes[j] = node.RedactURL(u)
		}
		config = append(config, fmt.Sprintf("  chain %-11s chain id %d, wallets %d, through %d nodes: %s", ch.Name, ch.ChainID, ch.Wallets, ch.Nodes, strings.Join(nodes, ", ")))
		results = append(results, fmt.Sprintf("  mined on %-8s %.1f tasks/s (%d from first enqueue to its last one's block seen in %s)", ch.Name, ch.MinedRate, ch.Done, round(ch.MinedTime)))
	}
	return config, results
}
