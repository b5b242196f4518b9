// Package testcontracts holds the contracts ledgerq's tests deploy on real
// nodes (geth --dev, anvil): their Solidity sources are in test/contracts/src,
// compiled by test/contracts/build.sh with the solc pinned in
// test/contracts/package-lock.json into artefacts/ (committed; a test fails
// when they are stale), and embedded here.
//
//   - TestToken: a small ERC-20 (name, symbol, decimals, totalSupply,
//     balanceOf, transfer, approve, transferFrom, allowance, Transfer and
//     Approval events), whose deployer holds the initial supply and may mint;
//     a transfer its sender cannot pay reverts with
//     InsufficientBalance(address,uint256,uint256).
//   - Reverter: every way a call fails: quota (the custom error
//     QuotaExceeded(address who, uint256 need, uint256 have)), requireOk
//     (Error(string)), divide (Panic 0x12) and assertOk (Panic 0x01); succeed
//     and tally (an array of tuples) emit Done; failIfArmed reverts with
//     IsArmed(uint256) only after arm(true), so a call can pass at one state
//     and revert at the next.
package testcontracts

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"embed"
	"encoding/hex"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
)

// Contract names one compiled contract: its artefacts are <name>.abi and
// <name>.bin.
type Contract string

// The contracts.
const (
	TestToken Contract = "TestToken"
	Reverter  Contract = "Reverter"
)

// Contracts lists every contract, in the order build.sh writes them.
var Contracts = []Contract{Reverter, TestToken}

//go:embed artefacts
var artefacts embed.FS

// deployTimeout bounds Deploy's wait for its transaction's receipt.
const deployTimeout = 60 * time.Second

// ABIJSON is the contract's ABI as solc wrote it (a JSON array).
func ABIJSON(c Contract) []byte {
	b, err := artefacts.ReadFile("artefacts/" + string(c) + ".abi")
	if err != nil {
		panic(fmt.Sprintf("testcontracts: no ABI for %q: %v", c, err))
	}
	return b
}

// ABI is the contract's parsed ABI.
func ABI(c Contract) abi.ABI {
	a, err := abi.JSON(bytes.NewReader(ABIJSON(c)))
	if err != nil {
		panic(fmt.Sprintf("testcontracts: the ABI of %q: %v", c, err))
	}
	return a
}

// Bytecode is the contract's creation code, without constructor arguments.
func Bytecode(c Contract) []byte {
	b, err := artefacts.ReadFile("artefacts/" + string(c) + ".bin")
	if err != nil {
		panic(fmt.Sprintf("testcontracts: no bytecode for %q: %v", c, err))
	}
	code, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil {
		panic(fmt.Sprintf("testcontracts: the bytecode of %q: %v", c, err))
	}
	return code
}

// Deploy deploys c with the constructor arguments args (TestToken takes
// name, symbol and initial supply: string, string, *big.Int; Reverter none),
// in a transaction signed by key (which must hold the gas), waits until it
// is mined and returns the contract's address. A deployment that fails or
// reverts fails t.
func Deploy(t testing.TB, client *ethclient.Client, key *ecdsa.PrivateKey, c Contract, args ...any) common.Address {
	t.Helper()
	ctor, err := ABI(c).Pack("", args...)
	if err != nil {
		t.Fatalf("testcontracts: the constructor arguments of %s: %v", c, err)
	}
	data := append(Bytecode(c), ctor...)
	r := send(t, client, key, nil, data)
	if r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("testcontracts: deploying %s reverted (transaction %s)", c, r.TxHash)
	}
	return r.ContractAddress
}

// Transact sends a transaction signed by key calling method of c at addr
// with args, waits until it is mined and returns its receipt (a revert is
// the receipt's status, not a failure of t).
func Transact(t testing.TB, client *ethclient.Client, key *ecdsa.PrivateKey, c Contract, addr common.Address, method string, args ...any) *types.Receipt {
	t.Helper()
	data, err := ABI(c).Pack(method, args...)
	if err != nil {
		t.Fatalf("testcontracts: %s.%s's arguments: %v", c, method, err)
	}
	return send(t, client, key, &addr, data)
}

// Call runs method of c at addr with args by eth_call at the latest block
// and returns its results, unpacked.
func Call(t testing.TB, client *ethclient.Client, c Contract, addr common.Address, method string, args ...any) []any {
	t.Helper()
	a := ABI(c)
	data, err := a.Pack(method, args...)
	if err != nil {
		t.Fatalf("testcontracts: %s.%s's arguments: %v", c, method, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deployTimeout)
	defer cancel()
	out, err := client.CallContract(ctx, ethereum.CallMsg{To: &addr, Data: data}, nil)
	if err != nil {
		t.Fatalf("testcontracts: eth_call %s.%s: %v", c, method, err)
	}
	res, err := a.Unpack(method, out)
	if err != nil {
		t.Fatalf("testcontracts: %s.%s's results: %v", c, method, err)
	}
	return res
}

// BalanceOf is TestToken's balanceOf(who) at token, by eth_call.
func BalanceOf(t testing.TB, client *ethclient.Client, token, who common.Address) *big.Int {
	t.Helper()
	return Call(t, client, TestToken, token, "balanceOf", who)[0].(*big.Int)
}

// send signs and sends a transaction of key's to to (nil: a deployment)
// with data, and waits for its receipt.
func send(t testing.TB, client *ethclient.Client, key *ecdsa.PrivateKey, to *common.Address, data []byte) *types.Receipt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deployTimeout)
	defer cancel()
	from := crypto.PubkeyToAddress(key.PublicKey)
	fail := func(what string, err error) {
		t.Helper()
		t.Fatalf("testcontracts: %s for %s: %v", what, from, err)
	}
	chainID, err := client.ChainID(ctx)
	if err != nil {
		fail("reading the chain id", err)
	}
	nonce, err := client.PendingNonceAt(ctx, from)
	if err != nil {
		fail("reading the nonce", err)
	}
	tip, err := client.SuggestGasTipCap(ctx)
	if err != nil {
		fail("reading the tip", err)
	}
	head, err := client.HeaderByNumber(ctx, nil)
	if err != nil {
		fail("reading the head", err)
	}
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip)
	gas, err := client.EstimateGas(ctx, ethereum.CallMsg{From: from, To: to, Data: data, GasTipCap: tip, GasFeeCap: feeCap})
	if err != nil {
		fail("estimating gas", err)
	}
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{
		ChainID: chainID, Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap, Gas: gas * 3 / 2, To: to, Data: data,
	})
	if err != nil {
		fail("signing", err)
	}
	if err := client.SendTransaction(ctx, tx); err != nil {
		fail("sending", err)
	}
	for {
		r, err := client.TransactionReceipt(ctx, tx.Hash())
		if err == nil {
			return r
		}
		select {
		case <-ctx.Done():
			fail("waiting for transaction "+tx.Hash().Hex(), err)
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}
