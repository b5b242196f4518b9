package sawtooth

import (
	"fmt"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// Error codes of Sawtooth's REST API (sawtooth_rest_api/exceptions.py) that
// the batch lane meets. The code, not the title or message, is the stable part.
const (
	CodeUnknownValidatorError   = 10 // 500
	CodeValidatorNotReady       = 15 // 503
	CodeValidatorTimedOut       = 17 // 503: the batches may or may not have been taken
	CodeValidatorDisconnected   = 18 // 503
	CodeSubmittedBatchesInvalid = 30 // 400: the validator refused the BatchList
	CodeSubmitBufferFull        = 31 // 429: the validator's queue is full
	CodeNoBatchesSubmitted      = 34 // 400
	CodeBadProtobufSubmitted    = 35 // 400: the BatchList does not decode
	CodeSubmissionWrongType     = 42 // 400: POST /batches needs application/octet-stream
	CodeStatusWrongContentType  = 43 // 400: POST /batch_statuses needs application/json
	CodeStatusBodyInvalid       = 46 // 400
	CodeInvalidResourceID       = 60 // 400: an id is not 128 hex characters
	CodeStatusIDQueryInvalid    = 66 // 400: GET /batch_statuses without ids
)

// Codes ledgerq's Sawtooth-compatible ingress (POST /batches, GET and POST
// /batch_statuses) adds for conditions Sawtooth's REST API does not meet.
// They start at 100, above every code Sawtooth uses.
const (
	CodeDatabaseUnavailable = 100 // 503: ledgerq's database did not answer in time
	CodeRequestTooLarge     = 101 // 413: over ledgerq's body, batch count or batch size limits
	CodeInvalidParameter    = 102 // 400: a bad service id, or a parameter given twice
)

// ErrorResponse is the body of a Sawtooth REST API error.
type ErrorResponse struct {
	Error APIError `json:"error"`
}

// APIError is the error object of a Sawtooth REST API error.
type APIError struct {
	Code    int    `json:"code"`
	Title   string `json:"title"`
	Message string `json:"message"`
}

func (e APIError) String() string {
	return fmt.Sprintf("%s (code %d): %s", e.Title, e.Code, e.Message)
}

// SubmitResponse is the body of a 202 answer to POST /batches.
type SubmitResponse struct {
	Link string `json:"link"`
}

// BatchStatusesResponse is the body of a 200 answer to GET or POST
// /batch_statuses.
type BatchStatusesResponse struct {
	Data []BatchStatusEntry `json:"data"`
	Link string             `json:"link,omitempty"`
}

// BatchStatusEntry is one batch's status in a BatchStatusesResponse.
type BatchStatusEntry struct {
	ID                  string               `json:"id"`
	Status              ledger.BatchStatus   `json:"status"`
	InvalidTransactions []InvalidTransaction `json:"invalid_transactions"`
}

// InvalidTransaction is a transaction that made its batch INVALID, with the
// transaction processor's message.
type InvalidTransaction struct {
	ID      string `json:"id"`
	Message string `json:"message"`
	// ExtendedData is family-specific bytes, base64 encoded. Sawtooth's REST
	// API leaves the field out when it is empty.
	ExtendedData string `json:"extended_data,omitempty"`
}
