package client_test

import (
	"context"
	"fmt"
	"log"
	"math/big"
	"os"
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
// if and only if the order does. (This example is compiled, not run: it needs
// a database with ledgerq's schema and a role granted ledgerq_enqueue.)
func ExampleEnqueueTx() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("APP_DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)

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
	fmt.Println("order", orderID, "pays with task", taskID)
}
