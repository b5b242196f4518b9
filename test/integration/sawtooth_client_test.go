package integration

// A Sawtooth client that knows nothing of ledgerq points at it unchanged
// (docs/design.md, the batch lane's Sawtooth drop-in rule). The client here is
// written from Sawtooth's published definitions only, not from ledgerq's code:
//
//   - the messages of sawtooth-core's protos/transaction.proto and
//     protos/batch.proto, encoded field by field with protowire;
//   - the signing rule of Sawtooth's SDKs: secp256k1 over the SHA-256 of the
//     serialized header, as 64 compact bytes r‖s in lower case hex, with the
//     compressed public key in hex;
//   - the REST API of rest_api/openapi.yaml and sawtooth_rest_api's
//     route_handlers.py and exceptions.py: POST /batches with
//     application/octet-stream answers 202 {"link": …}; GET
//     /batch_statuses?id=…&wait=N answers {"data": [{"id", "status",
//     "invalid_transactions"}], "link"}; errors are {"error": {"code",
//     "title", "message"}}, code 30 for a BatchList the validator refuses.

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ledgerq/ledgerq/internal/testdb"
)

// Field numbers of Sawtooth's published protobuf messages.
const (
	// protos/transaction.proto, message TransactionHeader.
	txnHeaderBatcherPublicKey protowire.Number = 1
	txnHeaderFamilyName       protowire.Number = 3
	txnHeaderFamilyVersion    protowire.Number = 4
	txnHeaderInputs           protowire.Number = 5
	txnHeaderNonce            protowire.Number = 6
	txnHeaderOutputs          protowire.Number = 7
	txnHeaderPayloadSha512    protowire.Number = 9
	txnHeaderSignerPublicKey  protowire.Number = 10
	// protos/transaction.proto, message Transaction.
	txnHeader          protowire.Number = 1
	txnHeaderSignature protowire.Number = 2
	txnPayload         protowire.Number = 3
	// protos/batch.proto, message BatchHeader.
	batchHeaderSignerPublicKey protowire.Number = 1
	batchHeaderTransactionIDs  protowire.Number = 2
	// protos/batch.proto, message Batch.
	batchHeader          protowire.Number = 1
	batchHeaderSignature protowire.Number = 2
	batchTransactions    protowire.Number = 3
	// protos/batch.proto, message BatchList.
	batchListBatches protowire.Number = 1
)

// stClient signs Sawtooth transactions and batches with one key, as the
// Sawtooth SDKs' signer does when a client batches its own transactions.
type stClient struct {
	priv  *secp256k1.PrivateKey
	pub   string
	nonce int
}

func newSTClient(t *testing.T) *stClient {
	t.Helper()
	priv, err := secp256k1.GeneratePrivateKey()
	require.NoError(t, err)
	return &stClient{priv: priv, pub: hex.EncodeToString(priv.PubKey().SerializeCompressed())}
}

// sign is Sawtooth's signature: secp256k1 over SHA-256(msg), r‖s in hex.
// SignCompact prefixes the recovery code, which Sawtooth does not use.
func (c *stClient) sign(msg []byte) string {
	hash := sha256.Sum256(msg)
	sig := ecdsa.SignCompact(c.priv, hash[:], true)
	return hex.EncodeToString(sig[1:])
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// transaction returns a serialized Transaction carrying payload, and its id.
func (c *stClient) transaction(payload []byte) (id string, txn []byte) {
	c.nonce++
	sum := sha512.Sum512(payload)
	var h []byte
	h = appendString(h, txnHeaderBatcherPublicKey, c.pub)
	h = appendString(h, txnHeaderFamilyName, "intkey")
	h = appendString(h, txnHeaderFamilyVersion, "1.0")
	h = appendString(h, txnHeaderInputs, "1cf126")
	h = appendString(h, txnHeaderNonce, fmt.Sprintf("%s-%d", c.pub[:8], c.nonce))
	h = appendString(h, txnHeaderOutputs, "1cf126")
	h = appendString(h, txnHeaderPayloadSha512, hex.EncodeToString(sum[:]))
	h = appendString(h, txnHeaderSignerPublicKey, c.pub)
	id = c.sign(h)
	txn = appendBytes(txn, txnHeader, h)
	txn = appendString(txn, txnHeaderSignature, id)
	txn = appendBytes(txn, txnPayload, payload)
	return id, txn
}

// batch returns a serialized Batch of one transaction per payload, and its
// id (the batch header signature).
func (c *stClient) batch(payloads ...string) (id string, batch []byte) {
	h, txns := c.batchParts(payloads...)
	id = c.sign(h)
	return id, assembleBatch(h, id, txns)
}

// batchParts returns a serialized BatchHeader naming c as the signer, and
// the serialized Transactions it lists, as repeated Batch.transactions.
func (c *stClient) batchParts(payloads ...string) (header, txns []byte) {
	header = appendString(header, batchHeaderSignerPublicKey, c.pub)
	for _, p := range payloads {
		tid, txn := c.transaction([]byte(p))
		header = appendString(header, batchHeaderTransactionIDs, tid)
		txns = appendBytes(txns, batchTransactions, txn)
	}
	return header, txns
}

func assembleBatch(header []byte, signature string, txns []byte) []byte {
	var b []byte
	b = appendBytes(b, batchHeader, header)
	b = appendString(b, batchHeaderSignature, signature)
	return append(b, txns...)
}

// batchListOf serializes a BatchList of the given Batch messages.
func batchListOf(batches ...[]byte) []byte {
	var list []byte
	for _, b := range batches {
		list = appendBytes(list, batchListBatches, b)
	}
	return list
}

// stStatuses is GET /batch_statuses' answer, per Sawtooth's openapi.yaml.
type stStatuses struct {
	Data []struct {
		ID                  string            `json:"id"`
		Status              string            `json:"status"`
		InvalidTransactions []json.RawMessage `json:"invalid_transactions"`
	} `json:"data"`
	Link string `json:"link"`
}

type stError struct {
	Error struct {
		Code    int    `json:"code"`
		Title   string `json:"title"`
		Message string `json:"message"`
	} `json:"error"`
}

func postBatchList(t *testing.T, api string, list []byte) (int, []byte) {
	t.Helper()
	r := post(t, api+"/batches", "application/octet-stream", list)
	return r.StatusCode, []byte(r.Body)
}

func TestSawtoothClient_SubmitsToLedgerqUnchangedAndSeesItsBatchesCommittedInOrder(t *testing.T) {
	t.Parallel()
	db := testdb.New(t).URL
	sim := startSimLedger(t)
	_, api := startServe(t, db, sim.url, "--poll-interval", "100ms", "--batch-first-check", "0s", "--batch-check-interval", "50ms")

	// Two signers, their batches interleaved in one list; each signer's
	// batches must reach the ledger in list order.
	alice, bob := newSTClient(t), newSTClient(t)
	var ids []string
	var batches [][]byte
	signerOf := map[string]string{}
	for i, c := range []*stClient{alice, bob, alice, alice, bob} {
		id, b := c.batch(fmt.Sprintf(`{"Verb":"set","Name":"k%d","Value":%d}`, i, i), fmt.Sprintf(`{"Verb":"inc","Name":"k%d","Value":1}`, i))
		ids, batches = append(ids, id), append(batches, b)
		signerOf[id] = c.pub
	}

	status, body := postBatchList(t, api, batchListOf(batches...))
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var submitted struct {
		Link string `json:"link"`
	}
	require.NoError(t, json.Unmarshal(body, &submitted), "%s", body)
	require.Equal(t, api+"/batch_statuses?id="+strings.Join(ids, ","), submitted.Link)

	// Follow the link and wait, as a Sawtooth client does.
	resp := getJSON(t, submitted.Link+"&wait=60")
	require.Equal(t, http.StatusOK, resp.StatusCode, resp.Body)
	var st stStatuses
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &st), resp.Body)
	require.Len(t, st.Data, len(ids))
	for i, d := range st.Data {
		require.Equal(t, ids[i], d.ID)
		require.Equal(t, "COMMITTED", d.Status, "batch %d: %s", i, resp.Body)
		require.Empty(t, d.InvalidTransactions)
	}
	require.Equal(t, submitted.Link+"&wait=60", st.Link)

	// The ledger saw each signer's batches in list order.
	var accepted []string
	for _, e := range sim.events(t) {
		if e.Kind == "accepted" {
			accepted = append(accepted, e.BatchID)
		}
	}
	for _, signer := range []string{alice.pub, bob.pub} {
		var want, got []string
		for _, id := range ids {
			if signerOf[id] == signer {
				want = append(want, id)
			}
		}
		for _, id := range accepted {
			if signerOf[id] == signer {
				got = append(got, id)
			}
		}
		require.Equal(t, want, got, "signer %.12s: the ledger accepted its batches out of list order", signer)
	}
	// ledgerq filed each batch under its signer's public key.
	for _, id := range ids {
		r := getJSON(t, api+"/v1/batches/"+url.PathEscape(id))
		require.Equal(t, http.StatusOK, r.StatusCode, r.Body)
		require.Contains(t, r.Body, `"service_id":"`+signerOf[id]+`"`)
	}

	// POST /batch_statuses, with an id ledgerq never saw.
	never, _ := newSTClient(t).batch("never sent")
	ask, err := json.Marshal([]string{ids[0], never})
	require.NoError(t, err)
	r := postJSON(t, api+"/batch_statuses", ask)
	require.Equal(t, http.StatusOK, r.StatusCode, r.Body)
	st = stStatuses{}
	require.NoError(t, json.Unmarshal([]byte(r.Body), &st), r.Body)
	require.Len(t, st.Data, 2)
	require.Equal(t, "COMMITTED", st.Data[0].Status)
	require.Equal(t, never, st.Data[1].ID)
	require.Equal(t, "UNKNOWN", st.Data[1].Status)

	// A list with one badly signed batch is refused whole, as a validator
	// refuses it: 400, code 30, and nothing of it is stored.
	goodID, good := alice.batch("good")
	header, txns := alice.batchParts("signed by the wrong key")
	forged := assembleBatch(header, bob.sign(header), txns) // the header names alice
	status, body = postBatchList(t, api, batchListOf(good, forged))
	require.Equal(t, http.StatusBadRequest, status, "%s", body)
	var refusal stError
	require.NoError(t, json.Unmarshal(body, &refusal), "%s", body)
	require.Equal(t, 30, refusal.Error.Code, "%s", body)
	require.Equal(t, "Submitted Batches Invalid", refusal.Error.Title)
	r = getJSON(t, api+"/batch_statuses?id="+goodID)
	require.Equal(t, http.StatusOK, r.StatusCode, r.Body)
	require.Contains(t, r.Body, `"status":"UNKNOWN"`, "the good batch of the refused list was not stored")

	// The wrong content type is Sawtooth's code 42.
	r = post(t, api+"/batches", "application/json", batchListOf(good))
	body = []byte(r.Body)
	require.Equal(t, http.StatusBadRequest, r.StatusCode, "%s", body)
	refusal = stError{}
	require.NoError(t, json.Unmarshal(body, &refusal), "%s", body)
	require.Equal(t, 42, refusal.Error.Code, "%s", body)
}
