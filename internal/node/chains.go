package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// defaultChainName names the chain of the one-chain shorthand
// (--wallet-ledger, --wallet-ledger-url).
const defaultChainName = "default"

// startChainIDWait is how long a start asks a node for the chain id of the
// shorthand's chain when none is given.
const startChainIDWait = 30 * time.Second

// laneChain is one chain of the wallet lane: its declaration, its ledger
// and, for a chain behind nodes, the node layer that shows their health.
type laneChain struct {
	decl wallet.ChainDecl
	led  ledger.WalletLedger
	// nodes is the node layer; nil for a ledger in this process (the
	// simulated chain, a test's instance).
	nodes *evmnodes.Chain
	close func()
}

// status is the chain as GET /v1/chains shows it.
func (c *laneChain) status(ctx context.Context) evmnodes.ChainStatus {
	if c.nodes != nil {
		return c.nodes.Status()
	}
	st := evmnodes.ChainStatus{Name: c.decl.Name, ChainID: c.decl.ChainID, State: evmnodes.ChainHealthy}
	ns := evmnodes.NodeStatus{Name: "in-process", URL: "in-process", State: evmnodes.NodeHealthy}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	head, err := c.led.HeadBlock(ctx)
	if err != nil {
		st.State, ns.State, ns.LastError = evmnodes.ChainUnavailable, evmnodes.NodeDown, err.Error()
	}
	st.Head, ns.Head = head.Number, head.Number
	st.Nodes = []evmnodes.NodeStatus{ns}
	return st
}

// openChains opens the wallet lane's chains: the shorthand's one chain
// (a test's instance, the simulated chain, or one node at
// --wallet-ledger-url), then every declared chain (--wallet-chain). A chain
// behind nodes opens while none answers, when its chain id is declared.
func (n *Node) openChains(ctx context.Context) ([]*laneChain, error) {
	w := &n.cfg.Wallet
	var out []*laneChain
	fail := func(err error) ([]*laneChain, error) {
		for _, c := range out {
			c.close()
		}
		return nil, err
	}
	lc := &w.Ledger
	switch {
	case lc.Instance != nil:
		id, err := ReadChainID(ctx, lc.Instance, w.Lane.LedgerTimeout)
		if err != nil {
			return nil, fmt.Errorf("wallet lane: %w", err)
		}
		out = append(out, &laneChain{decl: wallet.ChainDecl{Name: defaultChainName, ChainID: id}, led: lc.Instance, close: func() {}})
	case lc.Kind == WalletLedgerSim:
		led, closeLed, err := openEVMSim(lc.Sim, lc.SimJournal, n.clock)
		if err != nil {
			return nil, err
		}
		id, err := ReadChainID(ctx, led, w.Lane.LedgerTimeout)
		if err != nil {
			closeLed()
			return nil, fmt.Errorf("wallet lane: %w", err)
		}
		out = append(out, &laneChain{decl: wallet.ChainDecl{Name: defaultChainName, ChainID: id, Sim: true}, led: led, close: closeLed})
	case lc.URL != "":
		c, err := n.openNodes(ctx, wallet.ChainDecl{Name: defaultChainName, ChainID: lc.ChainID, Nodes: []string{lc.URL}})
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	for _, d := range w.Chains {
		for _, c := range out {
			if c.decl.ChainID == d.ChainID || c.decl.Name == d.Name {
				return fail(fmt.Errorf("wallet lane: chain %s (%d) is declared twice (--wallet-chain and the --wallet-ledger shorthand's chain %d)", d.Name, d.ChainID, c.decl.ChainID))
			}
		}
		if d.Instance != nil {
			out = append(out, &laneChain{decl: d, led: d.Instance, close: func() {}})
			continue
		}
		if d.Sim {
			sc := lc.Sim
			sc.ChainID = d.ChainID
			led, closeLed, err := openEVMSim(sc, d.SimJournal, n.clock)
			if err != nil {
				return fail(err)
			}
			out = append(out, &laneChain{decl: d, led: led, close: closeLed})
			continue
		}
		c, err := n.openNodes(ctx, d)
		if err != nil {
			return fail(err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("wallet lane: no chain: give --wallet-ledger-url or --wallet-chain")
	}
	return out, nil
}

// openNodes opens a chain behind its nodes. Without a declared chain id
// (the shorthand without --wallet-chain-id) the id is read from the node
// at start, and a node that does not answer stops the start.
func (n *Node) openNodes(ctx context.Context, d wallet.ChainDecl) (*laneChain, error) {
	lane := &n.cfg.Wallet.Lane
	callTimeout := d.CallTimeout
	if callTimeout == 0 {
		callTimeout = min(lane.LedgerTimeout/2, 4*time.Second)
	}
	cfg := evmnodes.Config{
		Name: d.Name, ChainID: d.ChainID, Confirmations: lane.On(d).ConfirmationsOn(d.ChainID),
		CallTimeout: callTimeout, HeadWindow: lane.RewindAfter, Logger: n.logger,
		OnAvailable: func() {
			if n.wallet != nil && n.wallet.follower != nil {
				n.wallet.follower.Poke()
			}
		},
	}
	if o, ok := any(n.metrics).(evmnodes.Observer); ok {
		cfg.Observer = o
	}
	for _, u := range d.Nodes {
		cfg.Nodes = append(cfg.Nodes, evmnodes.NodeConfig{URL: u})
	}
	for _, u := range d.SendOnly {
		cfg.Nodes = append(cfg.Nodes, evmnodes.NodeConfig{URL: u, SendOnly: true})
	}
	c, err := evmnodes.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("wallet lane: %w", err)
	}
	if d.ChainID == 0 {
		// A provider that rate-limits or fails now and then must not stop
		// the start: the id is asked for until startChainIDWait passes.
		var id int64
		var err error
		for began := time.Now(); ; {
			if id, err = ReadChainID(ctx, c, lane.LedgerTimeout); err == nil || time.Since(began) > startChainIDWait || ctx.Err() != nil {
				break
			}
			n.logger.Warn("wallet lane: the node did not tell its chain id yet, asking again", "chain", d.Name, "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("wallet lane: %w (give --wallet-chain-id, or declare the chain with --wallet-chain, to start while the node does not answer)", err)
		}
		d.ChainID = id
	}
	return &laneChain{decl: d, led: c, nodes: c, close: c.Close}, nil
}

// ChainStatuses are the wallet lane's chains and their nodes as they are
// now (GET /v1/chains, /readyz, the console); nil without the lane.
func (n *Node) ChainStatuses(ctx context.Context) []evmnodes.ChainStatus {
	if n.wallet == nil {
		return nil
	}
	out := make([]evmnodes.ChainStatus, len(n.wallet.chains))
	for i, c := range n.wallet.chains {
		out[i] = c.status(ctx)
		// The depth the lane waits for on the chain, its default (by chain
		// id) included.
		out[i].Confirmations = n.cfg.Wallet.Lane.On(c.decl).ConfirmationsOn(c.decl.ChainID)
	}
	return out
}
