package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
)

// rpcCall is one JSON-RPC call of a request, as sent.
type rpcCall struct {
	fields map[string]json.RawMessage
	method string
	params []json.RawMessage
	id     json.RawMessage // nil: a notification, which gets no answer
}

// parseCalls reads a request's calls: one, or a batch's. parsed is false
// when the body is not JSON-RPC; such a request is forwarded as it is.
func parseCalls(body []byte) (calls []*rpcCall, batch, parsed bool) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	var raws []json.RawMessage
	if len(trimmed) > 0 && trimmed[0] == '[' {
		batch = true
		if json.Unmarshal(trimmed, &raws) != nil || len(raws) == 0 {
			return nil, true, false
		}
	} else {
		raws = []json.RawMessage{trimmed}
	}
	for _, raw := range raws {
		c := &rpcCall{}
		if json.Unmarshal(raw, &c.fields) != nil {
			return nil, batch, false
		}
		if json.Unmarshal(c.fields["method"], &c.method) != nil {
			return nil, batch, false
		}
		if p, ok := c.fields["params"]; ok && string(p) != "null" {
			if json.Unmarshal(p, &c.params) != nil {
				return nil, batch, false
			}
		}
		if id, ok := c.fields["id"]; ok {
			c.id = id
		}
		calls = append(calls, c)
	}
	return calls, batch, true
}

// rpcAnswer is one JSON-RPC answer.
type rpcAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

var null = json.RawMessage("null")

// headerNotFound is geth's answer for state at a block it does not have.
var headerNotFound = json.RawMessage(`{"code":-32000,"message":"header not found"}`)

// lagPlan is how one call of a lagging request is answered: here (local or
// localErr), or by the node with params (nil: as sent), its result then
// passed through check. aux, when set, is a second call sent with it whose
// result check also receives.
type lagPlan struct {
	local    json.RawMessage
	localErr json.RawMessage
	params   []json.RawMessage
	aux      *auxCall
	check    func(result, aux json.RawMessage) json.RawMessage
}

type auxCall struct {
	method string
	params []json.RawMessage
}

// stateBlockArg is the position of the block argument of the methods that
// read state at a block.
var stateBlockArg = map[string]int{
	"eth_getTransactionCount": 1,
	"eth_getBalance":          1,
	"eth_getCode":             1,
	"eth_getStorageAt":        2,
	"eth_call":                1,
	"eth_estimateGas":         1,
}

// blockRef is a block argument read: a tag ("latest", …), a number, or
// something else (a hash).
type blockRef struct {
	tag    string
	number uint64
	isNum  bool
}

func readBlockRef(raw json.RawMessage) blockRef {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if n, err := hexutil.DecodeUint64(s); err == nil {
			return blockRef{number: n, isNum: true}
		}
		return blockRef{tag: s}
	}
	var obj struct {
		BlockNumber *hexutil.Uint64 `json:"blockNumber"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.BlockNumber != nil {
		return blockRef{number: uint64(*obj.BlockNumber), isNum: true}
	}
	return blockRef{}
}

func (b blockRef) latest() bool { return b.tag == "latest" || b.tag == "pending" }
func (b blockRef) final() bool  { return b.tag == "safe" || b.tag == "finalized" }

// numberAbove reports whether result (an object) names in field a block
// above target.
func numberAbove(result json.RawMessage, field string, target uint64) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil {
		return false
	}
	var n hexutil.Uint64
	if json.Unmarshal(m[field], &n) != nil {
		return false
	}
	return uint64(n) > target
}

// nullAbove is a check that answers null for a result in a block above
// target.
func nullAbove(field string, target uint64) func(result, _ json.RawMessage) json.RawMessage {
	return func(result, _ json.RawMessage) json.RawMessage {
		if numberAbove(result, field, target) {
			return null
		}
		return result
	}
}

// receiptsAbove answers null for a block's receipts in a block above target.
func receiptsAbove(target uint64) func(result, _ json.RawMessage) json.RawMessage {
	return func(result, _ json.RawMessage) json.RawMessage {
		var rs []json.RawMessage
		if json.Unmarshal(result, &rs) == nil && len(rs) > 0 && numberAbove(rs[0], "blockNumber", target) {
			return null
		}
		return result
	}
}

func withParam(params []json.RawMessage, i int, v json.RawMessage) []json.RawMessage {
	out := append([]json.RawMessage(nil), params...)
	for len(out) <= i {
		out = append(out, null)
	}
	out[i] = v
	return out
}

// planLag is how c is answered by a node whose head is target.
func planLag(c *rpcCall, target uint64) lagPlan {
	tgt := json.RawMessage(strconv.Quote(hexutil.EncodeUint64(target)))
	switch c.method {
	case "eth_blockNumber":
		return lagPlan{local: tgt}
	case "eth_getBlockByNumber":
		if len(c.params) == 0 {
			return lagPlan{}
		}
		b := readBlockRef(c.params[0])
		switch {
		case b.isNum && b.number > target:
			return lagPlan{local: null}
		case b.latest():
			return lagPlan{params: withParam(c.params, 0, tgt)}
		case b.final():
			// The lower of the tag's block and head−k.
			return lagPlan{aux: &auxCall{method: c.method, params: withParam(c.params, 0, tgt)},
				check: func(result, aux json.RawMessage) json.RawMessage {
					if numberAbove(result, "number", target) {
						return aux
					}
					return result
				}}
		}
		return lagPlan{}
	case "eth_getBlockReceipts":
		if len(c.params) == 0 {
			return lagPlan{}
		}
		b := readBlockRef(c.params[0])
		switch {
		case b.isNum && b.number > target:
			return lagPlan{local: null}
		case b.latest():
			return lagPlan{params: withParam(c.params, 0, tgt)}
		}
		return lagPlan{check: receiptsAbove(target)}
	case "eth_getBlockByHash":
		return lagPlan{check: nullAbove("number", target)}
	case "eth_getTransactionReceipt", "eth_getTransactionByHash":
		return lagPlan{check: nullAbove("blockNumber", target)}
	}
	i, ok := stateBlockArg[c.method]
	if !ok || len(c.params) < i {
		return lagPlan{}
	}
	if len(c.params) == i || string(c.params[i]) == "null" {
		return lagPlan{params: withParam(c.params, i, tgt)}
	}
	switch b := readBlockRef(c.params[i]); {
	case b.latest():
		return lagPlan{params: withParam(c.params, i, tgt)}
	case b.isNum && b.number > target:
		return lagPlan{localErr: headerNotFound}
	}
	return lagPlan{}
}

// head is the node's head, read at most every headTTL.
func (p *Proxy) head(ctx context.Context) (uint64, error) {
	p.headMu.Lock()
	defer p.headMu.Unlock()
	if !p.headAt.IsZero() && time.Since(p.headAt) < headTTL {
		return p.headN, nil
	}
	ctx, cancel := context.WithTimeout(ctx, headTimeout)
	defer cancel()
	ans, err := p.post(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`), "")
	if err != nil {
		return 0, err
	}
	var a rpcAnswer
	if ans.status != http.StatusOK || json.Unmarshal(ans.body, &a) != nil || len(a.Error) > 0 {
		return 0, fmt.Errorf("eth_blockNumber answered %d: %.200s", ans.status, ans.body)
	}
	var n hexutil.Uint64
	if err := json.Unmarshal(a.Result, &n); err != nil {
		return 0, fmt.Errorf("eth_blockNumber answered %s: %w", a.Result, err)
	}
	p.headN, p.headAt = uint64(n), time.Now()
	return p.headN, nil
}

// serveLagging answers calls as a node LagBlocks behind the node's head
// would: every call at the same head.
func (p *Proxy) serveLagging(w http.ResponseWriter, r *http.Request, calls []*rpcCall, batch bool, k uint64) {
	head, err := p.head(r.Context())
	if err != nil {
		p.count(CountUpstreamError)
		http.Error(w, "faultproxy: reading the node's head: "+err.Error(), http.StatusBadGateway)
		return
	}
	target := uint64(0)
	if head > k {
		target = head - k
	}
	plans := make([]lagPlan, len(calls))
	// The calls for the node, each with the id 2i (call i) or 2i+1 (call
	// i's aux), so that answers are matched whatever ids the client chose.
	var fwd []json.RawMessage
	for i, c := range calls {
		plans[i] = planLag(c, target)
		pl := plans[i]
		if pl.local != nil || pl.localErr != nil {
			continue
		}
		fields := make(map[string]json.RawMessage, len(c.fields))
		for k, v := range c.fields {
			fields[k] = v
		}
		fields["id"] = json.RawMessage(strconv.Itoa(2 * i))
		if pl.params != nil {
			ps, _ := json.Marshal(pl.params)
			fields["params"] = ps
		}
		raw, _ := json.Marshal(fields)
		fwd = append(fwd, raw)
		if pl.aux != nil {
			raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2*i + 1, "method": pl.aux.method, "params": pl.aux.params})
			fwd = append(fwd, raw)
		}
	}
	got := map[int]rpcAnswer{}
	if len(fwd) > 0 {
		body, _ := json.Marshal(fwd)
		ans, err := p.forward(r.Context(), body, "application/json")
		if err != nil {
			p.count(CountUpstreamError)
			http.Error(w, "faultproxy: the node did not answer: "+err.Error(), http.StatusBadGateway)
			return
		}
		var answers []rpcAnswer
		if ans.status != http.StatusOK || json.Unmarshal(ans.body, &answers) != nil {
			ans.write(w) // the node's own failure, as it is
			return
		}
		for _, a := range answers {
			if id, err := strconv.Atoi(string(a.ID)); err == nil {
				got[id] = a
			}
		}
	}
	out := make([]rpcAnswer, 0, len(calls))
	for i, c := range calls {
		if c.id == nil {
			continue
		}
		a := rpcAnswer{JSONRPC: "2.0", ID: c.id}
		pl := plans[i]
		switch up, ok := got[2*i]; {
		case pl.local != nil:
			a.Result = pl.local
		case pl.localErr != nil:
			a.Error = pl.localErr
		case !ok:
			a.Error = json.RawMessage(`{"code":-32603,"message":"faultproxy: the node's batch answer lacks this call"}`)
		case len(up.Error) > 0:
			a.Error = up.Error
		default:
			a.Result = cmpNull(up.Result)
			if pl.check != nil {
				aux := null
				if x, ok := got[2*i+1]; ok && len(x.Error) == 0 {
					aux = cmpNull(x.Result)
				}
				a.Result = pl.check(a.Result, aux)
			}
		}
		out = append(out, a)
	}
	w.Header().Set("Content-Type", "application/json")
	var body []byte
	if batch {
		body, _ = json.Marshal(out)
	} else if len(out) == 1 {
		body, _ = json.Marshal(out[0])
	}
	_, _ = w.Write(body)
}

// cmpNull is result, or null when the node sent none.
func cmpNull(result json.RawMessage) json.RawMessage {
	if len(result) == 0 {
		return null
	}
	return result
}
