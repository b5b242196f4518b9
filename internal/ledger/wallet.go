package ledger

import (
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

// CallMsg is what EstimateGas needs to know about a transaction.
type CallMsg struct {
	From  Address
	To    *Address // nil creates a contract
	Value *big.Int
	Data  []byte
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
// nonce (docs/design.md, "The wallet lane", rule 4).
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
	// SendBusy: no node took the transaction and each said so or never
	// got it (a rate limit, a full pool, no connection). It is not sent;
	// sending the same bytes again later is safe, and the nonce stays held.
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

// sendPrefixes maps the beginnings of go-ethereum's send error messages to
// what they mean. Nodes add details after the phrase ("nonce too low: next
// nonce 1, tx nonce 0"), so only prefixes are matched. Other clients (Erigon,
// Nethermind, Besu) use the same phrases for these cases or fall through to
// SendIndeterminate, the safe default.
var sendPrefixes = []struct {
	prefix string
	result SendResult
}{
	{"already known", SendAccepted},
	{"known transaction", SendAccepted}, // older geth, and several other clients

	{"nonce too low", SendNonceTooLow},

	{"replacement transaction underpriced", SendUnderpriced},
	{"transaction underpriced", SendUnderpriced},
	{"transaction gas price below minimum", SendUnderpriced},
	{"gas tip below minimum", SendUnderpriced},
	{"max fee per gas below minimum", SendUnderpriced},

	{"insufficient funds", SendRejected},
	{"intrinsic gas too low", SendRejected},
	{"insufficient gas for floor data gas cost", SendRejected},
	{"max fee per gas less than block base fee", SendRejected},
	{"fee cap less than block base fee", SendRejected},
	{"fee cap below block base fee", SendRejected},
	{"max priority fee per gas higher than max fee per gas", SendRejected},
	{"invalid sender", SendRejected},
	{"invalid chain id", SendRejected},
	{"only replay-protected", SendRejected},
	{"exceeds block gas limit", SendRejected},
	{"gas limit reached", SendRejected},
	{"transaction gas limit too high", SendRejected},
	{"oversized data", SendRejected},
	{"negative value", SendRejected},
	{"transaction type not supported", SendRejected},
	{"tx fee (", SendRejected}, // "tx fee (2.00 ether) exceeds the configured cap (1.00 ether)"
}

// ClassifySendMessage classifies a node's answer to a send by the beginning
// of its message (case-insensitive, leading space ignored). A message that
// matches nothing is SendIndeterminate: an unexplained error may still mean
// the transaction went out, so its nonce must not be recycled.
func ClassifySendMessage(msg string) SendResult {
	m := strings.ToLower(strings.TrimSpace(msg))
	for _, p := range sendPrefixes {
		if strings.HasPrefix(m, p.prefix) {
			return p.result
		}
	}
	return SendIndeterminate
}

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

// callVerdicts are the beginnings of the messages nodes answer to
// eth_estimateGas and eth_call when the transaction itself cannot run.
var callVerdicts = []string{
	"execution reverted",
	"insufficient funds",
	"gas required exceeds allowance",
	"intrinsic gas too low",
	"invalid opcode",
	"out of gas",
	"stack underflow",
	"stack overflow",
	"invalid jump",
	"contract creation code storage out of gas",
	"max initcode size exceeded",
}

// ClassifyCallMessage classes a JSON-RPC error object a node answered to
// eth_estimateGas or eth_call: Deterministic when it is the node's verdict
// on the transaction (code 3, a revert with data, or a message that begins
// with one of callVerdicts), Transient otherwise (a provider's rate limit
// or internal error, a lagging node's "header not found").
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
