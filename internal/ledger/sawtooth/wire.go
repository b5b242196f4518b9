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
	CodeAccessDenied        = 103 // 401, 403: no valid API key, or one without the service's scope (--api-sawtooth-require-key)
	CodeRateLimited         = 104 // 429: the client is past its rate (--api-rate-limit-anonymous, --api-rate-limit); Retry-After says when to send again
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

// Sawtooth REST API's own errors, with its codes, titles and messages as
// Sawtooth words them (rest_api/sawtooth_rest_api/exceptions.py). A message
// ending in ": " takes the details after it.
var (
	APIValidatorDisconnected = APIError{Code: CodeValidatorDisconnected, Title: "Validator Disconnected",
		Message: "The validator disconnected before sending a response. Try your request again later."}
	APISubmittedBatchesInvalid = APIError{Code: CodeSubmittedBatchesInvalid, Title: "Submitted Batches Invalid",
		Message: "The submitted BatchList was rejected by the validator. It was poorly formed, or has an invalid signature."}
	APINoBatchesSubmitted = APIError{Code: CodeNoBatchesSubmitted, Title: "No Batches Submitted",
		Message: "The protobuf BatchList you submitted was empty and contained no Batches. You must submit at least one Batch."}
	APIBadProtobufSubmitted = APIError{Code: CodeBadProtobufSubmitted, Title: "Protobuf Not Decodable",
		Message: "The protobuf BatchList you submitted was malformed and could not be read."}
	APISubmissionWrongType = APIError{Code: CodeSubmissionWrongType, Title: "Wrong Content Type",
		Message: "Batches must be submitted in a BatchList protobuf binary, with a 'Content-Type' header of 'application/octet-stream'."}
	APIStatusWrongContentType = APIError{Code: CodeStatusWrongContentType, Title: "Wrong Content Type",
		Message: "Requests for batch statuses sent as a POST must have a 'Content-Type' header of 'application/json'."}
	APIStatusBodyInvalid = APIError{Code: CodeStatusBodyInvalid, Title: "Bad Status Request",
		Message: "Requests for batch statuses sent as a POST must have a JSON formatted body with an array of at least one id string."}
	APIStatusIDQueryInvalid = APIError{Code: CodeStatusIDQueryInvalid, Title: "Id Query Invalid or Missing",
		Message: "Requests for batch statuses sent as a GET request must have an 'id' query parameter with a comma-separated list of at least one batch id."}
	APIInvalidResourceID = APIError{Code: CodeInvalidResourceID, Title: "Invalid Resource Id",
		Message: "Blockchain items are identified by 128 character hex-strings. A submitted block, batch, or transaction id was invalid: "}
)

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
