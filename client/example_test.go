package client_test

import (
	"context"
	"fmt"
	"log"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerq/ledgerq/client"
)

// An application sends a payment under a key it keeps with the payment's own
// record, sends it again (a retry after a timeout: the same key and body
// answer the task already stored), and waits for the task's end.
func ExampleClient_SendTx() {
	tb := &exampleTB{}
	defer tb.close()
	lq := startLedgerq(tb, 10*time.Second) // ledgerq on a simulated chain, wallet "hot"
	ctx := context.Background()

	c, err := client.New(lq.URL, lq.Key)
	if err != nil {
		log.Fatal(err)
	}
	key := client.NewIdempotencyKey() // stored with the order before the first attempt
	value := "1000"
	tx := client.SendTxRequest{To: "0x000000000000000000000000000000000000bEEF", Value: &value}

	first, err := c.SendTx(ctx, "hot", tx, client.WithIdempotencyKey(key))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", first.Created)

	again, err := c.SendTx(ctx, "hot", tx, client.WithIdempotencyKey(key))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replayed:", again.Replayed, "same task:", again.Task.ID == first.Task.ID)

	task, err := c.WaitTask(ctx, "hot", first.Task.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("status:", task.Status)
	fmt.Println("mined:", lq.mined(*task.TxHash))
	// Output:
	// created: true
	// replayed: true same task: true
	// status: done
	// mined: true
}

// With WithWait, SendTx returns once the task has ended, waiting on the
// server's long-poll rather than reading the task again and again.
func ExampleWithWait() {
	tb := &exampleTB{}
	defer tb.close()
	lq := startLedgerq(tb, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c, err := client.New(lq.URL, lq.Key)
	if err != nil {
		log.Fatal(err)
	}
	value := "7"
	res, err := c.SendTx(ctx, "hot", client.SendTxRequest{To: "0x000000000000000000000000000000000000bEEF", Value: &value},
		client.WithWait(), client.WithRetries(3))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", res.Created, "ended:", res.Ended(), "status:", res.Task.Status)
	fmt.Println("mined:", lq.mined(*res.Task.TxHash))
	// Output:
	// created: true ended: true status: done
	// mined: true
}

// EnqueueTx stores the task in the application's own transaction: it exists
// if and only if the order does. Here the application's tables live in
// ledgerq's database, and its role was granted the wallet once
// (docs/enqueue.md).
func ExampleEnqueueTx() {
	tb := &exampleTB{}
	defer tb.close()
	lq := startLedgerq(tb, 10*time.Second) // ledgerq on a simulated chain, wallet "hot"
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, lq.DatabaseURL)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA app;
		CREATE TABLE app.orders (id bigserial PRIMARY KEY, amount_wei numeric NOT NULL);
		INSERT INTO ledgerq.enqueue_grants (role_name, wallet_id) VALUES (session_user, 'hot')`); err != nil {
		log.Fatal(err)
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // a no-op once committed
	var orderID int64
	if err := tx.QueryRow(ctx, `INSERT INTO app.orders (amount_wei) VALUES ($1) RETURNING id`, "1000").Scan(&orderID); err != nil {
		log.Fatal(err)
	}
	taskID, err := client.EnqueueTx(ctx, tx, client.EnqueueTxParams{
		Wallet:         "hot",
		To:             "0x000000000000000000000000000000000000bEEF",
		Value:          big.NewInt(1000),
		IdempotencyKey: fmt.Sprintf("order-%d", orderID),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	// The committed task is sent like any other; the HTTP client follows it.
	c, err := client.New(lq.URL, lq.Key)
	if err != nil {
		log.Fatal(err)
	}
	task, err := c.WaitTask(ctx, "hot", taskID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order", orderID, "status:", task.Status, "key:", *task.IdempotencyKey)
	fmt.Println("mined:", lq.mined(*task.TxHash))
	// Output:
	// order 1 status: done key: order-1
	// mined: true
}

// SubmitBatchTx stores a signed Sawtooth batch in the application's own
// transaction: the batch exists if and only if the order does. SQL cannot
// check the batch's signatures, so the call's success is not the batch's
// verdict: the application follows the batch to its end over HTTP (GET
// /v1/batches/{id}), where a batch whose signatures fail ends invalid.
func ExampleSubmitBatchTx() {
	tb := &exampleTB{}
	defer tb.close()
	lq := startLedgerq(tb, 10*time.Second) // ledgerq on a simulated Sawtooth ledger
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, lq.DatabaseURL)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA app;
		CREATE TABLE app.orders (id bigserial PRIMARY KEY, note text NOT NULL, batch_id text);
		INSERT INTO ledgerq.enqueue_service_grants (role_name, service_id) VALUES (session_user, 'orders')`); err != nil {
		log.Fatal(err)
	}
	batch := signedBatch(tb, "transfer 10 to bob") // the application's signed Batch, serialized

	tx, err := conn.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // a no-op once committed
	batchID, err := client.SubmitBatchTx(ctx, tx, "orders", batch)
	if err != nil {
		log.Fatal(err)
	}
	var orderID int64
	if err := tx.QueryRow(ctx, `INSERT INTO app.orders (note, batch_id) VALUES ($1, $2) RETURNING id`, "transfer 10 to bob", batchID).Scan(&orderID); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	// The committed batch is sent like any other; follow it to its end.
	c, err := client.New(lq.URL, lq.Admin)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var b client.Batch
	for b.State != client.BatchStateCommitted && b.State != client.BatchStateInvalid {
		select {
		case <-ctx.Done():
			log.Fatal(ctx.Err())
		case <-tick.C:
		}
		res, err := c.API().GetBatchWithResponse(ctx, batchID)
		if err != nil {
			log.Fatal(err)
		}
		if res.JSON200 == nil {
			log.Fatalf("GET /v1/batches/%s: %s", batchID, res.Status())
		}
		b = res.JSON200.Batch
	}
	fmt.Println("order", orderID, "batch state:", b.State, "service:", b.ServiceID)
	fmt.Println("committed by the ledger:", lq.committed(batchID))
	// Output:
	// order 1 batch state: committed service: orders
	// committed by the ledger: true
}
