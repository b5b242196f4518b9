package ledger

import "context"

// Batch is one already-signed batch for the batch lane. For Sawtooth, Payload is
// a serialized Batch protobuf message and ID is its header_signature.
type Batch struct {
	ID      string
	Payload []byte
}

// BatchStatus is a ledger's answer about one batch, with Sawtooth's names.
type BatchStatus string

// The batch statuses a ledger can report.
const (
	BatchCommitted BatchStatus = "COMMITTED"
	BatchInvalid   BatchStatus = "INVALID"
	BatchPending   BatchStatus = "PENDING"
	BatchUnknown   BatchStatus = "UNKNOWN"
)

// BatchStatusResult is the status of one batch and, for an invalid one, why.
type BatchStatusResult struct {
	Status BatchStatus
	// Reason is set for INVALID batches: the messages of the invalid
	// transactions, joined.
	Reason string
}

// BatchLedger is what the batch lane needs from a ledger.
type BatchLedger interface {
	// SubmitBatches sends batches in as few calls as the ledger allows (one
	// BatchList for Sawtooth). It returns one error per batch, in the order
	// given: nil means the ledger accepted that batch; otherwise a classified
	// *Error. A returned call error applies to every batch in the call.
	SubmitBatches(ctx context.Context, batches []Batch) ([]error, error)
	// BatchStatuses reports the status of each id. Every id asked for is in the
	// map; a batch the ledger does not know is BatchUnknown.
	BatchStatuses(ctx context.Context, ids []string) (map[string]BatchStatusResult, error)
}
