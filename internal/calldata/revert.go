package calldata

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// What a revert's data, or an event, is decoded as. The data is a node's
// answer to a call the client chose, so it is read as hostile: its length
// is bounded before anything is decoded (MaxRevertBytes, MaxLogDataBytes)
// and a part that does not decode leaves the whole as raw hex with the
// problem, never a panic or an allocation the data's own length fields
// ask for.

// Revert kinds.
const (
	// RevertError: Error(string), what require and revert("…") answer.
	RevertError = "error"
	// RevertPanic: Panic(uint256), a failed assert or a checked runtime
	// failure (division by zero, an index out of bounds…).
	RevertPanic = "panic"
	// RevertCustom: a custom error of the task's ABI.
	RevertCustom = "custom"
	// RevertRaw: data that is none of these (a custom error without the
	// ABI that declares it, or data that does not decode), or no data.
	RevertRaw = "raw"
	// RevertUnavailable: the data could not be had (a transaction reverted
	// on chain and its replay failed or did not revert).
	RevertUnavailable = "unavailable"
)

// MaxRevertBytes is the most revert data decoded; longer data is shown raw,
// cut to it.
const MaxRevertBytes = 8 << 10

// The selectors of the two errors the Solidity compiler emits itself.
var (
	errorSelector = []byte{0x08, 0xc3, 0x79, 0xa0} // Error(string)
	panicSelector = []byte{0x4e, 0x48, 0x7b, 0x71} // Panic(uint256)
)

// panicMeanings are the Solidity compiler's panic codes
// (docs.soliditylang.org, "Panic via assert and Error via require").
var panicMeanings = map[uint64]string{
	0x00: "generic compiler-inserted panic",
	0x01: "assert(false): an assertion failed",
	0x11: "arithmetic overflow or underflow",
	0x12: "division or modulo by zero",
	0x21: "conversion to an invalid enum value",
	0x22: "incorrectly encoded storage byte array",
	0x31: "pop() on an empty array",
	0x32: "array index out of bounds",
	0x41: "too much memory allocated",
	0x51: "call to a zero-initialised internal function",
}

// Revert is a revert's data decoded, as the API shows it and the task
// stores it.
type Revert struct {
	Kind string `json:"kind"`
	// Message is Error(string)'s message.
	Message string `json:"message,omitempty"`
	// Code and Meaning are Panic(uint256)'s code, as hex, and what it means.
	Code    string `json:"code,omitempty"`
	Meaning string `json:"meaning,omitempty"`
	// Name, Signature and Args are a custom error's: Args is an object of
	// its arguments by name (by position, "arg0", for an unnamed one), in
	// Call.Args' form (integers as decimal strings, checksummed addresses,
	// bytes as hex).
	Name      string          `json:"name,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	// Selector is the data's first four bytes, as hex.
	Selector string `json:"selector,omitempty"`
	// Data is the revert data as hex ("0x" for none), cut to
	// MaxRevertBytes; Truncated says it was cut (here or by the ledger).
	Data      string `json:"data"`
	Truncated bool   `json:"truncated,omitempty"`
	// Problem says why data with a known selector is shown raw, or why the
	// revert is unavailable.
	Problem string `json:"problem,omitempty"`
}

// Reason is the revert in one line, for a task's error.
func (r Revert) Reason() string {
	switch r.Kind {
	case RevertError:
		return "execution reverted: " + r.Message
	case RevertPanic:
		return fmt.Sprintf("execution reverted: panic %s (%s)", r.Code, r.Meaning)
	case RevertCustom:
		return fmt.Sprintf("execution reverted: %s %s", r.Name, r.Args)
	case RevertUnavailable:
		return "execution reverted: reason unavailable: " + r.Problem
	}
	if r.Data == "0x" || r.Data == "" {
		return "execution reverted without data"
	}
	data := r.Data
	if len(data) > 200 {
		data = data[:200] + "…"
	}
	return "execution reverted with data " + data
}

// Unavailable is the revert of a transaction whose data could not be had.
func Unavailable(problem string) Revert {
	return Revert{Kind: RevertUnavailable, Data: "0x", Problem: problem}
}

// DecodeRevert decodes revert data: Error(string), Panic(uint256), a custom
// error declared in abiJSON (a JSON ABI; nil or unreadable: none), else raw.
// truncated says the ledger already cut the data.
func DecodeRevert(data []byte, truncated bool, abiJSON json.RawMessage) (r Revert) {
	if len(data) > MaxRevertBytes {
		data, truncated = data[:MaxRevertBytes], true
	}
	r = Revert{Kind: RevertRaw, Data: "0x" + hex.EncodeToString(data), Truncated: truncated}
	if len(data) < 4 {
		if len(data) > 0 {
			r.Problem = "shorter than a selector"
		}
		return r
	}
	r.Selector = "0x" + hex.EncodeToString(data[:4])
	defer func() {
		// accounts/abi checks every offset and length against the data;
		// should one slip through, the data is shown raw, not a panic.
		if p := recover(); p != nil {
			r = Revert{Kind: RevertRaw, Data: r.Data, Truncated: r.Truncated, Selector: r.Selector, Problem: fmt.Sprintf("does not decode: %v", p)}
		}
	}()
	switch {
	case bytes.Equal(data[:4], errorSelector):
		msg, err := unpackOne(abiString, data[4:])
		if err != nil {
			r.Problem = "Error(string) that does not decode: " + err.Error()
			return r
		}
		r.Kind, r.Message = RevertError, strings.ToValidUTF8(msg.(string), "\uFFFD")
	case bytes.Equal(data[:4], panicSelector):
		v, err := unpackOne(abiUint256, data[4:])
		if err != nil {
			r.Problem = "Panic(uint256) that does not decode: " + err.Error()
			return r
		}
		code := v.(*big.Int)
		r.Kind, r.Code = RevertPanic, "0x"+fmt.Sprintf("%02x", code)
		r.Meaning = "unknown panic code"
		if code.IsUint64() {
			if m, ok := panicMeanings[code.Uint64()]; ok {
				r.Meaning = m
			}
		}
	default:
		a, ok := readABI(abiJSON)
		if !ok {
			return r
		}
		for _, e := range a.Errors {
			if !bytes.Equal(e.ID[:4], data[:4]) {
				continue
			}
			values, err := e.Inputs.Unpack(data[4:])
			if err != nil {
				r.Problem = e.Sig + " that does not decode: " + err.Error()
				return r
			}
			args, err := namedJSON(e.Inputs, values)
			if err != nil {
				r.Problem = e.Sig + ": " + err.Error()
				return r
			}
			r.Kind, r.Name, r.Signature, r.Args = RevertCustom, e.Name, e.Sig, args
			return r
		}
	}
	return r
}

var (
	abiString, _  = abi.NewType("string", "", nil)
	abiUint256, _ = abi.NewType("uint256", "", nil)
)

// unpackOne decodes data as one value of type t.
func unpackOne(t abi.Type, data []byte) (any, error) {
	vs, err := abi.Arguments{{Type: t}}.Unpack(data)
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// readABI reads a stored ABI fragment; a missing or unreadable one is none
// (it was checked when the task was stored).
func readABI(raw json.RawMessage) (abi.ABI, bool) {
	if len(raw) == 0 || len(raw) > MaxABIBytes {
		return abi.ABI{}, false
	}
	a, err := abi.JSON(bytes.NewReader(raw))
	return a, err == nil
}

// namedJSON writes values, decoded from args, as one JSON object in args'
// order, each under its name (arg<i> for an unnamed one).
func namedJSON(args abi.Arguments, values []any) (json.RawMessage, error) {
	if len(values) != len(args) {
		return nil, fmt.Errorf("%d values for %d arguments", len(values), len(args))
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, a := range args {
		if i > 0 {
			b.WriteByte(',')
		}
		name := a.Name
		if name == "" {
			name = fmt.Sprintf("arg%d", i)
		}
		k, err := marshal(name)
		if err != nil {
			return nil, err
		}
		v, err := marshal(normalise(a.Type, reflect.ValueOf(values[i])))
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Bounds of the logs a task keeps.
const (
	// MaxLogs is the most logs a task keeps of its transaction's.
	MaxLogs = 64
	// MaxLogDataBytes is the most data a kept log keeps (cut past it).
	MaxLogDataBytes = 4 << 10
)

// Log is one event of a task's mined transaction, as the API shows it:
// raw, and decoded (Event) when the task's ABI declares it.
type Log struct {
	Index   uint     `json:"index"`
	Address string   `json:"address"`
	Topics  []string `json:"topics"`
	Data    string   `json:"data"`
	// Truncated: the data was cut to MaxLogDataBytes (and is not decoded).
	Truncated bool      `json:"truncated,omitempty"`
	Event     *LogEvent `json:"event,omitempty"`
}

// LogEvent is a log decoded by its event's declaration.
type LogEvent struct {
	Name      string          `json:"name"`
	Signature string          `json:"signature"`
	Args      json.RawMessage `json:"args"`
}

// Logs are a task's logs as stored: at most MaxLogs, and Truncated when the
// transaction emitted more.
type Logs struct {
	Logs      []Log `json:"logs"`
	Truncated bool  `json:"truncated,omitempty"`
	// Count is how many logs the transaction emitted.
	Count int `json:"count"`
}

// RawLog is a mined log as the ledger reads it.
type RawLog struct {
	Index   uint
	Address common.Address
	Topics  []common.Hash
	Data    []byte
}

// DecodeLogs keeps at most MaxLogs of a transaction's logs, each decoded
// with abiJSON when it declares the log's event (by its first topic, and
// the log's contract being the one called: to).
func DecodeLogs(logs []RawLog, to common.Address, abiJSON json.RawMessage) Logs {
	out := Logs{Count: len(logs), Logs: []Log{}}
	a, hasABI := readABI(abiJSON)
	for i, lg := range logs {
		if i == MaxLogs {
			out.Truncated = true
			break
		}
		l := Log{Index: lg.Index, Address: lg.Address.Hex(), Topics: make([]string, len(lg.Topics))}
		for j, t := range lg.Topics {
			l.Topics[j] = t.Hex()
		}
		data := lg.Data
		if len(data) > MaxLogDataBytes {
			data, l.Truncated = data[:MaxLogDataBytes], true
		}
		l.Data = "0x" + hex.EncodeToString(data)
		if hasABI && !l.Truncated && lg.Address == to {
			l.Event = decodeEvent(a, lg)
		}
		out.Logs = append(out.Logs, l)
	}
	return out
}

// decodeEvent decodes lg by the event of a whose id is its first topic;
// nil when none is, or it does not decode.
func decodeEvent(a abi.ABI, lg RawLog) (ev *LogEvent) {
	if len(lg.Topics) == 0 {
		return nil
	}
	defer func() {
		if recover() != nil {
			ev = nil
		}
	}()
	e, err := a.EventByID(lg.Topics[0])
	if err != nil || e.Anonymous {
		return nil
	}
	var indexed abi.Arguments
	for _, in := range e.Inputs {
		if in.Indexed {
			indexed = append(indexed, in)
		}
	}
	if len(indexed) != len(lg.Topics)-1 {
		return nil
	}
	byName := map[string]any{}
	if err := abi.ParseTopicsIntoMap(byName, indexed, lg.Topics[1:]); err != nil {
		return nil
	}
	plain, err := e.Inputs.NonIndexed().Unpack(lg.Data)
	if err != nil {
		return nil
	}
	values := make([]any, len(e.Inputs))
	p := 0
	for i, in := range e.Inputs {
		if in.Indexed {
			v, ok := byName[in.Name]
			if !ok {
				return nil
			}
			if isHashed(in.Type) {
				// A dynamic indexed value is its hash in the topic.
				h := v.(common.Hash)
				values[i] = h
				continue
			}
			values[i] = v
		} else {
			values[i] = plain[p]
			p++
		}
	}
	args, err := eventJSON(e.Inputs, values)
	if err != nil {
		return nil
	}
	return &LogEvent{Name: e.Name, Signature: e.Sig, Args: args}
}

// isHashed reports whether an indexed value of type t is stored as its hash.
func isHashed(t abi.Type) bool {
	switch t.T {
	case abi.StringTy, abi.BytesTy, abi.SliceTy, abi.ArrayTy, abi.TupleTy:
		return true
	}
	return false
}

// eventJSON is namedJSON for an event, whose hashed indexed values are
// shown as their hash.
func eventJSON(args abi.Arguments, values []any) (json.RawMessage, error) {
	plain := make(abi.Arguments, len(args))
	for i, a := range args {
		plain[i] = a
		if a.Indexed && isHashed(a.Type) {
			plain[i].Type, _ = abi.NewType("bytes32", "", nil)
			h := values[i].(common.Hash)
			values[i] = [32]byte(h)
		}
	}
	return namedJSON(plain, values)
}

// DecodeStoredLogs decodes, with abiJSON, the events of logs as a confirm
// stores them (DecodeLogs without an ABI, as JSON): a log emitted by the
// called contract (to), not truncated and not decoded yet. It returns
// stored itself when there is no ABI, nothing to decode, or stored is not
// readable.
func DecodeStoredLogs(stored json.RawMessage, to common.Address, abiJSON json.RawMessage) json.RawMessage {
	a, hasABI := readABI(abiJSON)
	if !hasABI {
		return stored
	}
	var ls Logs
	if json.Unmarshal(stored, &ls) != nil {
		return stored
	}
	decoded := false
	for i := range ls.Logs {
		l := &ls.Logs[i]
		if l.Event != nil || l.Truncated || !common.IsHexAddress(l.Address) || common.HexToAddress(l.Address) != to {
			continue
		}
		data, err := hexutil.Decode(l.Data)
		if err != nil {
			continue
		}
		raw := RawLog{Index: l.Index, Address: to, Topics: make([]common.Hash, len(l.Topics)), Data: data}
		for j, t := range l.Topics {
			raw.Topics[j] = common.HexToHash(t)
		}
		if l.Event = decodeEvent(a, raw); l.Event != nil {
			decoded = true
		}
	}
	if !decoded {
		return stored
	}
	out, err := json.Marshal(ls)
	if err != nil {
		return stored
	}
	return out
}
