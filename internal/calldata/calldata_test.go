package calldata_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/calldata"
	"github.com/ledgerq/ledgerq/internal/testcontracts"
)

const bob = "0x00000000000000000000000000000000000b0b01"

func pack(t *testing.T, c testcontracts.Contract, method string, args ...any) string {
	t.Helper()
	b, err := testcontracts.ABI(c).Pack(method, args...)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// A call by signature, by a whole ABI and by one ABI entry encodes as
// accounts/abi packs the contract's own ABI, whatever the spelling of its
// values, and keeps its arguments normalised.
func TestEncode_ACallByNameEncodesAsTheContractsABIPacks(t *testing.T) {
	t.Parallel()
	tokenABI := json.RawMessage(testcontracts.ABIJSON(testcontracts.TestToken))
	transferEntry := json.RawMessage(`{"type":"function","name":"transfer","stateMutability":"nonpayable",
		"inputs":[{"name":"to","type":"address"},{"name":"value","type":"uint256"}],"outputs":[{"name":"","type":"bool"}]}`)
	want := pack(t, testcontracts.TestToken, "transfer", common.HexToAddress(bob), big.NewInt(1000))
	wantArgs := `["` + common.HexToAddress(bob).Hex() + `","1000"]`
	for name, r := range map[string]calldata.Request{
		"signature, decimal string":    {Function: "transfer(address,uint256)", Args: json.RawMessage(`["` + bob + `","1000"]`)},
		"signature, hex":               {Function: "transfer(address,uint256)", Args: json.RawMessage(`["` + bob + `","0x3E8"]`)},
		"signature, JSON number":       {Function: "transfer(address,uint256)", Args: json.RawMessage(`["` + bob + `",1000]`)},
		"signature, spaces and uint":   {Function: " transfer( address, uint )", Args: json.RawMessage(`["` + bob + `","01000"]`)},
		"whole ABI":                    {ABI: tokenABI, Method: "transfer", Args: json.RawMessage(`["` + bob + `","1000"]`)},
		"whole ABI, method by its sig": {ABI: tokenABI, Method: "transfer(address,uint256)", Args: json.RawMessage(`["` + bob + `","1000"]`)},
		"one ABI entry":                {ABI: transferEntry, Method: "transfer", Args: json.RawMessage(`["` + common.HexToAddress(bob).Hex() + `","1000"]`)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := calldata.Encode(r)
			require.NoError(t, err)
			require.Equal(t, want, hex.EncodeToString(c.Data))
			require.Equal(t, "transfer(address,uint256)", c.Function)
			require.JSONEq(t, wantArgs, string(c.Args))
			if r.ABI != nil {
				require.Equal(t, r.Method, c.Method)
				require.True(t, strings.HasPrefix(string(c.ABI), "[{"), "the ABI is kept, as an array: %s", c.ABI)
				require.NotContains(t, string(c.ABI), "\n")
			} else {
				require.Empty(t, c.ABI)
			}
		})
	}
}

// Each ABI type reads its JSON values, and the normalised arguments say
// what was encoded.
func TestEncode_EachTypeReadsItsJSONValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		function, args string
		want           []any // packed by accounts/abi for the function's types
		normal         string
	}{
		{"f(uint8,int8,int8)", `[255, -128, "-0x80"]`, []any{uint8(255), int8(-128), int8(-128)}, `["255","-128","-128"]`},
		{"f(uint64,int256)", `["18446744073709551615", "-57896044618658097711785492504343953926634992332820282019728792003956564819968"]`,
			[]any{uint64(1<<64 - 1), new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 255))},
			`["18446744073709551615","-57896044618658097711785492504343953926634992332820282019728792003956564819968"]`},
		{"f(uint256)", `["0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"]`,
			[]any{new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))},
			`["115792089237316195423570985008687907853269984665640564039457584007913129639935"]`},
		{"f(uint64)", `[9007199254740991]`, nil, `["9007199254740991"]`},
		{"f(bool,bool,string)", `[true, false, "héllo \"x\""]`, []any{true, false, `héllo "x"`}, `[true,false,"héllo \"x\""]`},
		{"f(bytes,bytes4,bytes32)", `["0xDEADbeef", "0x01020304", "0x` + strings.Repeat("ab", 32) + `"]`,
			[]any{[]byte{0xde, 0xad, 0xbe, 0xef}, [4]byte{1, 2, 3, 4}, [32]byte(common.FromHex(strings.Repeat("ab", 32)))},
			`["0xdeadbeef","0x01020304","0x` + strings.Repeat("ab", 32) + `"]`},
		{"f(bytes)", `["0x"]`, []any{[]byte{}}, `["0x"]`},
		{"f(address[],uint16[2])", `[["` + bob + `"], [1, "2"]]`, []any{[]common.Address{common.HexToAddress(bob)}, [2]uint16{1, 2}},
			`[["` + common.HexToAddress(bob).Hex() + `"],["1","2"]]`},
		{"f(uint256[][])", `[[["1"],[],["2","3"]]]`, []any{[][]*big.Int{{big.NewInt(1)}, {}, {big.NewInt(2), big.NewInt(3)}}}, `[[["1"],[],["2","3"]]]`},
		{"f()", `[]`, nil, `[]`},
	} {
		t.Run(tc.function+" "+tc.args, func(t *testing.T) {
			c, err := calldata.Encode(calldata.Request{Function: tc.function, Args: json.RawMessage(tc.args)})
			require.NoError(t, err)
			require.JSONEq(t, tc.normal, string(c.Args))
			if tc.want != nil {
				m, err := calldata.Encode(calldata.Request{Function: tc.function, Args: c.Args})
				require.NoError(t, err)
				require.Equal(t, c.Data, m.Data, "the normalised arguments encode the same")
				packed := packed(t, tc.function, tc.want...)
				require.Equal(t, hex.EncodeToString(packed), hex.EncodeToString(c.Data))
			}
		})
	}
}

// packed encodes args for the signature with accounts/abi, through an ABI
// entry built by hand.
func packed(t *testing.T, sig string, args ...any) []byte {
	t.Helper()
	name, rest, _ := strings.Cut(sig, "(")
	var inputs []string
	for i, typ := range splitTop(strings.TrimSuffix(rest, ")")) {
		inputs = append(inputs, `{"name":"a`+string(rune('0'+i))+`","type":"`+typ+`"}`)
	}
	entry := `[{"type":"function","name":"` + name + `","inputs":[` + strings.Join(inputs, ",") + `]}]`
	a, err := abi.JSON(strings.NewReader(entry))
	require.NoError(t, err)
	b, err := a.Pack(name, args...)
	require.NoError(t, err)
	return b
}

// splitTop splits a list of elementary types at its commas.
func splitTop(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// Tuples, and arrays of them, are JSON arrays, or with an ABI objects keyed
// by their components' names; both encode as the contract's ABI packs them.
func TestEncode_TuplesAreArraysOrObjectsByName(t *testing.T) {
	t.Parallel()
	type item struct {
		Who    common.Address
		Amount *big.Int
	}
	want := pack(t, testcontracts.Reverter, "tally", []item{{common.HexToAddress(bob), big.NewInt(7)}, {common.Address{}, big.NewInt(8)}})
	zero := "0x0000000000000000000000000000000000000000"
	normal := `[[["` + common.HexToAddress(bob).Hex() + `","7"],["` + zero + `","8"]]]`
	reverter := json.RawMessage(testcontracts.ABIJSON(testcontracts.Reverter))
	for name, r := range map[string]calldata.Request{
		"signature":       {Function: "tally((address,uint256)[])", Args: json.RawMessage(`[[["` + bob + `", 7], ["` + zero + `", "8"]]]`)},
		"ABI, arrays":     {ABI: reverter, Method: "tally", Args: json.RawMessage(`[[["` + bob + `", 7], ["` + zero + `", "8"]]]`)},
		"ABI, by name":    {ABI: reverter, Method: "tally", Args: json.RawMessage(`[[{"who":"` + bob + `","amount":7}, {"amount":"8","who":"` + zero + `"}]]`)},
		"ABI, mixed sets": {ABI: reverter, Method: "tally", Args: json.RawMessage(`[[{"who":"` + bob + `","amount":7}, ["` + zero + `", "0x8"]]]`)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := calldata.Encode(r)
			require.NoError(t, err)
			require.Equal(t, want, hex.EncodeToString(c.Data))
			require.Equal(t, "tally((address,uint256)[])", c.Function)
			require.JSONEq(t, normal, string(c.Args))
		})
	}
}

// refusalCase is a request Encode refuses, and what its error says.
type refusalCase struct {
	name string
	r    calldata.Request
	want string
}

// refusalCases are requests Encode refuses: TestEncode_RefusalsNameTheArgument
// checks the API's words, TestEncode_SQLTwinAgreesOnEveryCase that SQL's
// send_tx refuses each for the same field.
func refusalCases() []refusalCase {
	reverter := json.RawMessage(testcontracts.ABIJSON(testcontracts.Reverter))
	overloaded := json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"uint256"}]},{"type":"function","name":"f","inputs":[{"name":"a","type":"address"}]}]`)
	deep := strings.Repeat("[", 9) + strings.Repeat("]", 9)
	many := "[[" + strings.TrimSuffix(strings.Repeat("1,", 1100), ",") + "]]"
	return []refusalCase{
		{"uint8 overflow", calldata.Request{Function: "f(address,uint8)", Args: json.RawMessage(`["` + bob + `", 300]`)}, "args[1]: 300 does not fit uint8"},
		{"uint8 overflow as a string", calldata.Request{Function: "f(uint8)", Args: json.RawMessage(`["256"]`)}, "args[0]: 256 does not fit uint8"},
		{"int8 underflow", calldata.Request{Function: "f(int8)", Args: json.RawMessage(`[-129]`)}, "args[0]: -129 does not fit int8"},
		{"int8 overflow", calldata.Request{Function: "f(int8)", Args: json.RawMessage(`["128"]`)}, "args[0]: 128 does not fit int8"},
		{"negative uint", calldata.Request{Function: "f(uint256)", Args: json.RawMessage(`["-1"]`)}, "args[0]: -1 does not fit uint256"},
		{"uint256 overflow", calldata.Request{Function: "f(uint256)", Args: json.RawMessage(`["0x1` + strings.Repeat("0", 64) + `"]`)}, "does not fit uint256"},
		{"a huge decimal", calldata.Request{Function: "f(uint256)", Args: json.RawMessage(`["` + strings.Repeat("9", 5000) + `"]`)}, "args[0]: 999"},
		{"fraction", calldata.Request{Function: "f(uint256)", Args: json.RawMessage(`[1.5]`)}, "args[0]: JSON number 1.5 is not a whole number"},
		{"exponent", calldata.Request{Function: "f(uint256)", Args: json.RawMessage(`[1e3]`)}, "args[0]: JSON number 1e3 is not a whole number"},
		{"beyond 2^53", calldata.Request{Function: "f(uint256)", Args: json.RawMessage(`[9007199254740992]`)}, "args[0]: JSON number 9007199254740992 is beyond 2^53-1"},
		{"not an integer", calldata.Request{Function: "f(uint256)", Args: json.RawMessage(`["12a"]`)}, `args[0]: "12a" is not an integer`},
		{"bool for an integer", calldata.Request{Function: "f(uint256)", Args: json.RawMessage(`[true]`)}, "args[0]: must be an integer for uint256"},
		{"string for a bool", calldata.Request{Function: "f(bool)", Args: json.RawMessage(`["true"]`)}, "args[0]: must be true or false for bool, got a string"},
		{"number for a string", calldata.Request{Function: "f(string)", Args: json.RawMessage(`[1]`)}, "args[0]: must be a JSON string for string, got the number 1"},
		{"short address", calldata.Request{Function: "f(address)", Args: json.RawMessage(`["0x1234"]`)}, "args[0]: must be an address"},
		{"address checksum", calldata.Request{Function: "f(address)", Args: json.RawMessage(`["0x00000000000000000000000000000000000b0B01"]`)}, "args[0]: mixed-case address with a wrong EIP-55 checksum"},
		{"bytes32 length", calldata.Request{Function: "f(bytes32)", Args: json.RawMessage(`["0x01020304"]`)}, "args[0]: bytes32 takes exactly 32 bytes, got 4"},
		{"odd hex", calldata.Request{Function: "f(bytes)", Args: json.RawMessage(`["0x123"]`)}, "args[0]: must be 0x and an even number of hex digits"},
		{"bytes without 0x", calldata.Request{Function: "f(bytes)", Args: json.RawMessage(`["1234"]`)}, "args[0]: must be 0x-prefixed hex"},
		{"fixed array length", calldata.Request{Function: "f(uint8[2])", Args: json.RawMessage(`[[1,2,3]]`)}, "args[0]: uint8[2] takes exactly 2 elements, got 3"},
		{"element of an array", calldata.Request{Function: "f(uint8[])", Args: json.RawMessage(`[[1,2,999]]`)}, "args[0][2]: 999 does not fit uint8"},
		{"tuple component", calldata.Request{Function: "f((uint256,address)[])", Args: json.RawMessage(`[[["1","0x12"]]]`)}, "args[0][0][1]: must be an address"},
		{"tuple size", calldata.Request{Function: "f((uint256,address))", Args: json.RawMessage(`[["1"]]`)}, "args[0]: tuple (uint256,address) has 2 components, got 1"},
		{"tuple object without abi", calldata.Request{Function: "f((uint256,address))", Args: json.RawMessage(`[{"a":1}]`)}, "args[0]: a tuple of a signature has no component names"},
		{"unknown component", calldata.Request{ABI: reverter, Method: "tally", Args: json.RawMessage(`[[{"who":"` + bob + `","amount":1,"memo":2}]]`)}, `args[0] (items)[0]: unknown component "memo"`},
		{"missing component", calldata.Request{ABI: reverter, Method: "tally", Args: json.RawMessage(`[[{"who":"` + bob + `"}]]`)}, `args[0] (items)[0]: missing component "amount"`},
		{"component by name", calldata.Request{ABI: reverter, Method: "tally", Args: json.RawMessage(`[[{"who":"` + bob + `","amount":-1}]]`)}, "args[0] (items)[0].amount: -1 does not fit uint256"},
		{"named argument", calldata.Request{ABI: reverter, Method: "quota", Args: json.RawMessage(`["1", "x"]`)}, `args[1] (have): "x" is not an integer`},
		{"too few", calldata.Request{Function: "transfer(address,uint256)", Args: json.RawMessage(`["` + bob + `"]`)}, "args: function transfer(address,uint256) takes 2 arguments, got 1"},
		{"none for two", calldata.Request{Function: "transfer(address,uint256)"}, "args: function transfer(address,uint256) takes 2 arguments, got 0"},
		{"args not an array", calldata.Request{Function: "f(uint256)", Args: json.RawMessage(`{"a":1}`)}, "args: must be an array"},
		{"repeated key", calldata.Request{ABI: reverter, Method: "tally", Args: json.RawMessage(`[[{"who":"` + bob + `","amount":1,"amount":2}]]`)}, `args: key "amount" given more than once`},
		{"too deep", calldata.Request{Function: "f(uint256)", Args: json.RawMessage(deep)}, "args: nested deeper than 8"},
		{"too many", calldata.Request{Function: "f(uint8[])", Args: json.RawMessage(many)}, "args: more than 1024 values"},
		{"many in a slice of fixed arrays", calldata.Request{Function: "f(uint8[1000][])", Args: json.RawMessage(`[[[],[]]]`)}, "args[0]: more than 1024 values"},
		{"malformed args", calldata.Request{Function: "f(uint256)", Args: json.RawMessage(`[1,`)}, "args: malformed JSON"},
		{"no parentheses", calldata.Request{Function: "transfer"}, "function: must be a name and its argument types"},
		{"unclosed", calldata.Request{Function: "f((uint256)"}, "function:"},
		{"trailing", calldata.Request{Function: "f(uint256)x"}, "function: must be a name"},
		{"bad type", calldata.Request{Function: "f(uint7)"}, "function: unsupported type uint7"},
		{"bad type address5", calldata.Request{Function: "f(address5)"}, "function: unsupported type address5"},
		{"fixed point", calldata.Request{Function: "f(fixed128x18)"}, "function:"},
		{"huge array type", calldata.Request{Function: "f(uint256[3000000000000000000])"}, "function:"},
		{"big array type", calldata.Request{Function: "f(uint256[2000])"}, "function: type uint256[2000] holds more than 1024 values"},
		{"big nested array type", calldata.Request{Function: "f(uint256[100][100][100])"}, "holds more than 1024 values"},
		{"deep tuples", calldata.Request{Function: "f(" + strings.Repeat("(", 9) + "uint256" + strings.Repeat(")", 9) + ")"}, "function: tuples nest deeper than 8"},
		{"long signature", calldata.Request{Function: "f(" + strings.Repeat("uint256,", 200) + "uint256)"}, "function: longer than 1024"},
		{"nothing", calldata.Request{Args: json.RawMessage(`[]`)}, "function: required"},
		{"both", calldata.Request{Function: "f()", ABI: reverter, Method: "succeed"}, "function: give function, or abi and method, not both"},
		{"method without abi", calldata.Request{Method: "succeed"}, "abi: required with method"},
		{"abi without method", calldata.Request{ABI: reverter}, "method: required with abi"},
		{"unknown method", calldata.Request{ABI: reverter, Method: "transfer"}, `method: the abi has no function "transfer" (it has arm(bool), armed(), assertOk(bool),`},
		{"overloaded", calldata.Request{ABI: overloaded, Method: "f"}, `method: "f" is overloaded in the abi: name it by its signature, one of f(address), f(uint256)`},
		{"abi not an ABI", calldata.Request{ABI: json.RawMessage(`"x"`), Method: "f"}, "abi: must be an ABI entry"},
		{"abi bad type", calldata.Request{ABI: json.RawMessage(`{"type":"function","name":"f","inputs":[{"name":"a","type":"uint7"}]}`), Method: "f"}, "abi: function f(uint7): unsupported type uint7"},
		{"abi malformed", calldata.Request{ABI: json.RawMessage(`[{"type":"function"`), Method: "f"}, "abi: malformed JSON"},
		{"abi too large", calldata.Request{ABI: json.RawMessage(`[` + strings.Repeat(" ", calldata.MaxABIBytes) + `]`), Method: "f"}, "abi: larger than 131072 bytes"},
		{"components alike camel-cased", calldata.Request{ABI: json.RawMessage(`{"type":"function","name":"f","inputs":[{"name":"p","type":"tuple","components":[{"name":"a_b","type":"uint8"},{"name":"aB","type":"uint8"}]}]}`), Method: "f", Args: json.RawMessage(`[[1,2]]`)},
			`abi: function f((uint8,uint8)): tuple (uint8,uint8): components "a_b" and "aB" are one name to the encoder (AB)`},
		{"abi repeated key", calldata.Request{ABI: json.RawMessage(`{"type":"function","name":"f","name":"g","inputs":[]}`), Method: "g"}, `abi: key "name" given more than once`},
	}
}

// Every refusal is a *calldata.Error that names the field or argument at
// fault, and says why.
func TestEncode_RefusalsNameTheArgument(t *testing.T) {
	t.Parallel()
	for _, tc := range refusalCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := calldata.Encode(tc.r)
			var ce *calldata.Error
			require.True(t, errors.As(err, &ce), "a *calldata.Error: %v", err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// The overloaded name is reached by its signature.
func TestEncode_AnOverloadedMethodIsNamedByItsSignature(t *testing.T) {
	t.Parallel()
	overloaded := json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"uint256"}]},{"type":"function","name":"f","inputs":[{"name":"a","type":"address"}]}]`)
	c, err := calldata.Encode(calldata.Request{ABI: overloaded, Method: "f(address)", Args: json.RawMessage(`["` + bob + `"]`)})
	require.NoError(t, err)
	require.Equal(t, "f(address)", c.Function)
	require.Len(t, c.Data, 4+32)
}

// Hostile shapes are refused quickly and without panics: random bytes as
// a signature, and deep or wide arguments.
func FuzzEncode_Signature(f *testing.F) {
	for _, s := range []string{"f()", "transfer(address,uint256)", "f((uint256,address)[])", "f((", "f(()", "f(uint256[", "(", "f)(", "f(,)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sig string) {
		_, err := calldata.Encode(calldata.Request{Function: sig, Args: json.RawMessage(`[]`)})
		if err == nil {
			return
		}
		var ce *calldata.Error
		require.True(t, errors.As(err, &ce), "%q: %v", sig, err)
	})
}
