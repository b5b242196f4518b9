package testcontracts_test

import (
	"bytes"
	"crypto/ecdsa"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/testanvil"
	"github.com/ledgerq/ledgerq/internal/testcontracts"
	"github.com/ledgerq/ledgerq/internal/testnode"
)

// The committed artefacts are what the committed sources compile to: the
// test runs test/contracts/build.sh (the pinned solc) into a temporary
// directory and compares every file byte for byte. Without node or the
// installed compiler it skips, and fails under CI=true (.ci/run installs
// it with npm ci in test/contracts).
func TestArtefacts_AreWhatTheSourcesCompileTo(t *testing.T) {
	t.Parallel()
	contracts := filepath.Join("..", "..", "test", "contracts")
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not on PATH"
	} else if _, err := os.Stat(filepath.Join(contracts, "node_modules", "solc", "solc.js")); err != nil {
		missing = "the compiler is not installed (cd test/contracts && npm ci)"
	}
	if missing != "" {
		if testnode.InCI() {
			t.Fatalf("CI=true and the artefacts cannot be checked: %s", missing)
		}
		t.Skipf("skipped: %s", missing)
	}
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(contracts, "build.sh"), out)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "build.sh: %s", b)

	committed := listFiles(t, "artefacts")
	compiled := listFiles(t, out)
	require.Equal(t, compiled, committed, "the committed artefacts are the compiled ones (run test/contracts/build.sh)")
	for _, name := range compiled {
		want, err := os.ReadFile(filepath.Join(out, name))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("artefacts", name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "artefacts/%s is stale: run test/contracts/build.sh", name)
	}
	var names []string
	for _, c := range testcontracts.Contracts {
		names = append(names, string(c)+".abi", string(c)+".bin")
	}
	require.Equal(t, names, committed, "Contracts lists every compiled contract")
}

func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// Deployed from the artefacts on a real node, TestToken holds its supply
// at its deployer and moves it by transfer (a Transfer event), refuses an
// unfunded transfer with a revert, and Reverter answers its state.
func TestDeploy_TheArtefactsRunOnARealNode(t *testing.T) {
	t.Parallel()
	node := testanvil.Start(t, testanvil.Automine())
	client := node.Client()
	key := node.Keys[0]
	supply := new(big.Int).Mul(big.NewInt(1_000_000), big.NewInt(1e18))
	token := testcontracts.Deploy(t, client, key, testcontracts.TestToken, "Test", "TST", supply)
	owner := crypto.PubkeyToAddress(key.PublicKey)
	require.Equal(t, supply, testcontracts.BalanceOf(t, client, token, owner))
	require.Equal(t, "TST", testcontracts.Call(t, client, testcontracts.TestToken, token, "symbol")[0])

	to := common.HexToAddress("0x00000000000000000000000000000000000b0b01")
	r := testcontracts.Transact(t, client, key, testcontracts.TestToken, token, "transfer", to, big.NewInt(42))
	require.Equal(t, types.ReceiptStatusSuccessful, r.Status)
	require.Len(t, r.Logs, 1, "one Transfer event")
	require.Equal(t, big.NewInt(42), testcontracts.BalanceOf(t, client, token, to))

	other := node.Keys[1]
	r = transactAnyway(t, node, other, token)
	require.Equal(t, types.ReceiptStatusFailed, r.Status, "a transfer its sender cannot pay reverts")

	rev := testcontracts.Deploy(t, client, key, testcontracts.Reverter)
	require.Equal(t, false, testcontracts.Call(t, client, testcontracts.Reverter, rev, "armed")[0])
	testcontracts.Transact(t, client, key, testcontracts.Reverter, rev, "arm", true)
	require.Equal(t, true, testcontracts.Call(t, client, testcontracts.Reverter, rev, "armed")[0])
}

// transactAnyway sends a transfer key cannot pay with a fixed gas limit (an
// estimate would fail on the revert).
func transactAnyway(t *testing.T, node *testanvil.Node, key *ecdsa.PrivateKey, token common.Address) *types.Receipt {
	t.Helper()
	ctx := t.Context()
	data, err := testcontracts.ABI(testcontracts.TestToken).Pack("transfer", common.Address{1}, big.NewInt(1))
	require.NoError(t, err)
	from := crypto.PubkeyToAddress(key.PublicKey)
	nonce, err := node.Client().PendingNonceAt(ctx, from)
	require.NoError(t, err)
	head, err := node.Client().HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(node.ChainID), &types.DynamicFeeTx{
		ChainID: node.ChainID, Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(1e9)),
		Gas: 100_000, To: &token, Data: data,
	})
	require.NoError(t, err)
	require.NoError(t, node.Client().SendTransaction(ctx, tx))
	return node.WaitMined(t, tx.Hash())
}
