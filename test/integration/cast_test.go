package integration

// Foundry's cast (pinned in test/clients' package-lock.json, as
// @foundry-rs/cast, whose platform package ships the Linux binary) against
// the builder lane's POST /rpc, as a developer uses it: the send line
// ledgerq dev prints, then sends waited for and not, a deployment, calls,
// estimates and reads — and the same commands against anvil, the control
// that shows what they answer on a node. Each send is judged by the chain:
// its receipt, and its hash in the block the receipt names. Without cast the
// tests are skipped, except in CI (CI set), where they fail.

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/testanvil"
)

// castBinary is LEDGERQ_TEST_CAST, else the cast test/clients' npm ci
// installed.
func castBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("LEDGERQ_TEST_CAST")
	if bin == "" {
		if _, err := exec.LookPath("node"); err != nil && os.Getenv("CI") == "" {
			t.Skip("node and npm are needed to install Foundry's cast (test/clients)")
		}
		bin = filepath.Join(clientsDir(t), "node_modules", "@foundry-rs", "cast-linux-amd64", "bin", "cast")
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Foundry's cast is not at %s; CI runs the cast tests", bin)
		}
		t.Skipf("Foundry's cast is not at %s", bin)
	}
	return bin
}

// castRun is cast against one JSON-RPC endpoint.
type castRun struct {
	t   *testing.T
	bin string
	url string
}

// run runs cast with args (--rpc-url added after the subcommand) and
// returns its standard output, trimmed; it fails t on an error.
func (c castRun) run(args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := append([]string{args[0], "--rpc-url", c.url}, args[1:]...)
	cmd := exec.CommandContext(ctx, c.bin, all...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FOUNDRY_DISABLE_NIGHTLY_WARNING=1")
	out, err := cmd.Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(c.t, err, "cast %s\n%s%s", strings.Join(all, " "), out, stderr)
	return strings.TrimSpace(string(out))
}

// jsonOf decodes cast's --json output.
func (c castRun) jsonOf(out string) map[string]any {
	c.t.Helper()
	var m map[string]any
	require.NoError(c.t, json.Unmarshal([]byte(out), &m), "cast's JSON: %s", out)
	return m
}

// receiptInItsBlock checks, from the chain's block, that the receipt's
// transaction is in the block the receipt names.
func (c castRun) receiptInItsBlock(receipt map[string]any) {
	c.t.Helper()
	require.Equal(c.t, "0x1", receipt["status"], "the receipt's status: %v", receipt)
	number, err := hexutil.DecodeUint64(receipt["blockNumber"].(string))
	require.NoError(c.t, err)
	block := c.jsonOf(c.run("block", strconv.FormatUint(number, 10), "--json"))
	require.Equal(c.t, receipt["blockHash"], block["hash"], "the receipt's block is the chain's block %d", number)
	require.Contains(c.t, block["transactions"], receipt["transactionHash"], "block %d holds the transaction", number)
}

// The contract castSuite deploys: its runtime answers 42 to every call
// (PUSH1 42 PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN), its init code copies
// the runtime and returns it.
const (
	castRuntime  = "0x602a60005260206000f3"
	castInitCode = "0x600a600c600039600a6000f3" + "602a60005260206000f3"
)

// castSuite runs the commands a developer uses, as key, on the endpoint of
// a chain with chainID: chain-id, balance, nonce, estimate, send waited
// for, send --async then receipt, tx, send --create then code and call,
// block.
func castSuite(t *testing.T, c castRun, chainID int64, key *ecdsa.PrivateKey) {
	t.Helper()
	from := crypto.PubkeyToAddress(key.PublicKey).Hex()
	keyHex := hexutil.Encode(crypto.FromECDSA(key))
	const dead = "0x000000000000000000000000000000000000dEaD"

	require.Equal(t, strconv.FormatInt(chainID, 10), c.run("chain-id"))
	balance, ok := new(big.Int).SetString(c.run("balance", from), 10)
	require.True(t, ok)
	require.Positive(t, balance.Sign(), "the sender is funded")
	nonce, err := strconv.ParseUint(c.run("nonce", from), 10, 64)
	require.NoError(t, err)
	require.Equal(t, "21000", c.run("estimate", "--from", from, dead, "--value", "1wei"))

	sent := c.jsonOf(c.run("send", "--private-key", keyHex, dead, "--value", "1wei", "--json"))
	c.receiptInItsBlock(sent)

	hash := c.run("send", "--async", "--private-key", keyHex, dead, "--value", "2wei")
	require.Regexp(t, `^0x[0-9a-f]{64}$`, hash)
	receipt := c.jsonOf(c.run("receipt", hash, "--json"))
	require.Equal(t, hash, receipt["transactionHash"])
	c.receiptInItsBlock(receipt)
	tx := c.jsonOf(c.run("tx", hash, "--json"))
	require.Equal(t, strings.ToLower(from), strings.ToLower(tx["from"].(string)))
	require.Equal(t, hexutil.EncodeUint64(nonce+1), tx["nonce"])
	require.Equal(t, "0x2", tx["value"])

	created := c.jsonOf(c.run("send", "--private-key", keyHex, "--create", castInitCode, "--json"))
	c.receiptInItsBlock(created)
	contract, _ := created["contractAddress"].(string)
	require.Regexp(t, `^0x[0-9a-fA-F]{40}$`, contract, "the deployment's receipt names the contract")
	require.Equal(t, castRuntime, c.run("code", contract))
	require.Equal(t, "42", c.run("call", contract, "value()(uint256)"))

	require.Equal(t, strconv.FormatUint(nonce+3, 10), c.run("nonce", from), "three sends, three nonces")
	after, ok := new(big.Int).SetString(c.run("balance", from), 10)
	require.True(t, ok)
	require.Negative(t, after.Cmp(balance), "the sends paid for their gas")
	latest := c.jsonOf(c.run("block", "latest", "--json"))
	number, err := hexutil.DecodeUint64(latest["number"].(string))
	require.NoError(t, err)
	createdAt, err := hexutil.DecodeUint64(created["blockNumber"].(string))
	require.NoError(t, err)
	require.GreaterOrEqual(t, number, createdAt, "latest is at or past the deployment's block")
	t.Logf("cast against %s: chain %d, %d sends from %s each in its block, deployed %s", c.url, chainID, 3, from, contract)
}

// castSendSucceeded matches cast send's receipt as it prints it.
var castSendSucceeded = regexp.MustCompile(`(?m)^status\s+1 \(success\)$`)

// TestCast_TheLineLedgerqDevPrintsAndFoundrysCommandsWorkOnTheBuilderLane
// runs the cast send line ledgerq dev prints, as printed (cast swapped for
// the pinned binary), once: it must print a receipt with status 1 on its
// first run. Then the other commands, from another of the mnemonic's
// accounts.
func TestCast_TheLineLedgerqDevPrintsAndFoundrysCommandsWorkOnTheBuilderLane(t *testing.T) {
	t.Parallel()
	bin := castBinary(t)
	dev := newDevRun(t)
	p := dev.start()
	var line string
	eventually(t, 10*time.Second, "ledgerq dev printed its cast line", func() bool {
		for _, l := range strings.Split(p.Stdout.String(), "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "cast send ") {
				line = l
			}
		}
		return line != ""
	})
	out := shell(t, strings.Replace(line, "cast", bin, 1))
	require.Regexp(t, castSendSucceeded, out, "the printed cast line prints a receipt with status 1 on its first run")
	hash := regexp.MustCompile(`(?m)^transactionHash\s+(0x[0-9a-f]{64})$`).FindStringSubmatch(out)
	require.NotNil(t, hash, out)
	c := castRun{t: t, bin: bin, url: "http://" + dev.addr + "/rpc"}
	c.receiptInItsBlock(c.jsonOf(c.run("receipt", hash[1], "--json")))
	castSuite(t, c, 1337, jam.DevAccounts()[1].Key)
}

// TestCast_FoundrysCommandsWorkAgainstServeAndAJAMChainProcess: the same
// commands against `serve --builder` in front of `simledger --kind jam`.
func TestCast_FoundrysCommandsWorkAgainstServeAndAJAMChainProcess(t *testing.T) {
	t.Parallel()
	bin := castBinary(t)
	api := serveBuilderOnAJAMChainProcess(t)
	castSuite(t, castRun{t: t, bin: bin, url: api + "/rpc"}, 1337, jam.DevAccounts()[2].Key)
}

// TestCast_FoundrysCommandsWorkAgainstAnvil is the control: the same
// commands on a node, so that a change in cast shows there first.
func TestCast_FoundrysCommandsWorkAgainstAnvil(t *testing.T) {
	t.Parallel()
	bin := castBinary(t)
	node := testanvil.Start(t)
	castSuite(t, castRun{t: t, bin: bin, url: node.URL}, node.ChainID.Int64(), node.Keys[0])
}
