package calldata_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/calldata"
	"github.com/ledgerq/ledgerq/internal/testcontracts"
)

// revertData is an error's selector (by its signature) with args packed.
func revertData(t *testing.T, sig string, args ...any) []byte {
	t.Helper()
	m, err := abi.ParseSelector(sig)
	require.NoError(t, err)
	var in abi.Arguments
	for _, a := range m.Inputs {
		ty, err := abi.NewType(a.Type, "", a.Components)
		require.NoError(t, err)
		in = append(in, abi.Argument{Type: ty})
	}
	packed, err := in.Pack(args...)
	require.NoError(t, err)
	return append(crypto.Keccak256([]byte(sig))[:4], packed...)
}

func TestDecodeRevert_ErrorStringIsItsMessage(t *testing.T) {
	t.Parallel()
	r := calldata.DecodeRevert(revertData(t, "Error(string)", "nope"), false, nil)
	require.Equal(t, calldata.RevertError, r.Kind)
	require.Equal(t, "nope", r.Message)
	require.Equal(t, "0x08c379a0", r.Selector)
	require.Equal(t, "execution reverted: nope", r.Reason())
}

func TestDecodeRevert_EveryPanicCodeHasItsMeaning(t *testing.T) {
	t.Parallel()
	want := map[int64]string{
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
		0x99: "unknown panic code",
	}
	for code, meaning := range want {
		r := calldata.DecodeRevert(revertData(t, "Panic(uint256)", big.NewInt(code)), false, nil)
		require.Equal(t, calldata.RevertPanic, r.Kind, "code %#x", code)
		require.Equal(t, fmt.Sprintf("0x%02x", code), r.Code)
		require.Equal(t, meaning, r.Meaning, "code %#x", code)
	}
	huge := new(big.Int).Lsh(big.NewInt(1), 255)
	r := calldata.DecodeRevert(revertData(t, "Panic(uint256)", huge), false, nil)
	require.Equal(t, "unknown panic code", r.Meaning)
	require.Equal(t, "0x"+huge.Text(16), r.Code)
}

func TestDecodeRevert_ACustomErrorIsDecodedByTheTasksABIAndRawWithoutIt(t *testing.T) {
	t.Parallel()
	who := common.HexToAddress("0x00000000000000000000000000000000000b0b01")
	data := revertData(t, "QuotaExceeded(address,uint256,uint256)", who, big.NewInt(5), big.NewInt(3))

	r := calldata.DecodeRevert(data, false, testcontracts.ABIJSON(testcontracts.Reverter))
	require.Equal(t, calldata.RevertCustom, r.Kind)
	require.Equal(t, "QuotaExceeded", r.Name)
	require.Equal(t, "QuotaExceeded(address,uint256,uint256)", r.Signature)
	require.JSONEq(t, `{"who":"`+who.Hex()+`","need":"5","have":"3"}`, string(r.Args))

	raw := calldata.DecodeRevert(data, false, nil)
	require.Equal(t, calldata.RevertRaw, raw.Kind)
	require.Equal(t, "0x"+hex.EncodeToString(data[:4]), raw.Selector)
	require.Equal(t, "0x"+hex.EncodeToString(data), raw.Data)
	require.Empty(t, raw.Problem)
}

// Hostile revert data: truncated, a length or offset far past the data,
// garbage, nothing. Each is raw with its problem; none panics, and a
// length of 2^255 allocates nothing.
func TestDecodeRevert_HostileDataIsRawWithItsProblem(t *testing.T) {
	t.Parallel()
	word := func(v *big.Int) []byte { return common.LeftPadBytes(v.Bytes(), 32) }
	errSel, panicSel := common.FromHex("0x08c379a0"), common.FromHex("0x4e487b71")
	huge := new(big.Int).Lsh(big.NewInt(1), 255)
	cases := map[string][]byte{
		"empty":                nil,
		"short":                {0x08, 0xc3},
		"error truncated":      revertData(t, "Error(string)", "nope")[:40],
		"error huge length":    append(append(append([]byte{}, errSel...), word(big.NewInt(32))...), word(huge)...),
		"error huge offset":    append(append([]byte{}, errSel...), word(huge)...),
		"panic truncated":      append(append([]byte{}, panicSel...), 1, 2, 3),
		"garbage with a known": append(append([]byte{}, errSel...), []byte(strings.Repeat("\xff", 100))...),
	}
	for name, data := range cases {
		r := calldata.DecodeRevert(data, false, testcontracts.ABIJSON(testcontracts.Reverter))
		require.Equal(t, calldata.RevertRaw, r.Kind, name)
		require.Equal(t, "0x"+hex.EncodeToString(data), r.Data, name)
		if len(data) > 0 {
			require.NotEmpty(t, r.Problem, name)
		}
	}
	long := make([]byte, calldata.MaxRevertBytes+100)
	r := calldata.DecodeRevert(long, false, nil)
	require.True(t, r.Truncated)
	require.Len(t, r.Data, 2+2*calldata.MaxRevertBytes)
	require.Equal(t, "execution reverted without data", calldata.DecodeRevert(nil, false, nil).Reason())
}

func TestDecodeLogs_AnEventOfTheABIIsDecodedAndOthersRaw(t *testing.T) {
	t.Parallel()
	a := testcontracts.ABI(testcontracts.Reverter)
	contract := common.HexToAddress("0x00000000000000000000000000000000000c0ffe")
	caller := common.HexToAddress("0x00000000000000000000000000000000000b0b01")
	done := a.Events["Done"]
	data, err := done.Inputs.NonIndexed().Pack("x")
	require.NoError(t, err)
	lg := calldata.RawLog{Index: 3, Address: contract, Data: data,
		Topics: []common.Hash{done.ID, common.BytesToHash(caller.Bytes()), common.BigToHash(big.NewInt(7))}}

	got := calldata.DecodeLogs([]calldata.RawLog{lg}, contract, testcontracts.ABIJSON(testcontracts.Reverter))
	require.Equal(t, 1, got.Count)
	require.NotNil(t, got.Logs[0].Event)
	require.Equal(t, "Done", got.Logs[0].Event.Name)
	require.JSONEq(t, `{"caller":"`+caller.Hex()+`","counter":"7","note":"x"}`, string(got.Logs[0].Event.Args))

	raw := calldata.DecodeLogs([]calldata.RawLog{lg}, contract, nil)
	require.Nil(t, raw.Logs[0].Event)
	require.Equal(t, "0x"+hex.EncodeToString(data), raw.Logs[0].Data)
	require.Equal(t, done.ID.Hex(), raw.Logs[0].Topics[0])

	// A log of another contract is not decoded by the called one's ABI;
	// more than MaxLogs are cut.
	many := make([]calldata.RawLog, calldata.MaxLogs+1)
	for i := range many {
		many[i] = calldata.RawLog{Index: uint(i), Address: common.Address{1}, Topics: lg.Topics, Data: data}
	}
	cut := calldata.DecodeLogs(many, contract, testcontracts.ABIJSON(testcontracts.Reverter))
	require.True(t, cut.Truncated)
	require.Len(t, cut.Logs, calldata.MaxLogs)
	require.Equal(t, calldata.MaxLogs+1, cut.Count)
	require.Nil(t, cut.Logs[0].Event)
}

// A confirm stores logs as the ledger read them (DecodeLogs without an
// ABI); read with the task's ABI they are what DecodeLogs with it gives: the
// called contract's event decoded, another contract's log, a cut one and
// the bounds as stored.
func TestDecodeStoredLogs_StoredLogsAreDecodedByTheABIWhenRead(t *testing.T) {
	t.Parallel()
	abiJSON := testcontracts.ABIJSON(testcontracts.Reverter)
	done := testcontracts.ABI(testcontracts.Reverter).Events["Done"]
	contract := common.HexToAddress("0x00000000000000000000000000000000000c0ffe")
	caller := common.HexToAddress("0x00000000000000000000000000000000000b0b01")
	data, err := done.Inputs.NonIndexed().Pack("x")
	require.NoError(t, err)
	topics := []common.Hash{done.ID, common.BytesToHash(caller.Bytes()), common.BigToHash(big.NewInt(7))}
	logs := []calldata.RawLog{
		{Index: 1, Address: contract, Topics: topics, Data: data},
		{Index: 2, Address: common.Address{1}, Topics: topics, Data: data},
		{Index: 3, Address: contract, Topics: topics, Data: make([]byte, calldata.MaxLogDataBytes+1)},
	}
	stored, err := json.Marshal(calldata.DecodeLogs(logs, contract, nil))
	require.NoError(t, err)
	want, err := json.Marshal(calldata.DecodeLogs(logs, contract, abiJSON))
	require.NoError(t, err)

	got := calldata.DecodeStoredLogs(stored, contract, abiJSON)
	require.JSONEq(t, string(want), string(got))
	require.Contains(t, string(got), `"name":"Done"`)
	require.Equal(t, string(stored), string(calldata.DecodeStoredLogs(stored, contract, nil)), "no ABI: as stored")
	require.Equal(t, string(stored), string(calldata.DecodeStoredLogs(stored, common.Address{2}, abiJSON)), "another contract called: as stored")
	require.Equal(t, "not json", string(calldata.DecodeStoredLogs(json.RawMessage("not json"), contract, abiJSON)))
}
