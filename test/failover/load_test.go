package failover

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/ledgerq/ledgerq/internal/ledger/jam"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

const (
	walletName = "w0"
	// services are the batch lane's services: each gets its batches in turn.
	services = 4
	// builderSenders are the development accounts the builder lane's load
	// sends from (the JAM chain's EVM funds them).
	builderSenders = 4
	builderChainID = 1337
	// rpcCodeInternal is JSON-RPC's "internal error", which /rpc answers
	// with the message "database unavailable" while it has no database.
	rpcCodeInternal = -32603
	// The pace of each lane's load, and of a client's retries.
	batchEvery   = 150 * time.Millisecond
	taskEvery    = 300 * time.Millisecond
	txEvery      = 200 * time.Millisecond
	retryEvery   = 100 * time.Millisecond
	retryTimeout = 2 * time.Minute
	// waitingEvery: every this many tasks is posted without task=true,
	// waiting for its task to end (the long-poll).
	waitingEvery = 4
)

// answers records every HTTP answer the load's clients get, by lane.
type answers struct {
	mu     sync.Mutex
	counts map[string]map[int]int // lane → status → answers; status 0: no answer
	// unavailable are the times of each lane's 503s.
	unavailable map[string][]time.Time
	// bad are answers that must not happen: a 5xx other than 503, a 503
	// without Retry-After, no answer at all.
	bad []string
}

// rpcUnavailable counts a JSON-RPC "database unavailable" (HTTP 200, an
// error object) as the builder lane's 503.
func (a *answers) rpcUnavailable() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counts[laneBuilder][http.StatusServiceUnavailable]++
	a.counts[laneBuilder][http.StatusOK]--
	a.unavailable[laneBuilder] = append(a.unavailable[laneBuilder], time.Now())
}

func newAnswers() *answers {
	return &answers{counts: map[string]map[int]int{}, unavailable: map[string][]time.Time{}}
}

// client returns an HTTP client whose answers are recorded under lane.
func (a *answers) client(lane string, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: recording{lane: lane, a: a, base: http.DefaultTransport}}
}

type recording struct {
	lane string
	a    *answers
	base http.RoundTripper
}

func (rt recording) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.base.RoundTrip(req)
	a := rt.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.counts[rt.lane] == nil {
		a.counts[rt.lane] = map[int]int{}
	}
	if err != nil {
		a.counts[rt.lane][0]++
		a.bad = append(a.bad, fmt.Sprintf("%s: %s %s: no answer: %v", rt.lane, req.Method, req.URL.Path, err))
		return nil, err
	}
	a.counts[rt.lane][resp.StatusCode]++
	if resp.StatusCode < http.StatusInternalServerError {
		return resp, nil
	}
	// Keep the body for the record and for the client.
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if resp.StatusCode != http.StatusServiceUnavailable {
		a.bad = append(a.bad, fmt.Sprintf("%s: %s %s: %d %s", rt.lane, req.Method, req.URL.Path, resp.StatusCode, body))
		return resp, nil
	}
	a.unavailable[rt.lane] = append(a.unavailable[rt.lane], time.Now())
	if resp.Header.Get("Retry-After") == "" {
		a.bad = append(a.bad, fmt.Sprintf("%s: %s %s: 503 without Retry-After: %s", rt.lane, req.Method, req.URL.Path, body))
	}
	return resp, nil
}

// load is the clients of the three lanes and what ledgerq accepted from
// them.
type load struct {
	r    *run
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	batches []acceptedBatch
	tasks   []acceptedTask
	txs     []acceptedTx
	// stored503 counts, for send-tx that fire and forget (false) and that
	// wait (true), the 503s answered after the task was stored, as the
	// retry's Idempotent-Replayed shows.
	stored503 map[bool]int
}

type acceptedBatch struct{ id, service string }

type acceptedTask struct {
	id   string
	data []byte
}

type acceptedTx struct {
	hash   string
	sender common.Address
	nonce  uint64
}

func (r *run) startLoad() {
	l := &load{r: r, stop: make(chan struct{}), stored503: map[bool]int{}}
	r.load = l
	l.wg.Go(l.postBatches)
	l.wg.Go(l.postTasks)
	l.wg.Go(l.sendTransactions)
}

// stopLoad stops the clients and waits for them: each first finishes the
// item it has started, whose fate is not known until ledgerq accepts it.
func (r *run) stopLoad() {
	close(r.load.stop)
	r.load.wg.Wait()
	batches, tasks, txs := r.load.accepted()
	r.logf("accepted: %d batches, %d tasks, %d pool transactions", len(batches), len(tasks), len(txs))
}

func (l *load) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// pause waits d or until the load stops.
func (l *load) pause(d time.Duration) {
	select {
	case <-l.stop:
	case <-time.After(d):
	}
}

func (l *load) accepted() ([]acceptedBatch, []acceptedTask, []acceptedTx) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]acceptedBatch(nil), l.batches...), append([]acceptedTask(nil), l.tasks...), append([]acceptedTx(nil), l.txs...)
}

// retry runs try every retryEvery until it reports done, as a client does
// while the API answers 503: the item is sent again as it was, which the
// API takes as the same item (a batch's id, a task's Idempotency-Key, a
// transaction's hash). It gives up, failing the test, after retryTimeout.
func (l *load) retry(what string, try func() (done bool, err error)) bool {
	deadline := time.Now().Add(retryTimeout)
	for {
		done, err := try()
		if err != nil {
			l.r.t.Errorf("%s: %v", what, err)
			return false
		}
		if done {
			return true
		}
		if time.Now().After(deadline) {
			l.r.t.Errorf("%s: not accepted within %s", what, retryTimeout)
			return false
		}
		time.Sleep(retryEvery) // a client's pause before it sends again
	}
}

// postBatches posts signed batches to /v1/batches, one at a time, the
// services in turn, until the load stops.
func (l *load) postBatches() {
	c := l.r.answers.client(laneBatch, 30*time.Second)
	for i := 0; !l.stopped(); i++ {
		service := fmt.Sprintf("svc-%d", i%services)
		id, payload := testfactory.SignedBatch(l.r.t)
		body, _ := json.Marshal(map[string]string{"id": id, "service_id": service, "payload": base64.StdEncoding.EncodeToString(payload)})
		ok := l.retry("batch "+id, func() (bool, error) {
			a, err := post(c, l.r.api+"/v1/batches", body, map[string]string{"Authorization": "Bearer " + l.r.token})
			switch {
			case err != nil, a.status == http.StatusServiceUnavailable:
				return false, nil
			case a.status == http.StatusCreated, a.status == http.StatusOK:
				return true, nil
			}
			return false, fmt.Errorf("answered %d %s", a.status, a.body)
		})
		if !ok {
			return
		}
		l.mu.Lock()
		l.batches = append(l.batches, acceptedBatch{id: id, service: service})
		l.mu.Unlock()
		l.pause(batchEvery)
	}
}

// postTasks posts send-tx tasks, each with call data of its own under an
// Idempotency-Key of its own; most fire and forget (task=true), every
// waitingEvery-th waits for its task to end (in a goroutine of its own).
func (l *load) postTasks() {
	quick := l.r.answers.client(laneWallet, 30*time.Second)
	waiting := l.r.answers.client(laneWallet, 2*time.Minute)
	var waits sync.WaitGroup
	defer waits.Wait()
	for n := 1; !l.stopped(); n++ {
		data := make([]byte, 32)
		copy(data, "ledgerq failover")
		binary.BigEndian.PutUint64(data[24:], uint64(n))
		body := fmt.Appendf(nil, `{"to":"0x000000000000000000000000000000000000dEaD","value":"%d","data":"0x%s"}`, n, hex.EncodeToString(data))
		key := fmt.Sprintf("failover-%d", n)
		send := func(c *http.Client, url string, waits bool) {
			var id string
			unavailable := false
			ok := l.retry("task "+key, func() (bool, error) {
				a, err := post(c, url, body, map[string]string{"Authorization": "Bearer " + l.r.token, "Idempotency-Key": key})
				switch {
				case err != nil:
					return false, nil
				case a.status == http.StatusServiceUnavailable:
					unavailable = true
					return false, nil
				case a.status == http.StatusAccepted, a.status == http.StatusOK:
					var out struct {
						Task struct {
							ID string `json:"id"`
						} `json:"task"`
					}
					if err := json.Unmarshal(a.body, &out); err != nil || out.Task.ID == "" {
						return false, fmt.Errorf("answered %d %s", a.status, a.body)
					}
					id = out.Task.ID
					if unavailable && a.header.Get("Idempotent-Replayed") == "true" {
						// A 503 answered a request whose task was stored:
						// without its Idempotency-Key, the client's retry
						// would have been a second payment.
						l.mu.Lock()
						l.stored503[waits]++
						l.mu.Unlock()
					}
					return true, nil
				}
				return false, fmt.Errorf("answered %d %s", a.status, a.body)
			})
			if ok {
				l.mu.Lock()
				l.tasks = append(l.tasks, acceptedTask{id: id, data: data})
				l.mu.Unlock()
			}
		}
		url := l.r.api + "/v1/wallets/" + walletName + "/send-tx"
		if n%waitingEvery == 0 {
			waits.Go(func() { send(waiting, url, true) })
		} else {
			send(quick, url+"?task=true", false)
		}
		l.pause(taskEvery)
	}
}

// sendTransactions sends signed transactions to /rpc with ethclient, from
// builderSenders development accounts in turn, each with nonces from 0.
func (l *load) sendTransactions() {
	ctx := context.Background()
	rc, err := rpc.DialOptions(ctx, l.r.api+"/rpc", rpc.WithHTTPClient(l.r.answers.client(laneBuilder, 30*time.Second)))
	if err != nil {
		l.r.t.Errorf("dialing /rpc: %v", err)
		return
	}
	ec := ethclient.NewClient(rc)
	defer ec.Close()
	keys := make([]*ecdsa.PrivateKey, builderSenders)
	for i := range keys {
		keys[i] = jam.DevAccounts()[i].Key
	}
	nonces := make([]uint64, builderSenders)
	for i := 0; !l.stopped(); i++ {
		s := i % builderSenders
		tx := signTx(keys[s], nonces[s])
		ok := l.retry("transaction "+tx.Hash().Hex(), func() (bool, error) {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := ec.SendTransaction(sctx, tx)
			cancel()
			var rpcErr rpc.Error
			switch {
			case err == nil, strings.HasPrefix(err.Error(), "already known"):
				return true, nil
			case errors.As(err, &rpcErr) && rpcErr.ErrorCode() == rpcCodeInternal && err.Error() == "database unavailable":
				// JSON-RPC's 503: HTTP 200 with an error object, as geth
				// answers every error.
				l.r.answers.rpcUnavailable()
				return false, nil
			case errors.As(err, &rpcErr) && strings.HasPrefix(err.Error(), "txpool is full"):
				// The sender's share of the pool is full while the
				// bundles catch up.
				return false, nil
			case !errors.As(err, &rpcErr):
				return false, nil // no answer, or not JSON-RPC's: recorded, sent again
			}
			return false, err
		})
		if !ok {
			return
		}
		l.mu.Lock()
		l.txs = append(l.txs, acceptedTx{hash: strings.ToLower(tx.Hash().Hex()), sender: crypto.PubkeyToAddress(keys[s].PublicKey), nonce: nonces[s]})
		l.mu.Unlock()
		nonces[s]++
		l.pause(txEvery)
	}
}

func signTx(key *ecdsa.PrivateKey, nonce uint64) *types.Transaction {
	id := big.NewInt(builderChainID)
	tip := big.NewInt(2_000_000_000)
	to := common.HexToAddress("0x00000000000000000000000000000000000fa110")
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(id), &types.DynamicFeeTx{
		ChainID: id, Nonce: nonce, GasTipCap: tip, GasFeeCap: new(big.Int).Mul(tip, big.NewInt(2)), Gas: 21_000, To: &to, Value: big.NewInt(1),
	})
	if err != nil {
		panic(err)
	}
	return tx
}

// answer is an HTTP answer as a client reads it.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// post POSTs a JSON body and returns the answer.
func post(c *http.Client, url string, body []byte, headers map[string]string) (answer, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func batchIDs(bs []acceptedBatch) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.id
	}
	return out
}

func taskIDs(ts []acceptedTask) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.id
	}
	return out
}

func txHashes(txs []acceptedTx) []string {
	out := make([]string, len(txs))
	for i, tx := range txs {
		out[i] = tx.hash
	}
	return out
}

// statusLine renders a lane's answers as "201×812 503×37".
func statusLine(counts map[int]int) string {
	var codes []int
	for c := range counts {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		name := fmt.Sprint(c)
		if c == 0 {
			name = "no answer"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", name, counts[c]))
	}
	return strings.Join(parts, " ")
}
