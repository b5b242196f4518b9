package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/ledgerq/ledgerq/internal/batch"
	"github.com/ledgerq/ledgerq/internal/builder"
	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/ledger/evmsim"
	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/node"
	"github.com/ledgerq/ledgerq/internal/pgcluster"
	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/wallet"
)

// runDev runs ledgerq on its embedded default: a private PostgreSQL cluster
// under --data-dir (unless DATABASE_URL is set), the simulated ledger in this
// process, the API and every loop.
func runDev(ctx context.Context, args []string) error {
	var dataDir string
	cfg := devDefaults()
	_, err := parseNodeFlags("dev", "Run ledgerq on its embedded default: a private PostgreSQL cluster started from the local\nPostgreSQL binaries under --data-dir (or the database at DATABASE_URL when set), the simulated\nledger in-process, the HTTP API and every loop. Ctrl-C stops ledgerq and the cluster; a second\nrun reuses the data.",
		&cfg, devParts, args, "info", func(fs *flag.FlagSet) {
			fs.StringVar(&dataDir, "data-dir", ".ledgerq", "directory of the private PostgreSQL cluster")
		})
	if err != nil {
		return err
	}
	logger := cfg.Logger
	cfg.Batch.Ledger.Kind = batch.LedgerSim
	if cfg.DatabaseURL == "" {
		if err := cfg.ValidateSettings(); err != nil {
			return err
		}
		dir, err := filepath.Abs(dataDir)
		if err != nil {
			return err
		}
		startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		cluster, err := pgcluster.Start(startCtx, pgcluster.Options{DataDir: dir, Logger: logger})
		cancel()
		if err != nil {
			return fmt.Errorf("starting the private PostgreSQL cluster in %s: %w", dir, err)
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cluster.Stop(stopCtx); err != nil {
				logger.Error("dev: stopping PostgreSQL", "error", err)
			} else {
				logger.Info("dev: PostgreSQL stopped")
			}
		}()
		if err := cluster.CreateDatabase(ctx, "ledgerq"); err != nil {
			return err
		}
		cfg.DatabaseURL = cluster.ConnString("ledgerq")
		logger.Info("dev: private PostgreSQL running", "data_dir", dir, "database_url", node.RedactURL(cfg.DatabaseURL))
	}
	dev, err := devWalletLane(&cfg, dataDir)
	if err != nil {
		return err
	}
	if err := devBuilderLane(&cfg, dataDir); err != nil {
		return err
	}
	n, err := node.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	token, err := devAPIKey(ctx, n.Store(), dataDir, cfg.Clock)
	if err != nil {
		return err
	}
	return n.Serve(ctx, func(addr string) {
		fmt.Fprintf(os.Stdout, "ledgerq dev: API at http://%s (simulated ledgers; Ctrl-C to stop)\n", addr)
		printDevConsole(os.Stdout, addr, token)
		printDevWallet(os.Stdout, addr, dev, token)
		printDevBuilder(os.Stdout, addr, cfg.Builder.Pool.ChainID)
	})
}

// devDefaults are the settings dev starts from: node.Defaults, with
// webhook endpoints allowed at non-public addresses, since a developer's
// receivers are on this machine (--wallet-webhook-allow-private=false restores the
// rule).
func devDefaults() node.Config {
	c := node.Defaults()
	c.Wallet.Webhooks.AllowPrivate = true
	return c
}

// devWalletName is the wallet ledgerq dev creates and signs for.
const devWalletName = "dev"

// devWalletLane configures the wallet lane of ledgerq dev: a dev wallet kept
// in dataDir (a keystore file and its passphrase), funded on a simulated EVM
// chain (chain id 1337, a block a second) whose mined transactions are
// journaled in dataDir, so that a second run finds the same chain.
func devWalletLane(cfg *node.Config, dataDir string) (keystore.DevWallet, error) {
	dir, err := filepath.Abs(filepath.Join(dataDir, "wallets"))
	if err != nil {
		return keystore.DevWallet{}, err
	}
	dev, err := keystore.EnsureDevWallet(dir, devWalletName)
	if err != nil {
		return dev, fmt.Errorf("dev wallet: %w", err)
	}
	pass, err := keystore.ReadPassphraseFile(dev.PassphraseFile)
	if err != nil {
		return dev, fmt.Errorf("dev wallet: %w", err)
	}
	signer, err := keystore.OpenKeystore(dev.Spec.Path, pass)
	if err != nil {
		return dev, fmt.Errorf("dev wallet: %w", err)
	}
	// The same key is a wallet on each chain, as a team's hot wallet often
	// is on Ethereum and an L2.
	reg, err := keystore.NewRegistry(
		keystore.Wallet{ID: devWalletName, ChainID: devChainID, Signer: signer},
		keystore.Wallet{ID: devWalletNameB, ChainID: devChainIDB, Signer: signer})
	if err != nil {
		return dev, err
	}
	w := &cfg.Wallet
	w.Registry = reg
	// A keystore wallet added at run time (POST /v1/wallets, backend
	// keystore) names a file of this directory, unlocked by the dev
	// wallet's passphrase file unless its own is set.
	w.Signers.KeystoreDir = dir
	if w.PassphraseFiles.All == "" {
		w.PassphraseFiles.All = dev.PassphraseFile
	}
	w.Ledger.Kind, w.Ledger.URL = node.WalletLedgerEVM, ""
	w.Ledger.Sim = evmsim.Config{BlockPeriod: time.Second, Alloc: node.FundAlloc(devFunds, signer.Address())}
	w.Chains = wallet.Chains{
		{Name: devChainName, ChainID: devChainID, Sim: true, SimJournal: filepath.Join(dir, "evmsim-chain.journal")},
		{Name: devChainNameB, ChainID: devChainIDB, Sim: true, SimJournal: filepath.Join(dir, "evmsim-chain-b.journal")},
	}
	return dev, nil
}

// The second wallet and chain of ledgerq dev: the dev wallet's key on a
// second simulated chain, so that a newcomer sees one process serve two.
const (
	devWalletNameB = "dev-b"
	devChainName   = "dev"
	devChainNameB  = "dev-b"
	devChainIDB    = 31337
)

// devBuilderLane configures the builder lane of ledgerq dev: the simulated
// JAM chain in this process, its EVM funding the development mnemonic's
// accounts, with what it executed journaled in dataDir beside the private
// database, so that a second run finds the same chain as the same
// database. Its slots are 2 s, a third of JAM's, so that a client waits a
// few seconds for its receipt.
func devBuilderLane(cfg *node.Config, dataDir string) error {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("dev builder lane: %w", err)
	}
	b := &cfg.Builder
	b.Enabled = true
	b.Ledger.Kind = builder.LedgerSim
	b.Ledger.Sim.FundDevAccounts = true
	b.Ledger.Sim.Journal = filepath.Join(dir, "jam-chain.journal")
	if b.Ledger.Sim.SlotLength == 0 {
		b.Ledger.Sim.SlotLength = 2 * time.Second
	}
	return nil
}

// printDevBuilder tells how to send a transaction to the builder lane with
// an Ethereum client, from the development mnemonic's first account.
func printDevBuilder(w io.Writer, addr string, chainID int64) {
	acct := jam.DevAccounts()[0]
	fmt.Fprintf(w, `ledgerq dev: Ethereum JSON-RPC for the builder lane at http://%s/rpc (chain id %d); the accounts of the mnemonic
"test test test test test test test test test test test junk" hold 10000 ether each. With Foundry's cast or ethers:
  cast send --rpc-url http://%s/rpc --private-key %s 0x000000000000000000000000000000000000dEaD --value 1wei
  node -e 'const {JsonRpcProvider,Wallet}=require("ethers");new Wallet("%s",new JsonRpcProvider("http://%s/rpc")).sendTransaction({to:"0x000000000000000000000000000000000000dEaD",value:1n}).then(t=>t.wait()).then(r=>console.log(r.status,r.blockNumber))'
`, addr, chainID, addr, hexutil.Encode(crypto.FromECDSA(acct.Key)), hexutil.Encode(crypto.FromECDSA(acct.Key)), addr)
}

// devChainID is the simulated chain's id in ledgerq dev, geth --dev's.
const devChainID = 1337

// devFunds is the dev wallet's genesis balance: 1000 ether.
var devFunds = new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18))

// devAPIKey returns the dev wallet's API key, kept in dataDir/dev-api-key
// (0600): the one stored there if the database still knows it, else a new
// one. The database stores only its hash.
func devAPIKey(ctx context.Context, st *store.Store, dataDir string, clk clock.Clock) (string, error) {
	file := filepath.Join(dataDir, "dev-api-key")
	if b, err := os.ReadFile(file); err == nil {
		token := strings.TrimSpace(string(b))
		k, err := st.APIKeyLookup(ctx, token)
		if err == nil && k.Has(store.ScopeAdmin) {
			return token, nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", fmt.Errorf("dev API key: %w", err)
		}
	}
	if clk == nil {
		clk = clock.Real{}
	}
	_, token, err := st.APIKeyCreate(ctx, store.APIKeyCreateParams{Now: clk.Now(), Name: "ledgerq dev", Scopes: []store.Scope{store.ScopeAdmin}})
	if err != nil {
		return "", fmt.Errorf("dev API key: %w", err)
	}
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("dev API key: %w", err)
	}
	return token, nil
}

// printDevConsole tells where the operator console is and the key that
// logs in to it (the dev key is admin: pages and actions).
func printDevConsole(w io.Writer, addr, token string) {
	fmt.Fprintf(w, "ledgerq dev: console at http://%s/ui/ (log in with the admin key %s)\n", addr, token)
}

// printDevWallet tells how to send a transaction from the dev wallet and
// follow it to Done.
func printDevWallet(w io.Writer, addr string, dev keystore.DevWallet, token string) {
	fmt.Fprintf(w, `ledgerq dev: wallet %q is %s on the simulated EVM chain %d (keystore %s)
ledgerq dev: its API key (kept in the data directory) is %s
Send 1 wei and wait until the transaction is mined:
  curl -sS -X POST http://%s/v1/wallets/%s/send-tx -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{"to":"0x000000000000000000000000000000000000dEaD","value":"1"}'
Or fire and forget, then poll the task's status (the Hathor headless wallet's status route) until "status":"Done":
  curl -sS -X POST 'http://%s/v1/wallets/%s/send-tx?task=true' -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{"to":"0x000000000000000000000000000000000000dEaD","value":"1"}'
  curl -sS http://%s/wallet/tasks/send-tx/TASK_ID -H 'X-Wallet-ID: %s' -H 'Authorization: Bearer %s'
`, devWalletName, dev.Address.Hex(), devChainID, dev.Spec.Path, token,
		addr, devWalletName, token, addr, devWalletName, token, addr, devWalletName, token)
	fmt.Fprintf(w, `ledgerq dev: wallet %q is the same key on a second simulated chain, %d; the chains and their nodes:
  curl -sS http://%s/v1/chains -H 'Authorization: Bearer %s'
  curl -sS -X POST http://%s/v1/wallets/%s/send-tx -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{"to":"0x000000000000000000000000000000000000dEaD","value":"1"}'
`, devWalletNameB, devChainIDB, addr, token, addr, devWalletNameB, token)
}
