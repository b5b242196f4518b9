package store

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rlp"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// SignRequest is a signature the wallet lane is about to ask of a signer
// outside the process (an HSM, a KMS, a remote signer): the write-ahead
// across signers records it first (SignRequestRecord), and until the
// attempt at its nonce is stored the nonce is pinned to its content.
type SignRequest struct {
	// TaskID is the task the transaction carries out; "" for a no-op (a
	// 0-value transfer to the wallet itself).
	TaskID string
	Nonce  int64
	// To, Value and Data are the transaction's call: with the chain, the
	// sender and the nonce, its content (SignRequestContent).
	To    string
	Value *big.Int
	Data  []byte
	// GasLimit is what the request is made with, kept so that a repeated
	// request needs no new estimate. It is not content.
	GasLimit uint64
}

// SignRequestContent is the content hash of r from sender on chainID: the
// Keccak-256 of the RLP list (chain id, sender, nonce, to, value, data).
// Fees and the gas limit are not content: a transaction signed again with
// other fees is the same transaction (a gas bump), one with another call is
// not.
func SignRequestContent(chainID int64, sender string, r SignRequest) []byte {
	value := r.Value
	if value == nil {
		value = new(big.Int)
	}
	data := r.Data
	if data == nil {
		data = []byte{}
	}
	enc, err := rlp.EncodeToBytes([]any{
		big.NewInt(chainID), common.HexToAddress(sender), uint64(r.Nonce), common.HexToAddress(r.To), value, data,
	})
	if err != nil {
		// Every field has an RLP encoding; a negative value has none, and
		// the task's CHECK refuses one.
		panic(fmt.Sprintf("encoding a sign request: %v", err))
	}
	return crypto.Keccak256(enc)
}

// PinnedRequest is a recorded request: its nonce is pinned to its content.
type PinnedRequest struct {
	// TaskID is "" for a no-op.
	TaskID      string
	Nonce       int64
	ContentHash []byte
	GasLimit    uint64
	RequestedAt time.Time
}

// SignRequestPinnedError says some nonces of a send were already requested
// with other content: nothing was recorded, and none of the send may be
// signed.
type SignRequestPinnedError struct {
	ChainID int64
	Sender  string
	Nonces  []int64
}

func (e *SignRequestPinnedError) Error() string {
	return fmt.Sprintf("nonces %v of %s were asked of the signer with other content and are pinned to it", e.Nonces, WalletShardKey(e.ChainID, e.Sender))
}

// SignRequestRecordParams are the requests of one send or no-op round.
type SignRequestRecordParams struct {
	Now     time.Time
	ChainID int64
	Sender  string
	// Below is the chain's nonce: requests below it are dead (the chain
	// moved past them) and are deleted in the same transaction.
	Below    int64
	Requests []SignRequest
}

// SignRequestRecord is the write-ahead across signers: in one transaction it
// deletes the wallet's dead requests and records p.Requests, each unless its
// nonce was requested before with the same content (the first row stays).
// It fails, recording nothing, with *SignRequestPinnedError when a nonce was
// requested with other content (another task or call), and with
// *TaskNotWaitingError when a task is no longer waiting (cancelled or
// started meanwhile). The tasks' rows stay locked until the transaction
// ends, so a cancel either came first or sees the requests (TaskCancel). A
// worker runs it inside ShardFenced, so a worker whose lease was rescued
// records nothing.
func (s *Store) SignRequestRecord(ctx context.Context, p SignRequestRecordParams) error {
	sender := lowerHex(p.Sender)
	key := WalletShardKey(p.ChainID, sender)
	n := len(p.Requests)
	rec := dbsqlc.SignRequestRecordParams{
		ChainID: p.ChainID, Sender: sender, Now: p.Now,
		Nonces: make([]int64, n), TaskIds: make([]string, n), ContentHashes: make([][]byte, n), GasLimits: make([]int64, n),
	}
	var ids []string
	for i, r := range p.Requests {
		if r.GasLimit == 0 || r.GasLimit > 1<<63-1 {
			return fmt.Errorf("recording the sign requests of %s: gas limit %d out of range", key, r.GasLimit)
		}
		rec.Nonces[i], rec.TaskIds[i], rec.GasLimits[i] = r.Nonce, r.TaskID, int64(r.GasLimit)
		rec.ContentHashes[i] = SignRequestContent(p.ChainID, sender, r)
		if r.TaskID != "" {
			ids = append(ids, r.TaskID)
		}
	}
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		if _, err := q.SignRequestDeleteBelow(ctx, dbsqlc.SignRequestDeleteBelowParams{ChainID: p.ChainID, Sender: sender, Below: p.Below}); err != nil {
			return fmt.Errorf("deleting the dead sign requests of %s: %w", key, err)
		}
		if n == 0 {
			return nil
		}
		if len(ids) > 0 {
			waiting, err := q.SignRequestLockTasks(ctx, dbsqlc.SignRequestLockTasksParams{ChainID: p.ChainID, Sender: sender, Ids: ids})
			if err != nil {
				return fmt.Errorf("locking the tasks of %s: %w", key, err)
			}
			if len(waiting) != len(ids) {
				return &TaskNotWaitingError{Wanted: len(ids), Waiting: len(waiting)}
			}
		}
		pinned, err := q.SignRequestRecord(ctx, rec)
		if err != nil {
			return fmt.Errorf("recording the sign requests of %s: %w", key, err)
		}
		if len(pinned) > 0 {
			return &SignRequestPinnedError{ChainID: p.ChainID, Sender: sender, Nonces: pinned}
		}
		return nil
	})
}

// SignRequestListPinned returns the wallet's requests from nonce from (the
// chain's nonce) on, in nonce order: the nonces pinned to their content.
func (s *Store) SignRequestListPinned(ctx context.Context, chainID int64, sender string, from int64) ([]PinnedRequest, error) {
	rows, err := s.q.SignRequestListPinned(ctx, dbsqlc.SignRequestListPinnedParams{ChainID: chainID, Sender: lowerHex(sender), FromNonce: from})
	if err != nil {
		return nil, fmt.Errorf("reading the sign requests of %s: %w", WalletShardKey(chainID, sender), err)
	}
	return fromRows(rows, func(r dbsqlc.LedgerqWalletSignRequest) PinnedRequest {
		return PinnedRequest{TaskID: deref(r.TaskID), Nonce: r.Nonce, ContentHash: r.ContentHash, GasLimit: uint64(r.GasLimit), RequestedAt: r.RequestedAt.UTC()}
	}), nil
}

// TaskBeingSignedError says a task cannot be cancelled: a signer outside
// the process was asked to sign its transaction, and until that attempt is
// stored its nonce is pinned to it (SignRequestRecord).
type TaskBeingSignedError struct {
	ID string
}

func (e *TaskBeingSignedError) Error() string {
	return fmt.Sprintf("task %s cannot be cancelled: its transaction is being signed", e.ID)
}
