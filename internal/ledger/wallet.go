package ledger

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Address is an account on an account-and-nonce ledger (20 bytes on EVM
// chains). It converts to and from go-ethereum's common.Address, which has the
// same underlying type, without this package importing go-ethereum.
type Address [20]byte

// Hex returns the address as 0x-prefixed lower-case hex.
func (a Address) Hex() string { return "0x" + hex.EncodeToString(a[:]) }

// TxHash identifies a signed transaction (32 bytes on EVM chains).
type TxHash [32]byte

// Hex returns the hash as 0x-prefixed lower-case hex.
func (h TxHash) Hex() string { return "0x" + hex.EncodeToString(h[:]) }

// Fees are EIP-1559 fees per gas, in the chain's smallest unit (wei).
type Fees struct {
	// TipCap is the priority fee per gas the node suggests.
	TipCap *big.Int
	// FeeCap is the most paid per gas: the tip plus room for the base fee to
	// rise (2 × base fee + tip, the convention go-ethereum's own clients use).
	FeeCap *big.Int
}

// FeesOver returns the fees to offer over a block's base fee with the given
// tip: the tip, and a fee cap of 2 × baseFee + tip, so the transaction stays
// includable through several blocks of rising base fee.
func FeesOver(baseFee, tip *big.Int) Fees {
	feeCap := new(big.Int).Mul(baseFee, big.NewInt(2))
	return Fees{TipCap: tip, FeeCap: feeCap.Add(feeCap, tip)}
}

// CallMsg is what EstimateGas and Call need to know about a transaction.
type CallMsg struct {
	From  Address
	To    *Address // nil creates a contract
	Value *big.Int
	Data  []byte
	// Gas is the gas limit to run the call with; 0 leaves it to the node
	// (its own cap). EstimateGas ignores it.
	Gas uint64
}

// MaxRevertData is the most revert data a RevertError keeps: enough for an
// Error(string) of a few kilobytes or a custom error with several
// arguments; more is cut (Truncated).
const MaxRevertData = 8 << 10

// RevertError is the data a node answered with a revert to eth_call or
// eth_estimateGas (the revert's return data: an Error(string), a
// Panic(uint256), a custom error, or nothing). Adapters wrap it in the
// Deterministic *Error of the verdict, so ClassOf and CallRefused read the
// error as before and RevertDataOf finds the data.
type RevertError struct {
	// Data is the revert data, at most MaxRevertData bytes.
	Data []byte
	// Truncated: the node answered more than MaxRevertData bytes.
	Truncated bool
}

// NewRevertError keeps data, cut to MaxRevertData.
func NewRevertError(data []byte) *RevertError {
	if len(data) > MaxRevertData {
		return &RevertError{Data: bytes.Clone(data[:MaxRevertData]), Truncated: true}
	}
	return &RevertError{Data: bytes.Clone(data)}
}

func (e *RevertError) Error() string {
	if len(e.Data) > 64 {
		return fmt.Sprintf("reverted with data 0x%s… (%d bytes)", hex.EncodeToString(e.Data[:64]), len(e.Data))
	}
	return "reverted with data 0x" + hex.EncodeToString(e.Data)
}

// RevertDataOf returns the revert data in err's chain, if a node answered
// some.
func RevertDataOf(err error) (*RevertError, bool) {
	var re *RevertError
	if errors.As(err, &re) {
		return re, true
	}
	return nil, false
}

// Log is one event a mined transaction emitted.
type Log struct {
	Address Address
	Topics  []Hash
	Data    []byte
	// Index is the log's index in its block.
	Index uint
}

// ReceiptStatus is a mined transaction's outcome.
type ReceiptStatus int

// The receipt statuses. A reverted transaction is mined, used its nonce and
// paid for its gas: for the wallet lane it is done, not failed.
const (
	ReceiptSuccess ReceiptStatus = iota + 1
	ReceiptReverted
)

func (s ReceiptStatus) String() string {
	switch s {
	case ReceiptSuccess:
		return "success"
	case ReceiptReverted:
		return "reverted"
	}
	return fmt.Sprintf("ReceiptStatus(%d)", int(s))
}

// Receipt is a ledger's answer about one transaction hash. Found is false
// when the ledger has no receipt for it (not mined, or not known at all);
// only then are the other fields zero.
type Receipt struct {
	Found       bool
	Status      ReceiptStatus
	BlockNumber uint64
	// BlockHash is the hash of the block the receipt is in: if the chain's
	// block at BlockNumber has another hash, the receipt is of a block that
	// left the chain.
	BlockHash         Hash
	GasUsed           uint64
	EffectiveGasPrice *big.Int
	// Logs are the events the transaction emitted, in order.
	Logs []Log
}

// WalletLedger is what the wallet lane's per-wallet worker needs from an
// account-and-nonce ledger. Every address is a sender ledgerq signs for;
// transactions are signed by the caller and sent as raw bytes, so the ledger
// never sees a key.
//
// Read calls return plain (possibly wrapped) errors: a failed read means "ask
// again later", never "absent" (a failed receipt lookup never makes a task
// replaced). SendRawTransaction returns nil or a *SendError.
type WalletLedger interface {
	// ChainID is the chain's EIP-155 id; transactions must be signed for it.
	ChainID(ctx context.Context) (*big.Int, error)
	// PendingNonceAt is the next nonce counting transactions in the node's pool.
	PendingNonceAt(ctx context.Context, addr Address) (uint64, error)
	// NonceAt is the next nonce by the latest block: every nonce below it is
	// mined.
	NonceAt(ctx context.Context, addr Address) (uint64, error)
	// BalanceAt is the balance by the latest block.
	BalanceAt(ctx context.Context, addr Address) (*big.Int, error)
	// SuggestFees is the node's current EIP-1559 fee suggestion.
	SuggestFees(ctx context.Context) (Fees, error)
	// EstimateGas is the gas limit the node estimates for msg.
	EstimateGas(ctx context.Context, msg CallMsg) (uint64, error)
	// Call runs msg without a transaction (eth_call) and returns what it
	// returned: against the pending state when block is nil, else against
	// the state after the block at *block. A revert is a Deterministic
	// error (CallRefused) carrying the node's revert data, if it answered
	// some (RevertDataOf); a failure to get an answer is Transient.
	Call(ctx context.Context, msg CallMsg, block *uint64) ([]byte, error)
	// SendRawTransaction broadcasts one signed transaction. nil means the node
	// took it; otherwise the error is a *SendError whose Result tells the
	// worker what to do with the nonce.
	SendRawTransaction(ctx context.Context, raw []byte) error
	// TransactionReceipt reports whether hash is mined and how it ended.
	TransactionReceipt(ctx context.Context, hash TxHash) (Receipt, error)
	// HeadBlock is the chain's latest block.
	HeadBlock(ctx context.Context) (BlockRef, error)
	// BlockAt is the chain's block at number; found is false above the head.
	BlockAt(ctx context.Context, number uint64) (b BlockRef, found bool, err error)
	// TxsAtNonce answers "which transaction took addr's nonce?" from the
	// chain's blocks themselves, never from the node's index by hash (a
	// node that lost blocks may keep stale entries there): it returns every
	// transaction of addr in the canonical block that holds addr's
	// transaction with nonce, each with its receipt. found is false when
	// the chain's nonce of addr (latest) is not above nonce. An error means
	// it could not tell (the state it needs is pruned, the chain moved
	// meanwhile): ask again later.
	TxsAtNonce(ctx context.Context, addr Address, nonce uint64) (txs []NonceTx, found bool, err error)
	// TxsInBlock returns every transaction of addr in the canonical block at
	// number, each with its receipt, read by the block's hash; found is false
	// above the head. Unlike TxsAtNonce it needs no state of past blocks, only
	// the blocks themselves, which a node that is not an archive node keeps.
	TxsInBlock(ctx context.Context, addr Address, number uint64) (txs []NonceTx, found bool, err error)
}

// NonceTx is one mined transaction of an account: its nonce, its hash,
// its receipt (Found, with its block) and the transaction itself.
type NonceTx struct {
	Nonce   uint64
	Hash    TxHash
	Receipt Receipt
	// Raw is the signed transaction as the block holds it (its EIP-2718
	// encoding): what it sends to whom, so that the wallet lane can tell a
	// transaction of its own that its database forgot (a restore from an
	// older backup) from another's.
	Raw []byte
}

// SendResult is what a send's outcome means for the transaction and its
// nonce (docs/design.md, "The wallet lane", rule 4; each client's answers in
// docs/clients.md).
type SendResult int

const (
	// SendAccepted: the node took the transaction, or already had it
	// (`already known`). It is sent.
	SendAccepted SendResult = iota + 1
	// SendNonceTooLow: the chain has moved past this nonce. It is a success
	// only if one of our hashes for the nonce has a receipt; otherwise another
	// transaction used the nonce. Only the worker, holding every hash sent for
	// the nonce, can tell which.
	SendNonceTooLow
	// SendUnderpriced: the fees are too low for the pool or to replace what it
	// holds for the nonce. Bump the fees and send again with the same nonce.
	SendUnderpriced
	// SendRejected: the node refused the transaction itself (funds, gas,
	// fee cap below base fee, invalid sender, gas limit). It is not sent and
	// sending the same bytes will get the same answer: the nonce may be
	// recycled.
	SendRejected
	// SendIndeterminate: a timeout, a transport error, a 5xx or an error the
	// node did not explain. The transaction may be out: treat it as sent and
	// never recycle its nonce.
	SendIndeterminate
	// SendBusy: the node did not take the transaction and said so, for a
	// reason of its own rather than the transaction's (its pool is full, the
	// provider rate-limits). The wallet lane handles it as SendIndeterminate
	// — the bytes are kept, the nonce stays taken and the same bytes are
	// broadcast again later — which is safe whichever way the node went; the
	// result only says why, for the attempt's error and the node's health.
	SendBusy
)

func (r SendResult) String() string {
	switch r {
	case SendAccepted:
		return "accepted"
	case SendNonceTooLow:
		return "nonce_too_low"
	case SendUnderpriced:
		return "underpriced"
	case SendRejected:
		return "rejected"
	case SendIndeterminate:
		return "indeterminate"
	case SendBusy:
		return "busy"
	}
	return fmt.Sprintf("SendResult(%d)", int(r))
}

// Class is the ledger error class of a failed send with this result.
// SendAccepted is not a failure and has none (0).
func (r SendResult) Class() Class {
	switch r {
	case SendNonceTooLow, SendUnderpriced, SendRejected:
		return Deterministic
	case SendIndeterminate:
		return Indeterminate
	case SendBusy:
		return Transient
	}
	return 0
}

// SendError is a classified failed send. It unwraps to a *Error of the
// result's class, so ClassOf and ReasonOf work on it as on any ledger error.
type SendError struct {
	Result SendResult
	err    *Error
}

// NewSendError classifies a send failure. reason is the node's message (or
// the transport's); cause may be nil.
func NewSendError(result SendResult, reason string, cause error) *SendError {
	return &SendError{Result: result, err: NewError(result.Class(), reason, cause)}
}

func (e *SendError) Error() string {
	return fmt.Sprintf("send %s: %v", e.Result, e.err)
}

// Unwrap returns the classified *Error.
func (e *SendError) Unwrap() error { return e.err }

// sendPrefixes maps the beginnings of the nodes' answers to
// eth_sendRawTransaction to what they mean, after normalizeSend. Nodes add
// details after the phrase ("nonce too low: next nonce 1, tx nonce 0"), so
// only prefixes are matched, in order (a longer phrase before a shorter one
// it begins with). The clients' texts and codes, each with the source file it
// comes from, are in TestClassifySend_EveryClientsAnswers and
// docs/clients.md.
var sendPrefixes = []struct {
	prefix string
	result SendResult
}{
	{"already known", SendAccepted},                // geth, reth, Erigon, Nethermind ≥ 1.37
	{"known transaction", SendAccepted},            // Besu, older geth
	{"transaction already imported", SendAccepted}, // anvil
	{"alreadyknown", SendAccepted},                 // Nethermind before 1.37 (AcceptTxResult's name)
	{"existing tx with same hash", SendAccepted},   // Erigon
	{"existing txn with same hash", SendAccepted},  // Erigon

	{"nonce too low", SendNonceTooLow}, // geth, reth, anvil, Erigon, Besu ("Nonce too low"), Nethermind ≥ 1.37
	{"oldnonce", SendNonceTooLow},      // Nethermind before 1.37

	// The fee cap below the block's base fee: refused (docs/design.md, the
	// wallet lane's rule 4), though Nethermind files it under its "fee too
	// low" result.
	{"max fee per gas less than block base fee", SendRejected},      // geth, reth, anvil
	{"fee cap less than block base fee", SendRejected},              // older geth
	{"fee cap below block base fee", SendRejected},                  //
	{"gas price below current base fee", SendRejected},              // Besu
	{"feetoolow, maxfeepergas too low", SendRejected},               // Nethermind before 1.37
	{"transaction underpriced, maxfeepergas too low", SendRejected}, // Nethermind ≥ 1.37

	{"replacement transaction underpriced", SendUnderpriced},          // every client
	{"transaction underpriced", SendUnderpriced},                      // geth, reth, Nethermind ≥ 1.37
	{"underpriced", SendUnderpriced},                                  // Erigon ("FEE_TOO_LOW: underpriced")
	{"transaction gas price below minimum", SendUnderpriced},          // geth
	{"gas tip below minimum", SendUnderpriced},                        //
	{"max fee per gas below minimum", SendUnderpriced},                //
	{"transaction priority fee below minimum", SendUnderpriced},       // reth
	{"gas price below configured minimum gas price", SendUnderpriced}, // Besu
	{"fee too low", SendUnderpriced},                                  // Erigon (its pool's minimum fee cap)
	{"feetoolow", SendUnderpriced},                                    // Nethermind before 1.37 (FeeTooLow, FeeTooLowToCompete)
	{"replacementnotallowed", SendUnderpriced},                        // Nethermind before 1.37
	{"could not replace existing tx", SendUnderpriced},                // Erigon

	{"txpool is full", SendBusy},                // geth, reth
	{"pending sub-pool is full", SendBusy},      // Erigon
	{"basefee sub-pool is full", SendBusy},      // Erigon
	{"queued sub-pool is full", SendBusy},       // Erigon
	{"blobs limit in txpool is full", SendBusy}, // Erigon
	{"account limit exceeded", SendBusy},        // geth: the sender's pool slots are full
	{"spammer", SendBusy},                       // Erigon: likewise
	{"server is busy", SendBusy},                // reth (jsonrpsee)

	{"insufficient funds", SendRejected},                   // geth, reth, anvil, Erigon, Nethermind ≥ 1.37
	{"insufficientfunds", SendRejected},                    // Nethermind before 1.37
	{"upfront cost exceeds account balance", SendRejected}, // Besu
	{"intrinsic gas too low", SendRejected},                // geth, reth, anvil, Nethermind ≥ 1.37
	{"intrinsicgas", SendRejected},                         // Erigon ("IntrinsicGas"), Nethermind before 1.37 ("IntrinsicGasTooLow: …")
	{"intrinsic gas exceeds gas limit", SendRejected},      // Besu
	{"insufficient gas for floor data gas cost", SendRejected},
	{"exceeds block gas limit", SendRejected},                       // geth, reth
	{"exceeds max transaction gas limit", SendRejected},             // reth
	{"transaction gas limit exceeds block gas limit", SendRejected}, // Besu
	{"transaction gas limit cap exceeded", SendRejected},            // Besu
	{"intrinsic gas too high", SendRejected},                        // anvil ("… -- tx.gas_limit > env.block.gas_limit")
	{"gas limit reached", SendRejected},                             // geth, Nethermind ≥ 1.37
	{"gaslimitexceeded", SendRejected},                              // Nethermind before 1.37
	{"gas limit is too high", SendRejected},                         // Erigon
	{"transaction gas limit too high", SendRejected},                // geth
	{"max priority fee per gas higher than max fee per gas", SendRejected},
	{"max priority fee per gas exceeds max fee per gas", SendRejected}, // Besu
	{"invalid sender", SendRejected},
	{"invalid chain id", SendRejected}, // geth, anvil, reth, Erigon
	{"wrong chainid", SendRejected},    // Besu
	{"only replay-protected", SendRejected},
	{"oversized data", SendRejected},
	{"negative value", SendRejected},
	{"transaction type not supported", SendRejected},
	{"tx fee (", SendRejected},                     // "tx fee (2.00 ether) exceeds the configured cap (1.00 ether)"
	{"transaction fee cap exceeded", SendRejected}, // Besu
}

// busyPhrases are what hosted providers' rate limiters answer, anywhere in
// the message ("project ID request rate exceeded", "Your app has exceeded
// its compute units per second capacity"). Matching inside the message is
// safe here only because SendBusy is handled as SendIndeterminate.
var busyPhrases = []string{
	"rate limit",
	"too many requests",
	"limit exceeded",
	"rate exceeded",
	"per second capacity",
	"request limit reached",
}

// busyCodes are JSON-RPC codes that mean "not now" when the text is not
// one the tables know: -32005 "limit exceeded" (EIP-1474; Infura,
// Nethermind's LimitExceeded), 429 (Alchemy puts the HTTP status in the
// error object), -32009 (jsonrpsee's "server is busy", reth's server).
var busyCodes = map[int]bool{-32005: true, 429: true, -32009: true}

// erigonImportResults are the words Erigon's eth_sendRawTransaction puts
// before its pool's reason ("INTERNAL_ERROR: nonce too low").
var erigonImportResults = []string{"already_exists: ", "fee_too_low: ", "invalid: ", "internal_error: ", "stale: "}

// normalizeSend lower-cases msg, trims it, and takes off the words some
// clients put before the reason: Erigon's import result, Nethermind's
// "Invalid, " (before 1.37) or "transaction invalid, ".
func normalizeSend(msg string) string {
	m := strings.ToLower(strings.TrimSpace(msg))
	for _, p := range erigonImportResults {
		if rest, ok := strings.CutPrefix(m, p); ok {
			return rest
		}
	}
	for _, p := range []string{"invalid, ", "transaction invalid, "} {
		if rest, ok := strings.CutPrefix(m, p); ok {
			return rest
		}
	}
	return m
}

// ClassifySend classifies a node's JSON-RPC error object answered to
// eth_sendRawTransaction, from geth, reth, anvil, Erigon, Nethermind or
// Besu: by the beginning of its message first (normalizeSend, sendPrefixes),
// then by a rate limiter's phrase or code (SendBusy). A message that matches
// nothing is SendIndeterminate: an unexplained error may still mean the
// transaction went out, so its nonce must not be recycled. Codes alone never
// refuse: clients give the same code to refusals and to their own failures
// (Besu's -32005 is a gas limit, Infura's a rate limit).
func ClassifySend(code int, msg string) SendResult {
	m := normalizeSend(msg)
	for _, p := range sendPrefixes {
		if strings.HasPrefix(m, p.prefix) {
			return p.result
		}
	}
	for _, p := range busyPhrases {
		if strings.Contains(m, p) {
			return SendBusy
		}
	}
	if busyCodes[code] {
		return SendBusy
	}
	return SendIndeterminate
}

// ClassifySendMessage is ClassifySend for a message without a code (a
// simulated ledger's answer).
func ClassifySendMessage(msg string) SendResult { return ClassifySend(0, msg) }

// SendResultOf returns what a send's error means: SendAccepted for nil, the
// Result of a *SendError, and SendIndeterminate for any other error.
func SendResultOf(err error) SendResult {
	if err == nil {
		return SendAccepted
	}
	var se *SendError
	if errors.As(err, &se) {
		return se.Result
	}
	return SendIndeterminate
}

// CallRefused reports whether err, from EstimateGas (or a call the lane
// makes before it signs), is the node's own verdict on the transaction (it
// would revert, the sender cannot pay for it) rather than a failure to get
// an answer (a rate limit, a 5xx, a reset, a timeout, a node behind the
// others). Only a verdict may end a task in error; adapters class a verdict
// Deterministic (ClassifyCallMessage) and anything else Transient.
func CallRefused(err error) bool { return err != nil && ClassOf(err) == Deterministic }

// Reverted reports whether err, from EstimateGas or Call, is the node's
// verdict that the call reverts (rather than another verdict: the sender
// cannot pay for it, it runs out of gas): it carries revert data, or the
// node's message says so ("execution reverted", every client's words).
func Reverted(err error) bool {
	if !CallRefused(err) {
		return false
	}
	if _, ok := RevertDataOf(err); ok {
		return true
	}
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(ReasonOf(err))), "execution reverted")
}

// callVerdicts are the beginnings of the messages nodes answer to
// eth_estimateGas and eth_call when the transaction itself cannot run
// (lower case; each client's texts in TestClassifyCallMessage_EveryClientsAnswers).
var callVerdicts = []string{
	"execution reverted",                   // every client (Besu: "Execution reverted (reason)")
	"insufficient funds",                   // geth, reth, anvil, Erigon, Nethermind
	"upfront cost exceeds account balance", // Besu
	"gas required exceeds allowance",       // geth, reth, Erigon
	"intrinsic gas too low",
	"intrinsic gas exceeds gas limit", // Besu
	"invalid opcode",
	"out of gas", // geth; reth's and anvil's "out of gas: …" too
	"stack underflow",
	"stack overflow",
	"invalid jump",
	"contract creation code storage out of gas",
	"max initcode size exceeded",
	"evm error", // anvil ("EVM error InvalidFEOpcode"), reth ("EVM error: …")
	"transaction processing could not be completed due to an exception", // Besu: the call halted
}

// ClassifyCallMessage classes a JSON-RPC error object a node answered to
// eth_estimateGas or eth_call: Deterministic when it is the node's verdict
// on the transaction (code 3, a revert with data, or a message that begins
// with one of callVerdicts), Transient otherwise (a provider's rate limit
// or internal error, a lagging node's "header not found", anvil's
// "BlockOutOfRangeError", Besu's "Block not found").
func ClassifyCallMessage(code int, msg string) Class {
	if code == 3 {
		return Deterministic
	}
	m := strings.ToLower(strings.TrimSpace(msg))
	for _, p := range callVerdicts {
		if strings.HasPrefix(m, p) {
			return Deterministic
		}
	}
	return Transient
}
