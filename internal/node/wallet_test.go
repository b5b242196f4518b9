package node_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

func walletConfig(t *testing.T) node.Config {
	t.Helper()
	reg, err := keystore.NewRegistry(keystore.Wallet{ID: "w", ChainID: 1337, Signer: testfactory.NewSigner(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := node.Defaults()
	c.DatabaseURL = "postgres://unused"
	c.Wallet.Registry = reg
	c.Wallet.Ledger.Kind = node.WalletLedgerSim
	return c
}

func TestWalletConfig_DefaultsAreValid(t *testing.T) {
	t.Parallel()
	c := walletConfig(t)
	if err := c.Validate(); err != nil {
		t.Fatalf("the defaults with one wallet: %v", err)
	}
}

func TestWalletConfig_ShardLeaseMustOutlastTwoWalletCycles(t *testing.T) {
	t.Parallel()
	c := walletConfig(t)
	c.Wallet.Shards.Lease = 10 * time.Second // < 2 × (5 s budget + 10 s ledger timeout)
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--shard-lease") {
		t.Fatalf("Validate = %v, want the --shard-lease error", err)
	}
	c.Wallet.Lane.CycleBudget, c.Wallet.Lane.LedgerTimeout = time.Second, 2*time.Second
	if err := c.Validate(); err != nil {
		t.Fatalf("a lease of twice budget + timeout: %v", err)
	}
}

func TestWalletConfig_RefusesWhatCannotRun(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*node.Config){
		"evm without url":   func(c *node.Config) { c.Wallet.Ledger.Kind = node.WalletLedgerEVM },
		"unknown ledger":    func(c *node.Config) { c.Wallet.Ledger.Kind = "bitcoin" },
		"queue type":        func(c *node.Config) { c.Wallet.Lane.QueueType = "lifo" },
		"in-flight":         func(c *node.Config) { c.Wallet.Lane.InFlight = 0 },
		"retention":         func(c *node.Config) { c.Wallet.RetentionAge = -time.Second },
		"webhook retention": func(c *node.Config) { c.Wallet.Webhooks.RetentionAge = -time.Second },
		"webhook retention without batch": func(c *node.Config) {
			c.Wallet.RetentionAge, c.Wallet.RetentionBatchSize = 0, 0
		},
		"audit retention": func(c *node.Config) { c.Access.AuditAge = -time.Second },
		"access retention without interval": func(c *node.Config) {
			c.Access.Interval = -time.Second
		},
		"no webhooks":     func(c *node.Config) { c.API.Webhooks.MaxEndpoints = 0 },
		"negative linger": func(c *node.Config) { c.Wallet.Lane.SendLinger = -time.Millisecond },
		"linger past the cycle budget": func(c *node.Config) {
			c.Wallet.Lane.SendLinger = c.Wallet.Lane.CycleBudget
		},
	} {
		c := walletConfig(t)
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}
