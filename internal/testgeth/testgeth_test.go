package testgeth_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"math/big"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"

	"github.com/ledgerq/ledgerq/internal/testgeth"
)

// revertingInit deploys a contract whose code is PUSH1 0 PUSH1 0 REVERT.
var revertingInit = common.FromHex("0x6005600c60003960056000f3" + "60006000fd")

var oneEther = big.NewInt(params.Ether)

// account is a fresh key that a test funds and sends from.
type account struct {
	key  *ecdsa.PrivateKey
	addr common.Address
}

func newAccount(t *testing.T) account {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return account{key: key, addr: crypto.PubkeyToAddress(key.PublicKey)}
}

// send signs and sends an EIP-1559 transaction with the given tip and a fee
// cap of tip + 2 × the head's base fee.
func send(t *testing.T, n *testgeth.Node, from account, nonce uint64, to *common.Address, value *big.Int, gas uint64, tip *big.Int, data []byte) *types.Transaction {
	t.Helper()
	ctx := context.Background()
	head, err := n.Client().HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	feeCap := new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	tx, err := types.SignNewTx(from.key, types.LatestSignerForChainID(n.ChainID), &types.DynamicFeeTx{
		ChainID: n.ChainID, Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap, Gas: gas, To: to, Value: value, Data: data,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Client().SendTransaction(ctx, tx); err != nil {
		t.Fatalf("sending nonce %d: %v", nonce, err)
	}
	return tx
}

// TestDevNode: one node, the rules that need only a plain dev chain.
func TestDevNode(t *testing.T) {
	t.Parallel()
	n := testgeth.Start(t)

	t.Run("AnswersOnChain1337WithAFundedDevAccount", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		id, err := n.Client().ChainID(ctx)
		if err != nil || id.Int64() != testgeth.DevChainID || n.ChainID.Int64() != testgeth.DevChainID {
			t.Fatalf("chain id = %v, %v (Node.ChainID %v); want %d", id, err, n.ChainID, testgeth.DevChainID)
		}
		bal, err := n.Client().BalanceAt(ctx, n.Dev, nil)
		if err != nil || bal.Cmp(new(big.Int).Mul(oneEther, big.NewInt(1_000_000))) < 0 {
			t.Fatalf("dev account %s balance = %v, %v; want at least a million ether", n.Dev.Hex(), bal, err)
		}
		if !strings.HasPrefix(n.URL, "http://127.0.0.1:") || n.Version == "" {
			t.Fatalf("URL %q, Version %q; want a loopback URL and a version", n.URL, n.Version)
		}
	})

	t.Run("MakesABlockEverySecond", func(t *testing.T) {
		t.Parallel()
		first := head(t, n)
		// --dev.period 1 makes blocks with or without transactions; without
		// it a dev node only makes one when a transaction arrives.
		deadline := time.Now().Add(20 * time.Second)
		for {
			cur := head(t, n)
			if cur >= first+2 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("head stayed at %d (from %d) for 20s; want new blocks every second", cur, first)
			}
			time.Sleep(200 * time.Millisecond) // an outside process's clock: nothing to drive
		}
	})

	t.Run("WaitHeadAndNonceReadTheHead", func(t *testing.T) {
		t.Parallel()
		a := newAccount(t)
		n.Fund(t, a.addr, oneEther)
		if got := n.Nonce(t, a.addr); got != 0 {
			t.Fatalf("Nonce of a fresh account = %d; want 0", got)
		}
		to := common.Address{0xab}
		r := n.WaitMined(t, send(t, n, a, 0, &to, big.NewInt(1), params.TxGas, big.NewInt(params.GWei), nil).Hash())
		if got := n.Nonce(t, a.addr); got != 1 {
			t.Fatalf("Nonce after one mined transaction = %d; want 1", got)
		}
		want := r.BlockNumber.Uint64() + 2
		if head := n.WaitHead(t, want); head < want {
			t.Fatalf("WaitHead(%d) = %d", want, head)
		}
		if head, err := n.Client().BlockNumber(context.Background()); err != nil || head < want {
			t.Fatalf("head after WaitHead(%d) = %d, %v", want, head, err)
		}
	})

	t.Run("FundPaysFromTheDevAccountAndWaitsForTheReceipt", func(t *testing.T) {
		t.Parallel()
		a := newAccount(t)
		wei := new(big.Int).Mul(oneEther, big.NewInt(3))
		r := n.Fund(t, a.addr, wei)
		if r.Status != types.ReceiptStatusSuccessful || r.BlockNumber == nil || r.BlockNumber.Sign() == 0 {
			t.Fatalf("funding receipt = status %d, block %v; want success in a block", r.Status, r.BlockNumber)
		}
		// The receipt says mined: the balance is there at once, no waiting.
		bal, err := n.Client().BalanceAt(context.Background(), a.addr, nil)
		if err != nil || bal.Cmp(wei) != 0 {
			t.Fatalf("balance after Fund = %v, %v; want %v", bal, err, wei)
		}
		tx, _, err := n.Client().TransactionByHash(context.Background(), r.TxHash)
		if err != nil {
			t.Fatal(err)
		}
		if from, err := types.Sender(types.LatestSignerForChainID(n.ChainID), tx); err != nil || from != n.Dev {
			t.Fatalf("funding sender = %s, %v; want the dev account %s", from.Hex(), err, n.Dev.Hex())
		}
	})

	t.Run("MinedFromListsEachTransactionOfTheSenderOnceWithItsStatus", func(t *testing.T) {
		t.Parallel()
		a := newAccount(t)
		n.Fund(t, a.addr, oneEther)
		tip := big.NewInt(params.GWei)
		deploy := send(t, n, a, 0, nil, big.NewInt(0), 200_000, tip, revertingInit)
		contract := crypto.CreateAddress(a.addr, 0)
		call := send(t, n, a, 1, &contract, big.NewInt(0), 100_000, tip, []byte{1})
		to := common.Address{0xbe, 0xef}
		transfer := send(t, n, a, 2, &to, big.NewInt(12345), params.TxGas, tip, nil)
		n.WaitMined(t, transfer.Hash())

		ctx := context.Background()
		txs, err := testgeth.MinedFrom(ctx, n.URL, a.addr)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			hash   common.Hash
			to     *common.Address
			value  int64
			status uint64
		}{
			{deploy.Hash(), nil, 0, types.ReceiptStatusSuccessful},
			{call.Hash(), &contract, 0, types.ReceiptStatusFailed},
			{transfer.Hash(), &to, 12345, types.ReceiptStatusSuccessful},
		}
		if len(txs) != len(want) {
			t.Fatalf("MinedFrom = %d transactions %+v; want %d", len(txs), txs, len(want))
		}
		for i, w := range want {
			got := txs[i]
			if got.Nonce != uint64(i) || got.Hash != w.hash || got.Value.Int64() != w.value || got.Status != w.status ||
				(got.To == nil) != (w.to == nil) || (got.To != nil && *got.To != *w.to) || got.Block == 0 {
				t.Errorf("MinedFrom[%d] = %+v; want nonce %d, hash %s, to %v, value %d, status %d", i, got, i, w.hash.Hex(), w.to, w.value, w.status)
			}
		}
		if err := testgeth.CheckNonces(txs); err != nil {
			t.Errorf("CheckNonces: %v", err)
		}
		byHash, err := testgeth.ByHash(txs)
		if err != nil || len(byHash) != 3 {
			t.Errorf("ByHash = %d entries, %v; want 3", len(byHash), err)
		}
		// The dev account's funding transaction is its, not a's.
		devTxs, err := testgeth.MinedFrom(ctx, n.URL, n.Dev)
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range devTxs {
			if _, mine := byHash[tx.Hash]; mine {
				t.Errorf("transaction %s listed for both %s and the dev account", tx.Hash.Hex(), a.addr.Hex())
			}
		}
		if len(devTxs) == 0 {
			t.Errorf("MinedFrom(dev account) is empty; it funded %s", a.addr.Hex())
		}
	})
}

// TestStalling_ALowTipStaysPendingUntilBumpedToTheMinerGasPrice: a stalling
// node takes a 1 gwei tip into its pool but does not mine it; the same nonce
// at 5 gwei replaces it and is mined.
func TestStalling_ALowTipStaysPendingUntilBumpedToTheMinerGasPrice(t *testing.T) {
	t.Parallel()
	n := testgeth.Start(t, testgeth.Stalling())
	if n.MinerGasPrice().Cmp(testgeth.StallingMinerGasPrice) != 0 {
		t.Fatalf("MinerGasPrice = %v; want %v", n.MinerGasPrice(), testgeth.StallingMinerGasPrice)
	}
	a := newAccount(t)
	n.Fund(t, a.addr, oneEther) // Fund pays the miner's price, so it is mined
	ctx := context.Background()
	to := common.Address{0xaa}
	low := send(t, n, a, 0, &to, big.NewInt(1), params.TxGas, big.NewInt(params.GWei), nil)
	start := head(t, n)
	// Three blocks go by without it.
	for {
		cur := head(t, n)
		if cur >= start+3 {
			break
		}
		time.Sleep(200 * time.Millisecond) // an outside process's clock: nothing to drive
	}
	if _, err := n.Client().TransactionReceipt(ctx, low.Hash()); err != ethereum.NotFound {
		t.Fatalf("receipt of the 1 gwei transaction after 3 blocks: %v; want not found (stalled)", err)
	}
	if nonce, err := n.Client().NonceAt(ctx, a.addr, nil); err != nil || nonce != 0 {
		t.Fatalf("NonceAt = %d, %v; want 0 while stalled", nonce, err)
	}
	if nonce, err := n.Client().PendingNonceAt(ctx, a.addr); err != nil || nonce != 1 {
		t.Fatalf("PendingNonceAt = %d, %v; want 1 (the pool holds it)", nonce, err)
	}
	bumped := send(t, n, a, 0, &to, big.NewInt(1), params.TxGas, testgeth.StallingMinerGasPrice, nil)
	if r := n.WaitMined(t, bumped.Hash()); r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("bumped transaction status %d; want success", r.Status)
	}
}

// TestStop_KillsGethWhenTheTestEnds: the cleanup leaves no process behind.
func TestStop_KillsGethWhenTheTestEnds(t *testing.T) {
	t.Parallel()
	var pid int
	t.Run("node", func(t *testing.T) {
		n := testgeth.Start(t)
		pid = n.Pid()
		if !alive(pid) {
			t.Fatalf("geth pid %d is not running while the test runs", pid)
		}
	})
	if pid == 0 {
		t.Fatal("the subtest did not start geth")
	}
	if alive(pid) {
		t.Fatalf("geth pid %d still running after its test ended", pid)
	}
}

// TestStart_GethDiesWithAKilledTestBinary: when the test binary is killed
// (a timeout, SIGKILL) no cleanup runs, and geth must not outlive it. The
// test runs itself as a child process that starts geth and kills itself.
func TestStart_GethDiesWithAKilledTestBinary(t *testing.T) {
	if os.Getenv("TESTGETH_CHILD") == "die" {
		n := testgeth.Start(t)
		os.Stdout.WriteString("GETH_PID=" + strconv.Itoa(n.Pid()) + "\n")
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // not reached
	}
	t.Parallel()
	testgeth.Binary(t) // skip or fail here as the other tests would
	cmd := exec.Command(os.Args[0], "-test.run=^TestStart_GethDiesWithAKilledTestBinary$", "-test.v")
	cmd.Env = append(os.Environ(), "TESTGETH_CHILD=die")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "GETH_PID="); ok {
			pid, _ = strconv.Atoi(p)
		}
	}
	_ = cmd.Wait()
	if pid == 0 {
		t.Fatalf("the child printed no GETH_PID; its output:\n%s", strings.Join(lines, "\n"))
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("geth pid %d still running 10s after its test binary was killed", pid)
		}
		time.Sleep(50 * time.Millisecond) // the kernel's signal delivery: nothing to drive
	}
}

// alive says whether pid is a running process (a zombie no one has reaped
// yet counts as dead).
// head returns the number of n's newest block.
func head(t *testing.T, n *testgeth.Node) uint64 {
	t.Helper()
	h, err := n.Client().BlockNumber(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestBinary_MissingGethSkipsOutsideCIAndFailsInCI: CI must run the geth
// tests, so there a missing binary is a failure, not a skip. The test runs
// itself as a child process with no geth to find.
func TestBinary_MissingGethSkipsOutsideCIAndFailsInCI(t *testing.T) {
	const name = "TestBinary_MissingGethSkipsOutsideCIAndFailsInCI"
	if os.Getenv("TESTGETH_CHILD") == "binary" {
		testgeth.Binary(t)
		t.Log("found a geth binary")
		return
	}
	t.Parallel()
	empty := t.TempDir() // a PATH with no geth on it
	for _, c := range []struct {
		ci       string
		wantExit bool
		want     string
	}{
		{"", false, "--- SKIP: " + name},
		{"false", false, "--- SKIP: " + name},
		{"true", true, "--- FAIL: " + name},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
		cmd.Env = []string{"TESTGETH_CHILD=binary", "PATH=" + empty, "CI=" + c.ci, testgeth.EnvBinary + "="}
		out, err := cmd.CombinedOutput()
		if exited := err != nil; exited != c.wantExit || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), testgeth.EnvBinary) {
			t.Errorf("CI=%q without geth: error %v; want failure %v, %q and a mention of %s in:\n%s", c.ci, err, c.wantExit, c.want, testgeth.EnvBinary, out)
		}
	}
}

func TestCheckNonces_OnePerNonceContiguous(t *testing.T) {
	t.Parallel()
	tx := func(nonce uint64, h byte) testgeth.MinedTx {
		return testgeth.MinedTx{Nonce: nonce, Hash: common.Hash{h}}
	}
	for _, c := range []struct {
		name string
		txs  []testgeth.MinedTx
		ok   bool
	}{
		{"empty", nil, true},
		{"contiguous from 5, out of order", []testgeth.MinedTx{tx(6, 2), tx(5, 1), tx(7, 3)}, true},
		{"a nonce twice", []testgeth.MinedTx{tx(0, 1), tx(1, 2), tx(1, 3)}, false},
		{"a gap", []testgeth.MinedTx{tx(0, 1), tx(2, 2)}, false},
	} {
		if err := testgeth.CheckNonces(c.txs); (err == nil) != c.ok {
			t.Errorf("%s: CheckNonces = %v; want ok %v", c.name, err, c.ok)
		}
	}
	if _, err := testgeth.ByHash([]testgeth.MinedTx{tx(0, 1), tx(1, 1)}); err == nil {
		t.Error("ByHash accepted one hash twice")
	}
}

// A node with the ChainID option is another chain: it answers with that id,
// its developer account is funded and unlocked (Fund pays from it), and a
// transaction signed for that id is mined on it.
func TestStart_ChainIDRunsAnotherChainWhoseDevAccountFunds(t *testing.T) {
	t.Parallel()
	n := testgeth.Start(t, testgeth.ChainID(1401))
	id, err := n.Client().ChainID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if id.Int64() != 1401 || n.ChainID.Int64() != 1401 {
		t.Fatalf("chain id %s (node says %s), want 1401", id, n.ChainID)
	}
	a := newAccount(t)
	n.Fund(t, a.addr, oneEther)
	to := common.HexToAddress("0x00000000000000000000000000000000000b3c11")
	tx := send(t, n, a, 0, &to, big.NewInt(1), 21000, big.NewInt(1), nil)
	if r := n.WaitMined(t, tx.Hash()); r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("receipt status %d", r.Status)
	}
}
