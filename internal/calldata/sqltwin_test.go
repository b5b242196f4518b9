package calldata_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/calldata"
	"github.com/ledgerq/ledgerq/internal/testcontracts"
	"github.com/ledgerq/ledgerq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// outcome is what one encoder made of a request: the call, or the refusal.
type outcome struct {
	Data, Function, ABI, Args string
	Field, Problem            string
}

func (o outcome) String() string {
	if o.Field != "" {
		return fmt.Sprintf("refused: field %s: %s", o.Field, o.Problem)
	}
	return fmt.Sprintf("accepted: %s %s abi=%s data=%s", o.Function, o.Args, o.ABI, o.Data)
}

// goOutcome is the API's encoding (calldata.Encode).
func goOutcome(t *testing.T, r calldata.Request) outcome {
	t.Helper()
	// POST send-tx's body decodes "args": null and "abi": null as absent
	// (a nil *json.RawMessage), as send_tx reads a json null.
	if string(r.Args) == "null" {
		r.Args = nil
	}
	if string(r.ABI) == "null" {
		r.ABI = nil
	}
	c, err := calldata.Encode(r)
	var ce *calldata.Error
	switch {
	case errors.As(err, &ce):
		return outcome{Field: ce.Field, Problem: ce.Problem}
	case err != nil:
		t.Fatalf("Encode: not a refusal: %v", err)
	}
	return outcome{Data: hex.EncodeToString(c.Data), Function: c.Function, ABI: string(c.ABI), Args: string(c.Args)}
}

// sqlOutcome is send_tx's encoding (ledgerq.abi_call, migration 00042), run
// as send_tx runs it: the ABI and the arguments as the json the caller
// passes, NULL when the request has none.
func sqlOutcome(t *testing.T, conn *pgx.Conn, r calldata.Request) outcome {
	t.Helper()
	var (
		data                  []byte
		function, abi, normal *string
	)
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := conn.QueryRow(ctx, `SELECT x.data, x.call ->> 'function', x.abi_compact, x.args_normal
		FROM ledgerq.abi_call($1::text, $2::json, $3::text, $4::json) AS x`,
		nullable(r.Function), nullable(string(r.ABI)), nullable(r.Method), nullable(string(r.Args))).Scan(&data, &function, &abi, &normal)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "22023" && strings.HasPrefix(pgErr.Message, "field "):
		field, problem, _ := strings.Cut(strings.TrimPrefix(pgErr.Message, "field "), ": ")
		return outcome{Field: field, Problem: problem}
	case errors.As(err, &pgErr) && pgErr.Code == "22P02":
		// The caller's json does not parse: PostgreSQL refuses it before
		// send_tx runs, naming no field.
		return outcome{Field: "(json)", Problem: pgErr.Message}
	case err != nil:
		t.Fatalf("abi_call: %v", err)
	}
	return outcome{Data: hex.EncodeToString(data), Function: *function, ABI: deref(abi), Args: *normal}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// parserWords are the fields whose refusals go-ethereum's parser words in
// the API (its selector parser, abi.JSON, NewType): SQL must refuse for the
// same field, in words of its own. Every other refusal's words are the
// API's own, and SQL's must be the same.
func parserWords(field, problem string) bool {
	switch field {
	case "function", "method":
		return strings.HasPrefix(problem, "failed to parse") || strings.HasPrefix(problem, "unreadable") ||
			strings.HasPrefix(problem, "unsupported arg type") || strings.HasPrefix(problem, "invalid ") ||
			strings.HasPrefix(problem, "abi: ")
	case "abi":
		return strings.HasPrefix(problem, "not a valid ABI") || strings.HasPrefix(problem, "malformed JSON")
	}
	return false
}

// twinCases are requests beyond refusalCases: calls that must encode the
// same on both sides, and the parser's corners.
func twinCases() []refusalCase {
	token := json.RawMessage(testcontracts.ABIJSON(testcontracts.TestToken))
	reverter := json.RawMessage(testcontracts.ABIJSON(testcontracts.Reverter))
	fn := func(sig, args string) calldata.Request {
		return calldata.Request{Function: sig, Args: json.RawMessage(args)}
	}
	abiCall := func(a json.RawMessage, method, args string) calldata.Request {
		return calldata.Request{ABI: a, Method: method, Args: json.RawMessage(args)}
	}
	max256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)).String()
	cases := []calldata.Request{
		fn("transfer(address,uint256)", `["`+bob+`","1000"]`),
		fn("transfer(address,uint256)", `["`+bob+`","0x3E8"]`),
		fn(" transfer( address, uint )", `["`+bob+`","01000"]`),
		fn("f(uint8,int8,int8)", `[255, -128, "-0x80"]`),
		fn("f(int256,int256)", `["-57896044618658097711785492504343953926634992332820282019728792003956564819968", "-1"]`),
		fn("f(uint256)", `["`+max256+`"]`),
		fn("f(uint256)", `["0x`+strings.Repeat("0", 100)+`1"]`),
		fn("f(int16)", `[-0]`),
		fn("f(uint64)", `[9007199254740991]`),
		fn("f(uint64)", `[-9007199254740991]`),
		fn("f(bool,bool,string)", `[true, false, "héllo \"x\" \\ \n\t\u0001 \u2028 <&> 日本"]`),
		fn("f(string)", `[""]`),
		fn("f(string)", `["`+strings.Repeat("x", 33)+`"]`),
		fn("f(bytes,bytes4,bytes32)", `["0xDEADbeef", "0x01020304", "0x`+strings.Repeat("ab", 32)+`"]`),
		fn("f(bytes)", `["0x"]`),
		fn("f(bytes)", `["0x`+strings.Repeat("cd", 64)+`"]`),
		fn("f(function)", `["0x`+strings.Repeat("11", 24)+`"]`),
		fn("f(address[],uint16[2])", `[["`+bob+`"], [1, "2"]]`),
		fn("f(uint256[][])", `[[["1"],[],["2","3"]]]`),
		fn("f(string[],bytes[2])", `[["a","bc"],["0x01","0x"]]`),
		fn("f()", `[]`),
		fn("f()", ``),
		fn("f()", `null`),
		fn("f((uint256,string),(bool)[])", `[["7","x"],[[true],[false]]]`),
		fn("f(((uint8,bytes)[],address))", `[[[["1","0x02"]],"`+bob+`"]]`),
		fn("f(uint256;address)", `["1","`+bob+`"]`),
		fn("f(uint256[01])", `[["1"]]`),
		fn("f(uint[],int)", `[["1"],"-1"]`),
		fn("$f_1(bool)", `[true]`),
		fn("f(uint08)", `[1]`),
		fn("f(bytes0)", `["0x"]`),
		fn("f(bytes33)", `["0x"]`),
		fn("f(bool8)", `[true]`),
		fn("f((uint256)[2])", `[]`),
		fn("f(())", `[]`),
		fn("f(uint256,)", `[]`),
		fn("f(uint256", `[]`),
		fn("f(uint256[)", `[]`),
		fn("f(uint256[2x])", `[]`),
		fn("f(UINT256)", `[1]`),
		fn("f(uint256[0])", `[[]]`),
		fn("f(int)", `["-5"]`),
		fn("1f(uint256)", `[1]`),
		fn("f(uint256)", `[1,]`),
		fn("f(uint256)", `{}`),
		fn("f(address)", `["0X00000000000000000000000000000000000b0b01"]`),
		fn("f(address)", `["`+strings.ToUpper(bob[2:])+`"]`),
		fn("f(address)", `["0x`+strings.ToUpper(bob[2:])+`"]`),
		fn("f(address)", `[null]`),
		fn("f(uint256)", `[null]`),
		fn("f(uint256)", `[[1]]`),
		fn("f(uint256)", `[{"a":1}]`),
		fn("f(uint256)", `["-"]`),
		fn("f(uint256)", `["0x"]`),
		fn("f(int256)", `["-0x"]`),
		fn("f(uint256)", `["+5"]`),
		fn("f(uint256)", `[" 5"]`),
		fn("f(bytes4)", `["0x0102030405"]`),
		fn("f(bytes)", `["0xzz"]`),
		fn("f(string)", `[null]`),
		fn("f(bool)", `[1]`),
		fn("f(uint8[])", `[[1,"x"]]`),
		fn("f(uint8[2])", `["12"]`),
		fn("f((uint8,uint8))", `["12"]`),
		fn("f((uint8,uint8))", `[[1,2,3]]`),
		abiCall(token, "transfer", `["`+bob+`","1000"]`),
		abiCall(token, "transfer(address,uint256)", `["`+bob+`","1000"]`),
		abiCall(token, "approve", `["`+bob+`",1]`),
		abiCall(reverter, "tally", `[[{"who":"`+bob+`","amount":7},["`+bob+`","0x8"]]]`),
		abiCall(reverter, "quota", `["1","2"]`),
		abiCall(reverter, "quota", `["1"]`),
		abiCall(reverter, "nosuch", `[]`),
		abiCall(reverter, "tally(address)", `[]`),
		abiCall(reverter, "tally(", `[]`),
		abiCall(json.RawMessage(`  {"type":"function","name":"f","inputs":[{"name":"a","type":"uint256"}]}  `), "f", `["1"]`),
		abiCall(json.RawMessage(`[{"Type":"function","NAME":"f","Inputs":[{"Name":"a","TYPE":"uint8"}]}]`), "f", `["1"]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f"}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":null,"outputs":null}]`), "f", `[]`),
		abiCall(json.RawMessage(`[]`), "f", `[]`),
		abiCall(json.RawMessage(`[{}]`), "f", `[]`),
		abiCall(json.RawMessage(`[null]`), "f", `[]`),
		abiCall(json.RawMessage(`[1]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":5}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":{}}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","constant":"yes"}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"uint256","indexed":"x"}]}]`), "f", `["1"]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[1]}]`), "f", `["1"]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[null]}]`), "f", `["1"]`),
		abiCall(json.RawMessage(`[{"type":"constructor","inputs":[]},{"type":"function","name":"f","inputs":[]}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"receive","stateMutability":"payable"},{"type":"fallback"},{"type":"function","name":"f"}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"receive","stateMutability":"nonpayable"},{"type":"function","name":"f"}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"fallback"},{"type":"fallback"},{"type":"function","name":"f"}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"event","name":"E","inputs":[{"name":"a","type":"uint7","indexed":true}]},{"type":"function","name":"f"}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"event","name":"E","inputs":[{"name":"a","type":"uint","indexed":true}]},{"type":"function","name":"f"}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"error","name":"E","inputs":[{"name":"a","type":"fixed128x18"}]},{"type":"function","name":"f"}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"g","outputs":[{"type":"nonsense"}]},{"type":"function","name":"f"}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"Foo","internalType":"contract Foo"}]}]`), "f", `["`+bob+`"]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"tuple","components":[{"name":"","type":"uint8"}]}]}]`), "f", `[["1"]]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"tuple","components":[{"name":"a-b","type":"uint8"}]}]}]`), "f", `[["1"]]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"tuple","components":[{"name":"x","type":"uint8"},{"name":"X","type":"uint8"}]}]}]`), "f", `[{"x":1,"X":2}]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"tuple","components":[{"name":"_x","type":"uint8"},{"name":"y_z","type":"bool"}]}]}]`), "f", `[{"y_z":true,"_x":3}]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"tuple[2]","components":[{"name":"x","type":"uint8"}]}]}]`), "f", `[[[1],{"x":2}]]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"tuple","components":[{"name":"x","type":"uint8"}]}]}]`), "f", `[{"x":1,"y":2}]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"tuple","components":{}}]}]`), "f", `[[]]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"uint256[2a]"}]}]`), "f", `[["1","2"]]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"uint256]["}]}]`), "f", `[["1"]]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[{"name":"a","type":"uint256[1][2][3]"}]}]`), "f", `[[[["1"],["2"]],[["3"],["4"]],[["5"],["6"]]]]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[]},{"type":"function","name":"f","inputs":[]}]`), "f", `[]`),
		abiCall(json.RawMessage(`[{"type":"function","name":"f","inputs":[]},{"type":"function","name":"f","inputs":[]}]`), "f()", `[]`),
		abiCall(json.RawMessage(`{"type":"function","name":"f","inputs":[{"name":"s","type":"string"}]}`), "f", `["<tag> & \u2029"]`),
		abiCall(json.RawMessage("[\n\t{ \"type\" : \"function\", \"name\": \"f x\" ,\"inputs\": [] }\r\n]"), "f x", `[]`),
		{ABI: json.RawMessage(`[{"type":"function","name":"f"}]`), Method: "f", Args: json.RawMessage(`[]`), Function: ""},
		{ABI: json.RawMessage(`null`), Method: "f"},
		{Function: "f()", Method: ""},
		{Method: "f(", ABI: json.RawMessage(`[{"type":"function","name":"f"}]`)},
		{Method: "f(", ABI: json.RawMessage(`[{"type":"nonsense"}]`)},
	}
	out := make([]refusalCase, len(cases))
	for i, r := range cases {
		out[i] = refusalCase{name: fmt.Sprintf("twin %d %s%s", i, r.Function, r.Method), r: r}
	}
	return out
}

// send_tx's contract-call form (SQL) and POST send-tx's (calldata.Encode)
// must be one product: on every case, both encode the same call data, the
// same canonical function, ABI and normal arguments (which the request
// fingerprint hashes), or both refuse for the same field, in the same
// words where the words are the API's own. The cases are Encode's refusal
// table, a table of calls and the parser's corners, and random types with
// random (mostly fitting) values.
func TestEncode_SQLTwinAgreesOnEveryCase(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	conn, err := pgx.Connect(t.Context(), db.URL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	cases := append(refusalCases(), twinCases()...)
	cases = append(cases, randomCases(rand.New(rand.NewPCG(42, 7)), 300)...)
	accepted, refused := 0, 0
	for _, tc := range cases {
		want := goOutcome(t, tc.r)
		got := sqlOutcome(t, conn, tc.r)
		if want.Field == "" {
			accepted++
			require.Equal(t, want, got, "%s: %+v", tc.name, tc.r)
			continue
		}
		refused++
		if got.Field == "(json)" {
			// Only a request whose arguments or ABI are not JSON at all
			// fails before send_tx runs.
			require.False(t, json.Valid(tc.r.Args) && (tc.r.ABI == nil || json.Valid(tc.r.ABI)), "%s: %s", tc.name, got.Problem)
			continue
		}
		require.Equal(t, want.Field, got.Field, "%s: %+v\nAPI: %s\nSQL: %s", tc.name, tc.r, want, got)
		if !parserWords(want.Field, want.Problem) {
			require.Equal(t, want.Problem, got.Problem, "%s: %+v", tc.name, tc.r)
		}
	}
	t.Logf("%d cases: %d encoded alike, %d refused alike", len(cases), accepted, refused)
	require.Greater(t, accepted, 150)
	require.Greater(t, refused, 150)
}

// genType is a random ABI type: an elementary base or a tuple, with array
// dimensions (-1: a slice), innermost first as Solidity writes them.
type genType struct {
	base  string
	comps []genType
	names []string
	dims  []int
}

func (g genType) sig() string {
	s := g.base
	if g.comps != nil {
		parts := make([]string, len(g.comps))
		for i, c := range g.comps {
			parts[i] = c.sig()
		}
		s = "(" + strings.Join(parts, ",") + ")"
	}
	return s + g.suffix()
}

func (g genType) suffix() string {
	s := ""
	for _, d := range g.dims {
		if d < 0 {
			s += "[]"
		} else {
			s += fmt.Sprintf("[%d]", d)
		}
	}
	return s
}

// abiArg is g as an ABI argument named name.
func (g genType) abiArg(name string) string {
	if g.comps == nil {
		return fmt.Sprintf(`{"name":%q,"type":%q}`, name, g.sig())
	}
	parts := make([]string, len(g.comps))
	for i, c := range g.comps {
		parts[i] = c.abiArg(g.names[i])
	}
	return fmt.Sprintf(`{"name":%q,"type":"tuple%s","components":[%s]}`, name, g.suffix(), strings.Join(parts, ","))
}

var elementaries = []string{"uint8", "uint16", "uint24", "uint64", "uint160", "uint256", "int8", "int32", "int128", "int256",
	"bool", "address", "string", "bytes", "bytes1", "bytes4", "bytes20", "bytes32"}

// randomType makes a type; forSignature keeps to what a signature can
// write (a tuple array is "[]" only, one level).
func randomType(rng *rand.Rand, depth int, forSignature bool) genType {
	var g genType
	if depth < 3 && rng.IntN(4) == 0 {
		n := 1 + rng.IntN(3)
		for i := range n {
			g.comps = append(g.comps, randomType(rng, depth+1, forSignature))
			g.names = append(g.names, fmt.Sprintf("c%d", i))
		}
		if rng.IntN(3) == 0 {
			if forSignature {
				g.dims = []int{-1}
			} else {
				g.dims = []int{[]int{-1, 1, 2}[rng.IntN(3)]}
			}
		}
		return g
	}
	g.base = elementaries[rng.IntN(len(elementaries))]
	for range rng.IntN(3) {
		if rng.IntN(4) == 0 {
			break
		}
		g.dims = append(g.dims, []int{-1, -1, 1, 2, 3}[rng.IntN(5)])
	}
	return g
}

// randomValue makes a JSON value for g, dims[:n] of it; one time in bad
// it is made not to fit.
func randomValue(rng *rand.Rand, g genType, n int, named bool, bad int) string {
	if n > 0 {
		size := g.dims[n-1]
		if size < 0 {
			size = rng.IntN(4)
		}
		if rng.IntN(bad) == 0 {
			size++
		}
		parts := make([]string, size)
		for i := range parts {
			parts[i] = randomValue(rng, g, n-1, named, bad)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	if g.comps != nil {
		parts := make([]string, len(g.comps))
		for i, c := range g.comps {
			v := randomValue(rng, c, len(c.dims), named, bad)
			if named {
				parts[i] = fmt.Sprintf("%q:%s", g.names[i], v)
			} else {
				parts[i] = v
			}
		}
		if named {
			return "{" + strings.Join(parts, ",") + "}"
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	wrong := rng.IntN(bad) == 0
	switch b := g.base; {
	case strings.HasPrefix(b, "uint") || strings.HasPrefix(b, "int"):
		bits := 0
		fmt.Sscanf(strings.TrimLeft(b, "uint"), "%d", &bits)
		lim := new(big.Int).Lsh(big.NewInt(1), uint(bits))
		signed := b[0] == 'i'
		if signed {
			lim.Rsh(lim, 1)
		}
		raw := make([]byte, bits/8)
		for i := range raw {
			raw[i] = byte(rng.IntN(256))
		}
		v := new(big.Int).Mod(new(big.Int).SetBytes(raw[:rng.IntN(len(raw)+1)]), lim)
		if signed && rng.IntN(2) == 0 {
			v.Neg(v)
		}
		if rng.IntN(5) == 0 {
			v.Sub(lim, big.NewInt(1))
			if signed && rng.IntN(2) == 0 {
				v.Neg(lim)
			}
		}
		if wrong {
			v = new(big.Int).Set(lim)
		}
		switch rng.IntN(4) {
		case 0:
			if v.IsInt64() && v.CmpAbs(big.NewInt(1<<53-1)) <= 0 {
				return v.String()
			}
		case 1:
			s := fmt.Sprintf("0x%x", new(big.Int).Abs(v))
			if v.Sign() < 0 {
				s = "-" + s
			}
			return `"` + s + `"`
		case 2:
			if wrong {
				return "true"
			}
		}
		return `"` + v.String() + `"`
	case b == "bool":
		if wrong {
			return `"true"`
		}
		return []string{"true", "false"}[rng.IntN(2)]
	case b == "address":
		var a [20]byte
		for i := range a {
			a[i] = byte(rng.IntN(256))
		}
		if wrong {
			return `"0x` + hex.EncodeToString(a[:19]) + `"`
		}
		if rng.IntN(2) == 0 {
			return `"0x` + hex.EncodeToString(a[:]) + `"`
		}
		return `"` + common.Address(a).Hex() + `"`
	case b == "string":
		if wrong {
			return "7"
		}
		return []string{`""`, `"x"`, `"héllo wörld"`, `"` + strings.Repeat("ab", 40) + `"`, `"\u2028\"\\"`, `"日本語"`}[rng.IntN(6)]
	default: // bytes, bytesN
		size := rng.IntN(40)
		if b != "bytes" {
			fmt.Sscanf(b, "bytes%d", &size)
		}
		if wrong {
			size++
		}
		v := make([]byte, size)
		for i := range v {
			v[i] = byte(rng.IntN(256))
		}
		s := hex.EncodeToString(v)
		if rng.IntN(3) == 0 {
			s = strings.ToUpper(s)
		}
		return `"0x` + s + `"`
	}
}

// randomCases are n calls of random types, by signature and by ABI, with
// values that mostly fit.
func randomCases(rng *rand.Rand, n int) []refusalCase {
	out := make([]refusalCase, 0, n)
	for i := range n {
		bySig := i%2 == 0
		k := rng.IntN(4)
		types := make([]genType, k)
		sigs := make([]string, k)
		args := make([]string, k)
		inputs := make([]string, k)
		for j := range types {
			types[j] = randomType(rng, 0, bySig)
			sigs[j] = types[j].sig()
			args[j] = randomValue(rng, types[j], len(types[j].dims), !bySig && rng.IntN(2) == 0, 25)
			inputs[j] = types[j].abiArg(fmt.Sprintf("a%d", j))
		}
		r := calldata.Request{Args: json.RawMessage("[" + strings.Join(args, ",") + "]")}
		if bySig {
			r.Function = "f(" + strings.Join(sigs, ",") + ")"
		} else {
			r.ABI = json.RawMessage(`[{"type":"function","name":"f","inputs":[` + strings.Join(inputs, ",") + `]}]`)
			r.Method = "f"
		}
		out = append(out, refusalCase{name: fmt.Sprintf("random %d", i), r: r})
	}
	return out
}
