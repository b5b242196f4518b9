package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// TestClassifySendMessage_DesignTable is the wallet lane's send-result table
// (docs/design.md, the wallet lane's rule 4), with
// the messages as go-ethereum writes them (details after the phrase).
func TestClassifySendMessage_DesignTable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		msg  string
		want ledger.SendResult
	}{
		// success
		{"already known", ledger.SendAccepted},
		{"known transaction: 0xabc", ledger.SendAccepted},
		{"Known transaction", ledger.SendAccepted},
		// nonce too low: the worker decides
		{"nonce too low", ledger.SendNonceTooLow},
		{"nonce too low: next nonce 1, tx nonce 0", ledger.SendNonceTooLow},
		// bump
		{"replacement transaction underpriced", ledger.SendUnderpriced},
		{"transaction underpriced: tip needed 2, tip permitted 1", ledger.SendUnderpriced},
		{"transaction gas price below minimum: gas tip cap 1, minimum needed 2", ledger.SendUnderpriced},
		// recycle the nonce
		{"insufficient funds for gas * price + value: balance 0, tx cost 21000, overshot 21000", ledger.SendRejected},
		{"insufficient funds for transfer", ledger.SendRejected},
		{"intrinsic gas too low: gas 100, minimum needed 21000", ledger.SendRejected},
		{"max fee per gas less than block base fee: address 0x1, maxFeePerGas: 1, baseFee: 7", ledger.SendRejected},
		{"fee cap less than block base fee", ledger.SendRejected},
		{"invalid sender", ledger.SendRejected},
		{"exceeds block gas limit", ledger.SendRejected},
		{"gas limit reached", ledger.SendRejected},
		{"max priority fee per gas higher than max fee per gas", ledger.SendRejected},
		{"tx fee (2.00 ether) exceeds the configured cap (1.00 ether)", ledger.SendRejected},
		// indeterminate: treated as sent, never recycled
		{"context deadline exceeded", ledger.SendIndeterminate},
		{"Post \"http://127.0.0.1:8545\": dial tcp 127.0.0.1:8545: connect: connection refused", ledger.SendIndeterminate},
		{"502 Bad Gateway: upstream", ledger.SendIndeterminate},
		{"something no node ever said", ledger.SendIndeterminate},
		{"", ledger.SendIndeterminate},
		// prefixes only: a phrase inside another message does not count
		{"upstream said: nonce too low", ledger.SendIndeterminate},
	}
	for _, c := range cases {
		if got := ledger.ClassifySendMessage(c.msg); got != c.want {
			t.Errorf("ClassifySendMessage(%q) = %s, want %s", c.msg, got, c.want)
		}
	}
}

func TestSendError_CarriesResultAndLedgerClass(t *testing.T) {
	t.Parallel()
	cases := []struct {
		result ledger.SendResult
		class  ledger.Class
	}{
		{ledger.SendNonceTooLow, ledger.Deterministic},
		{ledger.SendUnderpriced, ledger.Deterministic},
		{ledger.SendRejected, ledger.Deterministic},
		{ledger.SendIndeterminate, ledger.Indeterminate},
	}
	for _, c := range cases {
		err := fmt.Errorf("sending 0xabc: %w", ledger.NewSendError(c.result, "node said so", nil))
		if got := ledger.SendResultOf(err); got != c.result {
			t.Errorf("SendResultOf(%v) = %s, want %s", err, got, c.result)
		}
		if got := ledger.ClassOf(err); got != c.class {
			t.Errorf("ClassOf(%v) = %s, want %s", err, got, c.class)
		}
		if got := ledger.ReasonOf(err); got != "node said so" {
			t.Errorf("ReasonOf(%v) = %q", err, got)
		}
	}
	if got := ledger.SendResultOf(nil); got != ledger.SendAccepted {
		t.Errorf("SendResultOf(nil) = %s, want accepted", got)
	}
	if got := ledger.SendResultOf(context.DeadlineExceeded); got != ledger.SendIndeterminate {
		t.Errorf("SendResultOf(unclassified) = %s, want indeterminate", got)
	}
	if !errors.Is(ledger.NewSendError(ledger.SendIndeterminate, "timeout", context.DeadlineExceeded), context.DeadlineExceeded) {
		t.Error("a SendError does not unwrap to its cause")
	}
}

// A node's message that is both the reason and the wrapped error is said
// once: "…: replacement transaction underpriced", not twice.
func TestError_AReasonThatIsTheWrappedErrorIsSaidOnce(t *testing.T) {
	msg := "replacement transaction underpriced"
	cause := errors.New(msg)
	err := ledger.NewSendError(ledger.ClassifySendMessage(msg), msg, cause)
	if n := strings.Count(err.Error(), msg); n != 1 {
		t.Errorf("%q says the message %d times, want once", err.Error(), n)
	}
	if !errors.Is(err, cause) {
		t.Errorf("%v does not unwrap to its cause", err)
	}
	other := ledger.NewError(ledger.Transient, "validator busy", errors.New("503 Service Unavailable"))
	if !strings.Contains(other.Error(), "validator busy: 503 Service Unavailable") {
		t.Errorf("%q lost a cause that adds something", other.Error())
	}
}

// TestClassifySend_EveryClientsAnswers holds each client's answer to
// eth_sendRawTransaction, code and text as the client writes them, to what
// the wallet lane does with it (docs/clients.md is the same table). Where
// each comes from:
//   - geth: go-ethereum v1.17.10 core/txpool/errors.go, core/error.go,
//     core/txpool/legacypool/legacypool.go ("txpool is full"); every send
//     error is -32000 (rpc/errors.go, errcodeDefault).
//   - reth: paradigmxyz/reth crates/rpc/rpc-eth-types/src/error/mod.rs
//     (RpcPoolError mirrors geth's pool texts; RpcInvalidTransactionError's
//     error_code: -32000 InvalidInput for nonce, gas and fee cap, -32003
//     TransactionRejected for the rest, alloy's EthRpcErrorCode); jsonrpsee's
//     SERVER_IS_BUSY_CODE -32009.
//   - anvil: foundry-rs/foundry crates/anvil/src/eth/error/mod.rs (pool
//     errors and InvalidTransactionError as -32003 TransactionRejected,
//     GasTooLow and GasTooHigh as -32000), and anvil 1.7.1's own answers
//     (TestLedger_AnvilAnswersAreClassified provokes them).
//   - Erigon: erigontech/erigon rpc/jsonrpc/send_transaction.go ("%s: %s",
//     the pool's ImportResult name and its DiscardReason),
//     txnprovider/txpool/txpoolcfg/txpoolcfg.go (DiscardReason.String) and
//     the txpool's mapDiscardReasonToProto; -32000.
//   - Nethermind: NethermindEth/nethermind Nethermind.TxPool/AcceptTxResult.cs
//     (ToString is "Code" or "Code, Message"; the codes were the results'
//     names before 1.37 and geth's phrases since, TxPoolErrorMessages.cs),
//     Nethermind.Core/Messages/TxErrorMessages.cs, and
//     Nethermind.JsonRpc/Modules/Eth/EthRpcModule.cs (SendTx answers
//     ErrorCodes.TransactionRejected, -32010; LimitExceeded is -32005).
//   - Besu: hyperledger/besu ethereum/api/.../response/RpcErrorType.java and
//     JsonRpcErrorConverter.java (each invalid reason's code and text).
//   - hosted providers' rate limits: Infura -32005 "project ID request rate
//     exceeded", Alchemy 429 "Your app has exceeded its compute units per
//     second capacity…", EIP-1474's -32005 "limit exceeded".
func TestClassifySend_EveryClientsAnswers(t *testing.T) {
	t.Parallel()
	type answer struct {
		client string
		code   int
		msg    string
	}
	cases := []struct {
		what    string
		want    ledger.SendResult
		answers []answer
	}{
		{"already known", ledger.SendAccepted, []answer{
			{"geth", -32000, "already known"},
			{"reth", -32000, "already known"},
			{"anvil", -32003, "transaction already imported"},
			{"erigon", -32000, "ALREADY_EXISTS: already known"},
			{"nethermind", -32010, "AlreadyKnown"},
			{"nethermind 1.37", -32010, "already known"},
			{"besu", -32000, "Known transaction"},
		}},
		{"nonce too low", ledger.SendNonceTooLow, []answer{
			{"geth", -32000, "nonce too low: address 0x70997970C51812dc3A010C7d01b50e0d17dc79C8, tx: 0 state: 1"},
			{"reth", -32000, "nonce too low: next nonce 1, tx nonce 0"},
			{"anvil", -32003, "nonce too low"},
			{"erigon", -32000, "INTERNAL_ERROR: nonce too low"},
			{"nethermind", -32010, "OldNonce, Current nonce: 1, nonce of rejected tx: 0"},
			{"nethermind 1.37", -32010, "nonce too low, Current nonce: 1, nonce of rejected tx: 0"},
			{"besu", -32001, "Nonce too low"},
		}},
		{"replacement underpriced", ledger.SendUnderpriced, []answer{
			{"geth", -32000, "replacement transaction underpriced"},
			{"reth", -32000, "replacement transaction underpriced"},
			{"anvil", -32003, "replacement transaction underpriced"},
			{"erigon", -32000, "FEE_TOO_LOW: replacement transaction underpriced"},
			{"nethermind", -32010, "ReplacementNotAllowed"},
			{"nethermind 1.37", -32010, "replacement transaction underpriced"},
			{"besu", -32000, "Replacement transaction underpriced"},
		}},
		{"underpriced for the pool", ledger.SendUnderpriced, []answer{
			{"geth", -32000, "transaction underpriced: tip needed 2, tip permitted 1"},
			{"geth", -32000, "transaction gas price below minimum: gas tip cap 1, minimum needed 2"},
			{"reth", -32000, "transaction underpriced"},
			{"reth", -32003, "transaction priority fee below minimum required priority fee 2"},
			{"erigon", -32000, "FEE_TOO_LOW: underpriced"},
			{"erigon", -32000, "FEE_TOO_LOW: fee too low"},
			{"nethermind", -32010, "FeeTooLowToCompete"},
			{"nethermind", -32010, "FeeTooLow, EffectivePriorityFeePerGas too low 0 < 1, BaseFee: 7"},
			{"besu", -32009, "Gas price below configured minimum gas price"},
		}},
		{"insufficient funds", ledger.SendRejected, []answer{
			{"geth", -32000, "insufficient funds for gas * price + value: address 0x1 have 0 want 21000"},
			{"reth", -32003, "insufficient funds for gas * price + value: have 0 want 21000"},
			{"anvil", -32003, "Insufficient funds for gas * price + value"},
			{"erigon", -32000, "INTERNAL_ERROR: insufficient funds"},
			{"nethermind", -32010, "InsufficientFunds, Account balance: 0, cumulative cost: 21000"},
			{"nethermind 1.37", -32010, "insufficient funds for gas * price + value, Account balance: 0, cumulative cost: 21000"},
			{"besu", -32004, "Upfront cost exceeds account balance"},
		}},
		{"fee cap below base fee", ledger.SendRejected, []answer{
			{"geth", -32000, "max fee per gas less than block base fee: address 0x1, maxFeePerGas: 1, baseFee: 7"},
			{"reth", -32000, "max fee per gas less than block base fee"},
			{"anvil", -32003, "max fee per gas less than block base fee"},
			{"nethermind", -32010, "FeeTooLow, MaxFeePerGas too low. MaxFeePerGas: 1, BaseFee: 7, MaxPriorityFeePerGas:1, Block number: 5"},
			{"nethermind 1.37", -32010, "transaction underpriced, MaxFeePerGas too low. MaxFeePerGas: 1, BaseFee: 7, MaxPriorityFeePerGas:1, Block number: 5"},
			{"besu", -32009, "Gas price below current base fee"},
		}},
		{"intrinsic gas too low", ledger.SendRejected, []answer{
			{"geth", -32000, "intrinsic gas too low: gas 20000, minimum needed 21000"},
			{"reth", -32000, "intrinsic gas too low"},
			{"anvil", -32000, "intrinsic gas too low"},
			{"erigon", -32000, "INTERNAL_ERROR: IntrinsicGas"},
			{"nethermind", -32010, "Invalid, IntrinsicGasTooLow: Gas limit is too low."},
			{"nethermind 1.37", -32010, "transaction invalid, intrinsic gas too low"},
			{"besu", -32003, "Intrinsic gas exceeds gas limit"},
		}},
		{"exceeds block gas limit", ledger.SendRejected, []answer{
			{"geth", -32000, "exceeds block gas limit"},
			{"reth", -32000, "exceeds block gas limit"},
			{"anvil", -32000, "intrinsic gas too high -- tx.gas_limit > env.block.gas_limit"},
			{"erigon", -32000, "INTERNAL_ERROR: gas limit is too high"},
			{"nethermind", -32010, "GasLimitExceeded, Gas limit: 30000000, gas limit of rejected tx: 100000000"},
			{"nethermind 1.37", -32010, "gas limit reached, Gas limit: 30000000, gas limit of rejected tx: 100000000"},
			{"besu", -32005, "Transaction gas limit exceeds block gas limit"},
		}},
		{"pool full", ledger.SendBusy, []answer{
			{"geth", -32000, "txpool is full"},
			{"geth", -32000, "account limit exceeded"},
			{"reth", -32003, "txpool is full"},
			{"erigon", -32000, "INTERNAL_ERROR: pending sub-pool is full"},
			{"erigon", -32000, "INTERNAL_ERROR: spammer"},
		}},
		{"rate limited", ledger.SendBusy, []answer{
			{"reth", -32009, "Server is busy, try again later"},
			{"nethermind", -32005, "request limit exceeded"},
			{"infura", -32005, "project ID request rate exceeded"},
			{"alchemy", 429, "Your app has exceeded its compute units per second capacity. If you have retries enabled, you can safely ignore this message."},
			{"a provider", -32005, "slow down"},
			{"a provider", 429, "Too Many Requests"},
		}},
		{"unknown", ledger.SendIndeterminate, []answer{
			{"geth", -32603, "internal error"},
			{"nethermind", -32010, "transaction invalid"},
			{"a provider", -32000, "upstream said: nonce too low"},
			{"a provider", 0, ""},
		}},
	}
	for _, c := range cases {
		for _, a := range c.answers {
			if got := ledger.ClassifySend(a.code, a.msg); got != c.want {
				t.Errorf("%s, %s: ClassifySend(%d, %q) = %s, want %s", c.what, a.client, a.code, a.msg, got, c.want)
			}
		}
	}
}

// TestSendBusy_IsTransientAndNeverAccepted: a busy node did not take the
// transaction and said so (Transient), which SendResultOf keeps apart from
// both a success and a refusal.
func TestSendBusy_IsTransientAndNeverAccepted(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("sending: %w", ledger.NewSendError(ledger.SendBusy, "txpool is full", nil))
	if got := ledger.SendResultOf(err); got != ledger.SendBusy {
		t.Errorf("SendResultOf = %s, want busy", got)
	}
	if got := ledger.ClassOf(err); got != ledger.Transient {
		t.Errorf("ClassOf = %s, want transient", got)
	}
}

// TestClassifyCallMessage_EveryClientsAnswers: a client's verdict on a call
// (it would revert, the sender cannot pay) is Deterministic; a failure to
// answer — a rate limit, a lagging node's missing block, an internal error —
// stays Transient. Sources as in TestClassifySend_EveryClientsAnswers, and
// besu's AbstractEstimateGas.java (the estimate's answers).
func TestClassifyCallMessage_EveryClientsAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		client string
		code   int
		msg    string
		want   ledger.Class
	}{
		{"geth", 3, "execution reverted: bad", ledger.Deterministic},
		{"geth", -32000, "insufficient funds for gas * price + value: address 0x1 have 0 want 1", ledger.Deterministic},
		{"geth", -32000, "gas required exceeds allowance (30000000)", ledger.Deterministic},
		{"reth", 3, "execution reverted", ledger.Deterministic},
		{"reth", -32000, "out of gas: gas required exceeds: 100", ledger.Deterministic},
		{"reth", -32003, "EVM error: InvalidFEOpcode", ledger.Deterministic},
		{"anvil", 3, "execution reverted: bad", ledger.Deterministic},
		{"anvil", -32603, "EVM error InvalidFEOpcode", ledger.Deterministic},
		{"anvil", -32003, "Insufficient funds for gas * price + value", ledger.Deterministic},
		{"anvil", -32003, "Out of gas: gas required exceeds allowance: 21000", ledger.Deterministic},
		{"erigon", -32000, "execution reverted", ledger.Deterministic},
		{"nethermind", -32015, "execution reverted", ledger.Deterministic},
		{"besu", 3, "Execution reverted (bad)", ledger.Deterministic},
		{"besu", -32004, "Upfront cost exceeds account balance", ledger.Deterministic},
		{"besu", -32003, "Intrinsic gas exceeds gas limit", ledger.Deterministic},
		{"besu", -32000, "Transaction processing could not be completed due to an exception", ledger.Deterministic},

		{"geth", -32000, "header not found", ledger.Transient},
		{"geth", -32000, "missing trie node 0xabc (path ) state 0xabc is not available", ledger.Transient},
		{"reth", -32001, "block not found", ledger.Transient},
		{"reth", -32009, "Server is busy, try again later", ledger.Transient},
		{"anvil", -32602, "BlockOutOfRangeError: block height is 20 but requested was 25", ledger.Transient},
		{"anvil", -32001, "unknown block", ledger.Transient},
		{"besu", -32000, "Block not found", ledger.Transient},
		{"besu", -32000, "World state unavailable", ledger.Transient},
		{"besu", -32603, "Internal error", ledger.Transient},
		{"infura", -32005, "project ID request rate exceeded", ledger.Transient},
		{"alchemy", 429, "Your app has exceeded its compute units per second capacity.", ledger.Transient},
	}
	for _, c := range cases {
		if got := ledger.ClassifyCallMessage(c.code, c.msg); got != c.want {
			t.Errorf("%s: ClassifyCallMessage(%d, %q) = %s, want %s", c.client, c.code, c.msg, got, c.want)
		}
	}
}
