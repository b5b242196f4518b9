// Package client is ledgerq's Go client for applications.
//
// Two ways in, one set of errors:
//
//   - Over HTTP: New returns a Client whose SendTx stores a send-tx task with an
//     Idempotency-Key (a random UUID unless the caller gives one), WaitTask
//     waits for a task's end, and API gives the generated client
//     (apiclient.gen.go, from api/openapi.yaml) for every other route.
//   - Inside the application's own PostgreSQL transaction: EnqueueTx calls
//     ledgerq.send_tx on a pgx.Tx, so the task exists if and only if the
//     application's transaction commits; SubmitBatchTx does the same for a
//     signed Sawtooth batch with ledgerq.submit_batch.
//
// Refusals are typed: *APIError (HTTP) and *EnqueueError (SQL) keep what the
// server said (the status or SQLSTATE, the message, the field, a policy
// refusal's rule and amounts), and both match the same sentinels with
// errors.Is: ErrBadRequest, ErrPolicyRefused, ErrIdempotencyConflict, ….
//
// Retrying a send: the Idempotency-Key is what makes a retry safe. A caller
// that retries a SendTx (after a timeout, a 503, a crash) must send it again
// with the same key, or the retry stores a second task and the payment is sent
// twice. Keep the key with the application's own record (NewIdempotencyKey,
// then WithIdempotencyKey on every attempt), or let SendTx retry by itself
// (WithRetries), which reuses its key.
package client
