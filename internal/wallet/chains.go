package wallet

import (
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/ledgerq/ledgerq/internal/config"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger"
	"github.com/ledgerq/ledgerq/internal/ledger/evmnodes"
)

// ChainDecl declares one chain the wallet lane sends on (docs/design.md,
// "Chains and nodes"): its name (what wallets name), its chain id (every
// node must report it), its nodes, and the lane's settings that differ by
// chain. A setting left zero is the lane's own (Config).
type ChainDecl struct {
	// Name is what a wallet names (NAME@CHAIN=FILE) and what statuses,
	// logs and metrics show.
	Name string
	// ChainID is the chain's EIP-155 id.
	ChainID int64
	// Nodes are read from and sent to; SendOnly are only sent to (a
	// private mempool, a relay).
	Nodes, SendOnly []string
	// Confirmations, when not 0, is the chain's depth (Config.Confirmations).
	Confirmations int
	// PriceCap, when set, is the chain's fee cap ceiling for bumps
	// (Config.PriceCap).
	PriceCap *big.Int
	// MinTip, when set, is the least priority fee the chain's transactions
	// offer (Config.MinTip).
	MinTip *big.Int
	// StallTimeout, when not 0, is the chain's stall timeout.
	StallTimeout time.Duration
	// CallTimeout, when not 0, bounds one call to one of its nodes.
	CallTimeout time.Duration
	// BumpPercent, when not 0, is the chain's gas bump (Config.BumpPercent).
	BumpPercent int
	// Legacy: the chain prices by a legacy gas price (pricing=legacy;
	// pricing=eip1559, the default, by fee caps).
	Legacy bool
	// Sim, in Go only: the chain is the in-process simulated chain, with no
	// nodes (ledgerq dev); SimJournal is its journal file.
	Sim        bool
	SimJournal string
	// Instance, in Go only, is the chain's ledger in this process instead
	// of nodes (tests, benchmarks).
	Instance ledger.WalletLedger
}

// String is the declaration as --wallet-chain takes it, without the
// nodes' URLs, which may hold keys.
func (d ChainDecl) String() string {
	parts := []string{"name=" + d.Name, "chain-id=" + strconv.FormatInt(d.ChainID, 10)}
	for range d.Nodes {
		parts = append(parts, "node=***")
	}
	for range d.SendOnly {
		parts = append(parts, "send-only=***")
	}
	if d.Confirmations != 0 {
		parts = append(parts, "confirmations="+strconv.Itoa(d.Confirmations))
	}
	if d.PriceCap != nil {
		parts = append(parts, "price-cap="+d.PriceCap.String())
	}
	if d.MinTip != nil {
		parts = append(parts, "min-tip="+d.MinTip.String())
	}
	if d.StallTimeout != 0 {
		parts = append(parts, "stall-timeout="+d.StallTimeout.String())
	}
	if d.CallTimeout != 0 {
		parts = append(parts, "call-timeout="+d.CallTimeout.String())
	}
	if d.BumpPercent != 0 {
		parts = append(parts, "bump-percent="+strconv.Itoa(d.BumpPercent))
	}
	if d.Legacy {
		parts = append(parts, "pricing=legacy")
	}
	return strings.Join(parts, ",")
}

// ParseChainDecl parses one declaration: comma-separated key=value pairs,
// node and send-only repeatable:
//
//	name=base,chain-id=8453,node=https://a.example/KEY,node=https://b.example,send-only=https://relay.example,confirmations=12,price-cap=200000000000,min-tip=1000000,stall-timeout=2m,call-timeout=3s
func ParseChainDecl(v string) (ChainDecl, error) {
	var d ChainDecl
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, val, ok := strings.Cut(part, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !ok {
			return d, fmt.Errorf("chain: %q: want key=value", part)
		}
		var err error
		switch k {
		case "name":
			d.Name = val
		case "chain-id":
			d.ChainID, err = strconv.ParseInt(val, 10, 64)
		case "node":
			d.Nodes = append(d.Nodes, val)
		case "send-only":
			d.SendOnly = append(d.SendOnly, val)
		case "confirmations":
			d.Confirmations, err = strconv.Atoi(val)
		case "price-cap":
			d.PriceCap, err = weiValue(val)
		case "min-tip":
			d.MinTip, err = weiValue(val)
		case "stall-timeout":
			d.StallTimeout, err = time.ParseDuration(val)
		case "call-timeout":
			d.CallTimeout, err = time.ParseDuration(val)
		case "bump-percent":
			d.BumpPercent, err = strconv.Atoi(val)
		case "pricing":
			switch val {
			case "legacy":
				d.Legacy = true
			case "eip1559":
				d.Legacy = false
			default:
				err = fmt.Errorf("want eip1559 or legacy, got %q", val)
			}
		default:
			return d, fmt.Errorf("chain %s: unknown key %q (want name, chain-id, node, send-only, confirmations, price-cap, min-tip, stall-timeout, call-timeout, bump-percent, pricing)", d.Name, k)
		}
		if err != nil {
			return d, fmt.Errorf("chain %s: %s: %w", d.Name, k, err)
		}
	}
	return d, d.Validate()
}

func weiValue(s string) (*big.Int, error) {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok || v.Sign() < 0 || v.BitLen() > 256 {
		return nil, fmt.Errorf("want a decimal amount of wei, got %q", s)
	}
	return v, nil
}

// Validate reports what cannot work in one declaration.
func (d ChainDecl) Validate() error {
	var errs []error
	if !keystore.ValidID(d.Name) {
		errs = append(errs, fmt.Errorf("chain %q: a name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", d.Name))
	}
	if d.ChainID <= 0 {
		errs = append(errs, fmt.Errorf("chain %s: chain-id must be a positive number, got %d", d.Name, d.ChainID))
	}
	if len(d.Nodes) == 0 && !d.Sim && d.Instance == nil {
		errs = append(errs, fmt.Errorf("chain %s: at least one node (node=URL) is needed", d.Name))
	}
	for _, u := range append(append([]string{}, d.Nodes...), d.SendOnly...) {
		p, err := url.ParseRequestURI(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("chain %s: node %q is not an http or https URL", d.Name, evmnodes.Redact(u)))
		}
	}
	if d.Confirmations < 0 || d.Confirmations > maxConfirmations {
		errs = append(errs, fmt.Errorf("chain %s: confirmations must be from 0 to %d, got %d", d.Name, maxConfirmations, d.Confirmations))
	}
	if d.BumpPercent != 0 && (d.BumpPercent < 10 || d.BumpPercent > 1000) {
		errs = append(errs, fmt.Errorf("chain %s: bump-percent must be from 10 to 1000, got %d", d.Name, d.BumpPercent))
	}
	if d.StallTimeout < 0 || d.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("chain %s: stall-timeout and call-timeout must not be negative", d.Name))
	}
	return errors.Join(errs...)
}

// Chains is the repeatable --wallet-chain setting (a flag.Value; in the
// configuration file a list of mappings). Several declarations in one
// value are separated by ';'.
type Chains []ChainDecl

// KeyValues marks Chains as a setting of key=value pairs
// (config.KeyValues).
func (*Chains) KeyValues() {}

// String lists the declarations, without URLs.
func (l *Chains) String() string {
	if l == nil {
		return ""
	}
	return config.JoinKeyValues(*l)
}

// Set adds the declarations of v.
func (l *Chains) Set(v string) error {
	return config.AppendKeyValues((*[]ChainDecl)(l), v, ParseChainDecl)
}

// Validate reports declarations that clash: two with one name or one
// chain id.
func (l Chains) Validate() error {
	names, ids := map[string]bool{}, map[int64]string{}
	var errs []error
	for _, d := range l {
		if err := d.Validate(); err != nil {
			errs = append(errs, err)
		}
		if names[d.Name] {
			errs = append(errs, fmt.Errorf("chain %s is declared twice", d.Name))
		}
		if other, dup := ids[d.ChainID]; dup {
			errs = append(errs, fmt.Errorf("chains %s and %s have the same chain id %d", other, d.Name, d.ChainID))
		}
		names[d.Name], ids[d.ChainID] = true, d.Name
	}
	return errors.Join(errs...)
}

// On returns c with d's settings where d sets them: the lane's
// configuration on d's chain.
func (c Config) On(d ChainDecl) Config {
	if d.Confirmations != 0 {
		c.Confirmations = d.Confirmations
	}
	if d.PriceCap != nil {
		c.PriceCap = d.PriceCap
	}
	if d.MinTip != nil {
		c.MinTip = d.MinTip
	}
	if d.StallTimeout != 0 {
		c.StallTimeout = d.StallTimeout
	}
	if d.BumpPercent != 0 {
		c.BumpPercent = d.BumpPercent
	}
	if d.Legacy {
		c.Legacy = true
	}
	return c
}

// NewTx builds a transaction of the lane's pricing: EIP-1559 with fees'
// caps, or, for a chain priced by Legacy, a legacy one whose gas price is
// the fee suggestion's base fee plus tip (fees.FeeCap is 2 × base fee + tip,
// ledger.FeesOver) — or the fee cap itself when it is no more than the tip
// (a bump's, or a chain without a base fee).
func (c Config) NewTx(chainID *big.Int, nonce, gas uint64, to *common.Address, value *big.Int, data []byte, fees ledger.Fees) *types.Transaction {
	if c.Legacy {
		return types.NewTx(&types.LegacyTx{Nonce: nonce, GasPrice: LegacyPrice(fees), Gas: gas, To: to, Value: value, Data: data})
	}
	return types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: nonce, GasTipCap: fees.TipCap, GasFeeCap: fees.FeeCap, Gas: gas, To: to, Value: value, Data: data})
}

// LegacyPrice is the legacy gas price of a fee suggestion: its base fee
// plus its tip.
func LegacyPrice(f ledger.Fees) *big.Int {
	if f.FeeCap.Cmp(f.TipCap) <= 0 {
		return new(big.Int).Set(f.FeeCap)
	}
	base := new(big.Int).Sub(f.FeeCap, f.TipCap)
	base.Quo(base, big.NewInt(2))
	return base.Add(base, f.TipCap)
}

// AtLeastTip returns the fee suggestion f with its tip raised to min (nil:
// none) and its fee cap by as much, so that the room for the base fee
// stays.
func AtLeastTip(f ledger.Fees, min *big.Int) ledger.Fees {
	if min == nil || f.TipCap == nil || f.TipCap.Cmp(min) >= 0 {
		return f
	}
	raise := new(big.Int).Sub(min, f.TipCap)
	return ledger.Fees{TipCap: new(big.Int).Set(min), FeeCap: new(big.Int).Add(f.FeeCap, raise)}
}
