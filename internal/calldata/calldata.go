// Package calldata encodes a contract call named by a function signature
// ("transfer(address,uint256)") or by a method of a JSON ABI fragment, with
// its arguments as JSON values, into a transaction's call data.
//
// The encoding is go-ethereum's accounts/abi: its selector parser reads a
// signature, abi.JSON an ABI, and Method.Inputs.Pack encodes. What is ours is
// the reading of JSON values into the Go values accounts/abi packs (it reads
// Go values only): each value is checked against its ABI type (an integer's
// range, a bytesN's length, an array's length, a tuple's components) and a
// refusal names the argument (`args[1]: 300 does not fit uint8`).
//
// The input is a client's, so the work is bounded before anything is
// decoded: at most MaxValues JSON values nested at most MaxDepth deep in the
// arguments, a signature of at most MaxSignature characters, an ABI of at
// most MaxABIBytes. accounts/abi builds a reflect type for each tuple and
// array type it meets, and reflect keeps the types it made for the life of
// the process; the clients that may send calls hold a wallet's scope, so
// that cost is theirs to bound.
package calldata

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
)

// Bounds of a call.
const (
	// MaxValues is the most JSON values (each number, string, array and
	// object counts) the arguments may hold.
	MaxValues = 1024
	// MaxDepth is how deep arrays and objects may nest in the arguments
	// (the arguments' own array is depth 1).
	MaxDepth = 8
	// MaxSignature is the longest function signature.
	MaxSignature = 1024
	// MaxABIBytes is the largest ABI fragment, as sent.
	MaxABIBytes = 128 << 10
	// maxABIDepth bounds the nesting of an ABI fragment's JSON (a tuple
	// component adds two levels).
	maxABIDepth = 32
	// maxSafeInteger is the largest integer a JSON client (JavaScript's
	// Number) holds exactly: 2^53 - 1.
	maxSafeInteger = 1<<53 - 1
)

// Request is a call as a client names it: Function, or ABI and Method.
type Request struct {
	// Function is a signature, such as "transfer(address,uint256)";
	// tuples are written in parentheses: "f((uint256,address)[])".
	Function string
	// ABI is a JSON ABI: one entry (an object) or an array of entries.
	ABI json.RawMessage
	// Method names the function of ABI to call: its name, or its
	// signature when the name is overloaded.
	Method string
	// Args is a JSON array of the arguments; empty means none.
	Args json.RawMessage
}

// Call is an encoded call.
type Call struct {
	// Data is the call data: the selector, then the arguments.
	Data []byte
	// Function is the called function's canonical signature
	// ("transfer(address,uint256)").
	Function string
	// Method and ABI are the request's, for a call named by an ABI: ABI is
	// always an array, without insignificant whitespace.
	Method string
	ABI    json.RawMessage
	// Args are the arguments, normalised: integers as decimal strings,
	// addresses EIP-55 checksummed, bytes as lower-case 0x hex, tuples as
	// arrays of their components in order.
	Args json.RawMessage
}

// Error is a refusal of a request; Field is the request's field at fault
// ("function", "abi", "method", "args" or an argument such as "args[1]").
type Error struct {
	Field   string
	Problem string
}

func (e *Error) Error() string { return e.Field + ": " + e.Problem }

func errorf(field, format string, a ...any) *Error {
	return &Error{Field: field, Problem: fmt.Sprintf(format, a...)}
}

// Encode reads r's function (or ABI method) and arguments and encodes
// them. Every refusal is an *Error.
func Encode(r Request) (Call, error) {
	var (
		m     abi.Method
		named bool // the tuples' components have their ABI's names
		out   Call
		err   *Error
	)
	switch {
	case r.Function != "" && (len(r.ABI) > 0 || r.Method != ""):
		return Call{}, errorf("function", "give function, or abi and method, not both")
	case r.Function != "":
		m, err = parseFunction(r.Function)
	case len(r.ABI) > 0 && r.Method == "":
		return Call{}, errorf("method", "required with abi: the name (or signature) of the function to call")
	case len(r.ABI) > 0:
		out.Method = r.Method
		out.ABI, m, err = parseABIMethod(r.ABI, r.Method)
		named = true
	case r.Method != "":
		return Call{}, errorf("abi", "required with method: the ABI the method is in")
	default:
		return Call{}, errorf("function", "required: a function signature, or abi and method")
	}
	if err != nil {
		return Call{}, err
	}
	out.Function = m.Sig
	args, err := readArgs(r.Args)
	if err != nil {
		return Call{}, err
	}
	if len(args) != len(m.Inputs) {
		return Call{}, errorf("args", "function %s takes %d arguments, got %d", m.Sig, len(m.Inputs), len(args))
	}
	values := make([]any, len(args))
	normal := make([]any, len(args))
	for i, in := range m.Inputs {
		at := fmt.Sprintf("args[%d]", i)
		if named && in.Name != "" {
			at += " (" + in.Name + ")"
		}
		v, err := value(in.Type, args[i], at, named)
		if err != nil {
			return Call{}, err
		}
		values[i], normal[i] = v.Interface(), normalise(in.Type, v)
	}
	packed, perr := m.Inputs.Pack(values...)
	if perr != nil {
		// value built what the types ask for: this is a bug of ours.
		return Call{}, fmt.Errorf("calldata: encoding the arguments of %s: %w", m.Sig, perr)
	}
	out.Data = append(slices.Clone(m.ID), packed...)
	out.Args, perr = marshal(normal)
	if perr != nil {
		return Call{}, fmt.Errorf("calldata: writing the arguments of %s: %w", m.Sig, perr)
	}
	return out, nil
}

// marshal writes v as JSON without HTML escapes and without a newline.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

var (
	signatureShape = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*\(.*\)$`)
	// sizelessInt is an int or uint without its size, which Solidity
	// reads as 256 bits and accounts/abi refuses.
	sizelessInt = regexp.MustCompile(`^(u?int)(\[|$)`)
	// elementary is an ABI elementary type as its canonical signature
	// writes it.
	elementary = regexp.MustCompile(`^(u?int(8|16|24|32|40|48|56|64|72|80|88|96|104|112|120|128|136|144|152|160|168|176|184|192|200|208|216|224|232|240|248|256)|bytes([1-9]|[12][0-9]|3[0-2])?|address|bool|string|function)$`)
)

// parseFunction reads a signature with accounts/abi's selector parser.
func parseFunction(sig string) (abi.Method, *Error) {
	sig = strings.Join(strings.Fields(sig), "")
	if len(sig) > MaxSignature {
		return abi.Method{}, errorf("function", "longer than %d characters", MaxSignature)
	}
	if !signatureShape.MatchString(sig) {
		return abi.Method{}, errorf("function", "must be a name and its argument types in parentheses, such as transfer(address,uint256)")
	}
	depth, deepest := 0, 0
	for _, c := range sig {
		switch c {
		case '(':
			depth++
			deepest = max(deepest, depth)
		case ')':
			depth--
		}
	}
	if deepest > MaxDepth {
		return abi.Method{}, errorf("function", "tuples nest deeper than %d", MaxDepth)
	}
	var (
		sel abi.SelectorMarshaling
		err error
	)
	func() {
		// The parser indexes its input without checking its length in
		// places; a signature it cannot read is the client's error.
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("unreadable signature %q", sig)
			}
		}()
		sel, err = abi.ParseSelector(sig)
	}()
	if err != nil {
		return abi.Method{}, errorf("function", "%v", err)
	}
	inputs, perr := arguments(sel.Inputs)
	if perr != nil {
		return abi.Method{}, errorf("function", "%v", perr)
	}
	return abi.NewMethod(sel.Name, sel.Name, abi.Function, "nonpayable", false, false, inputs, nil), nil
}

// arguments builds the parsed selector's argument types, reading a
// sizeless int or uint as Solidity does (256 bits).
func arguments(ms []abi.ArgumentMarshaling) (args abi.Arguments, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unsupported types: %v", r)
		}
	}()
	for _, m := range ms {
		sizeless(&m)
		t, err := abi.NewType(m.Type, m.InternalType, m.Components)
		if err != nil {
			return nil, err
		}
		if err := checkType(t); err != nil {
			return nil, err
		}
		args = append(args, abi.Argument{Name: m.Name, Type: t})
	}
	return args, nil
}

func sizeless(m *abi.ArgumentMarshaling) {
	m.Type = sizelessInt.ReplaceAllString(m.Type, "${1}256$2")
	m.InternalType = m.Type
	for i := range m.Components {
		sizeless(&m.Components[i])
	}
}

// checkType refuses a type accounts/abi reads but no canonical signature
// has (uint7, bool8, address5: the selector would be wrong) or that it
// cannot encode.
func checkType(t abi.Type) error {
	if fixedElems(t) > MaxValues {
		return fmt.Errorf("type %s holds more than %d values", t, MaxValues)
	}
	switch t.T {
	case abi.SliceTy, abi.ArrayTy:
		return checkType(*t.Elem)
	case abi.TupleTy:
		// accounts/abi packs a tuple through a struct whose fields are its
		// components' names camel-cased: two names alike once camel-cased
		// ("x" and "X", "a_b" and "aB") fail the encoding.
		seen := map[string]string{}
		for i, e := range t.TupleElems {
			name := t.TupleRawNames[i]
			if other, ok := seen[abi.ToCamelCase(name)]; ok {
				return fmt.Errorf("tuple %s: components %q and %q are one name to the encoder (%s)", t, other, name, abi.ToCamelCase(name))
			}
			seen[abi.ToCamelCase(name)] = name
			if err := checkType(*e); err != nil {
				return err
			}
		}
		return nil
	case abi.FixedPointTy, abi.HashTy:
		return fmt.Errorf("type %s is not supported", t)
	}
	if !elementary.MatchString(t.String()) {
		return fmt.Errorf("unsupported type %s", t)
	}
	return nil
}

// fixedElems is how many values a value of t holds before any dynamic
// array: what reading one allocates at once (at most MaxValues + 1).
func fixedElems(t abi.Type) int {
	switch t.T {
	case abi.ArrayTy:
		return min(t.Size*fixedElems(*t.Elem), MaxValues+1)
	case abi.TupleTy:
		n := 1
		for _, e := range t.TupleElems {
			n = min(n+fixedElems(*e), MaxValues+1)
		}
		return n
	}
	return 1
}

// parseABIMethod reads an ABI (one entry, or an array) and finds method in
// it; it returns the ABI as an array without insignificant whitespace.
func parseABIMethod(raw json.RawMessage, method string) (json.RawMessage, abi.Method, *Error) {
	if len(raw) > MaxABIBytes {
		return nil, abi.Method{}, errorf("abi", "larger than %d bytes", MaxABIBytes)
	}
	if err := checkJSON(raw, 0, maxABIDepth); err != nil {
		return nil, abi.Method{}, errorf("abi", "%s", err.Problem)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		raw = slices.Concat([]byte("["), raw, []byte("]"))
	}
	if len(raw) == 0 || raw[0] != '[' {
		return nil, abi.Method{}, errorf("abi", "must be an ABI entry (an object) or an array of entries")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, abi.Method{}, errorf("abi", "malformed JSON: %v", err)
	}
	var (
		parsed abi.ABI
		err    error
	)
	func() {
		// reflect.ArrayOf panics on an array type too large for memory.
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("unsupported types: %v", r)
			}
		}()
		parsed, err = abi.JSON(bytes.NewReader(compact.Bytes()))
	}()
	if err != nil {
		return nil, abi.Method{}, errorf("abi", "not a valid ABI: %v", err)
	}
	m, perr := findMethod(parsed, method)
	if perr != nil {
		return nil, abi.Method{}, perr
	}
	for _, in := range m.Inputs {
		if err := checkType(in.Type); err != nil {
			return nil, abi.Method{}, errorf("abi", "function %s: %v", m.Sig, err)
		}
	}
	return compact.Bytes(), m, nil
}

// findMethod finds the function method names in a: by its name, or by its
// signature (an overloaded name must be given as one).
func findMethod(a abi.ABI, method string) (abi.Method, *Error) {
	var named, all []string
	var found []abi.Method
	wantSig := ""
	if strings.Contains(method, "(") {
		m, err := parseFunction(method)
		if err != nil {
			return abi.Method{}, errorf("method", "%s", err.Problem)
		}
		wantSig = m.Sig
	}
	for _, m := range a.Methods {
		all = append(all, m.Sig)
		if wantSig == m.Sig || wantSig == "" && m.RawName == method {
			found = append(found, m)
			named = append(named, m.Sig)
		}
	}
	slices.Sort(all)
	slices.Sort(named)
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return abi.Method{}, errorf("method", "%q is overloaded in the abi: name it by its signature, one of %s", method, strings.Join(named, ", "))
	case len(all) == 0:
		return abi.Method{}, errorf("method", "the abi has no function")
	}
	return abi.Method{}, errorf("method", "the abi has no function %q (it has %s)", method, strings.Join(all, ", "))
}

// readArgs reads the arguments' array within the bounds.
func readArgs(raw json.RawMessage) ([]any, *Error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	if err := checkJSON(raw, MaxValues, MaxDepth); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errorf("args", "malformed JSON: %v", err)
	}
	args, ok := v.([]any)
	if !ok {
		return nil, errorf("args", "must be an array of the function's arguments")
	}
	return args, nil
}

// checkJSON walks one JSON value token by token, before anything is
// decoded, and refuses more than maxValues values (0: any number), nesting
// deeper than maxDepth, and a key given twice in an object (which
// encoding/json would read as its last).
func checkJSON(raw []byte, maxValues, maxDepth int) *Error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // an object's next token is a key
	}
	var stack []*frame
	values := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return errorf("args", "malformed JSON: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = true
			}
			continue
		}
		if top != nil && top.object && top.key {
			k := tok.(string)
			if top.keys[k] {
				return errorf("args", "key %q given more than once in one object", k)
			}
			top.keys[k] = true
			top.key = false
			continue
		}
		values++
		if maxValues > 0 && values > maxValues {
			return errorf("args", "more than %d values", maxValues)
		}
		if top != nil && top.object {
			top.key = true
		}
		if d, ok := tok.(json.Delim); ok {
			if len(stack)+1 > maxDepth {
				return errorf("args", "nested deeper than %d", maxDepth)
			}
			stack = append(stack, &frame{object: d == '{', keys: map[string]bool{}, key: d == '{'})
		}
	}
	return nil
}

// value reads the JSON value v as the ABI type t into the Go value
// accounts/abi packs for t. at names the value in errors; named says that
// t's tuples carry their components' names (an ABI's), so that a tuple may
// be an object.
func value(t abi.Type, v any, at string, named bool) (reflect.Value, *Error) {
	switch t.T {
	case abi.IntTy, abi.UintTy:
		n, err := integer(t, v, at)
		if err != nil {
			return reflect.Value{}, err
		}
		out := reflect.New(t.GetType()).Elem()
		switch out.Kind() {
		case reflect.Pointer:
			out.Set(reflect.ValueOf(n))
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out.SetUint(n.Uint64())
		default:
			out.SetInt(n.Int64())
		}
		return out, nil
	case abi.BoolTy:
		b, ok := v.(bool)
		if !ok {
			return reflect.Value{}, errorf(at, "must be true or false for bool, got %s", jsonKind(v))
		}
		return reflect.ValueOf(b), nil
	case abi.StringTy:
		s, ok := v.(string)
		if !ok {
			return reflect.Value{}, errorf(at, "must be a JSON string for string, got %s", jsonKind(v))
		}
		return reflect.ValueOf(s), nil
	case abi.AddressTy:
		s, ok := v.(string)
		if !ok || len(s) != 42 || !strings.HasPrefix(s, "0x") || !isHex(s[2:]) {
			return reflect.Value{}, errorf(at, "must be an address, 0x and 40 hex digits")
		}
		a := common.HexToAddress(s)
		if h := s[2:]; strings.ToLower(h) != h && strings.ToUpper(h) != h && a.Hex() != s {
			return reflect.Value{}, errorf(at, "mixed-case address with a wrong EIP-55 checksum (write it in one case, or as %s if that is the one meant)", a.Hex())
		}
		return reflect.ValueOf(a), nil
	case abi.BytesTy:
		b, err := hexBytes(v, at, t)
		if err != nil {
			return reflect.Value{}, err
		}
		return reflect.ValueOf(b), nil
	case abi.FixedBytesTy, abi.FunctionTy:
		b, err := hexBytes(v, at, t)
		if err != nil {
			return reflect.Value{}, err
		}
		if len(b) != t.Size {
			return reflect.Value{}, errorf(at, "%s takes exactly %d bytes, got %d", t, t.Size, len(b))
		}
		out := reflect.New(t.GetType()).Elem()
		reflect.Copy(out, reflect.ValueOf(b))
		return out, nil
	case abi.SliceTy, abi.ArrayTy:
		list, ok := v.([]any)
		if !ok {
			return reflect.Value{}, errorf(at, "must be a JSON array for %s, got %s", t, jsonKind(v))
		}
		var out reflect.Value
		if t.T == abi.ArrayTy {
			if len(list) != t.Size {
				return reflect.Value{}, errorf(at, "%s takes exactly %d elements, got %d", t, t.Size, len(list))
			}
			out = reflect.New(t.GetType()).Elem()
		} else {
			if len(list)*fixedElems(*t.Elem) > MaxValues {
				return reflect.Value{}, errorf(at, "more than %d values", MaxValues)
			}
			out = reflect.MakeSlice(t.GetType(), len(list), len(list))
		}
		for i, e := range list {
			ev, err := value(*t.Elem, e, fmt.Sprintf("%s[%d]", at, i), named)
			if err != nil {
				return reflect.Value{}, err
			}
			out.Index(i).Set(ev)
		}
		return out, nil
	case abi.TupleTy:
		return tuple(t, v, at, named)
	}
	return reflect.Value{}, errorf(at, "type %s is not supported", t)
}

// tuple reads a tuple: a JSON array of its components in order, or, when
// named, an object keyed by their names.
func tuple(t abi.Type, v any, at string, named bool) (reflect.Value, *Error) {
	n := len(t.TupleElems)
	list := make([]any, n)
	paths := make([]string, n)
	switch v := v.(type) {
	case []any:
		if len(v) != n {
			return reflect.Value{}, errorf(at, "tuple %s has %d components, got %d", t, n, len(v))
		}
		copy(list, v)
		for i := range paths {
			paths[i] = fmt.Sprintf("%s[%d]", at, i)
		}
	case map[string]any:
		if !named {
			return reflect.Value{}, errorf(at, "a tuple of a signature has no component names: write it as an array, or send an abi")
		}
		for k := range v {
			if !slices.Contains(t.TupleRawNames, k) {
				return reflect.Value{}, errorf(at, "unknown component %q (tuple %s has %s)", k, t, strings.Join(t.TupleRawNames, ", "))
			}
		}
		for i, name := range t.TupleRawNames {
			e, ok := v[name]
			if !ok {
				return reflect.Value{}, errorf(at, "missing component %q", name)
			}
			list[i], paths[i] = e, at+"."+name
		}
	default:
		return reflect.Value{}, errorf(at, "must be a JSON array (or an object, with an abi) for tuple %s, got %s", t, jsonKind(v))
	}
	out := reflect.New(t.TupleType).Elem()
	for i, e := range t.TupleElems {
		ev, err := value(*e, list[i], paths[i], named)
		if err != nil {
			return reflect.Value{}, err
		}
		out.Field(i).Set(ev)
	}
	return out, nil
}

// integer reads an integer for t: a decimal string, a 0x hex string (either
// with a leading - for a signed type), or a JSON number that is a whole
// number a JSON client holds exactly. It must fit t.
func integer(t abi.Type, v any, at string) (*big.Int, *Error) {
	var (
		text string
		n    *big.Int
	)
	switch v := v.(type) {
	case json.Number:
		text = string(v)
		if !jsonInteger.MatchString(text) {
			return nil, errorf(at, "JSON number %s is not a whole number without fraction or exponent: write it as a decimal string", short(text))
		}
		n, _ = new(big.Int).SetString(text, 10)
		if n == nil || n.CmpAbs(big.NewInt(maxSafeInteger)) > 0 {
			return nil, errorf(at, "JSON number %s is beyond 2^53-1, which JSON clients do not hold exactly: write it as a decimal string", short(text))
		}
	case string:
		text = v
		digits, neg := strings.CutPrefix(v, "-")
		base := 10
		if rest, ok := strings.CutPrefix(digits, "0x"); ok {
			digits, base = rest, 16
		}
		if digits == "" || !(base == 10 && isDecimal(digits) || base == 16 && isHex(digits)) {
			return nil, errorf(at, "%q is not an integer (decimal, or 0x hex)", short(text))
		}
		// Past leading zeros, 80 digits hold any 256-bit integer: a
		// longer string is not parsed at all.
		if digits = strings.TrimLeft(digits, "0"); len(digits) > 80 {
			return nil, errorf(at, "%s does not fit %s", short(text), t)
		}
		n, _ = new(big.Int).SetString("0"+digits, base)
		if neg {
			n.Neg(n)
		}
	default:
		return nil, errorf(at, "must be an integer for %s (a decimal string, 0x hex, or a JSON number up to 2^53-1), got %s", t, jsonKind(v))
	}
	lo, hi := new(big.Int), new(big.Int).Lsh(big.NewInt(1), uint(t.Size)) // [0, 2^size)
	if t.T == abi.IntTy {
		hi.Rsh(hi, 1) // [-2^(size-1), 2^(size-1))
		lo.Neg(hi)
	}
	if n.Cmp(lo) < 0 || n.Cmp(hi) >= 0 {
		return nil, errorf(at, "%s does not fit %s", short(text), t)
	}
	return n, nil
}

var jsonInteger = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// hexBytes reads 0x-prefixed hex for t.
func hexBytes(v any, at string, t abi.Type) ([]byte, *Error) {
	s, ok := v.(string)
	if !ok || !strings.HasPrefix(s, "0x") {
		return nil, errorf(at, "must be 0x-prefixed hex for %s", t)
	}
	b, err := hex.DecodeString(s[2:])
	if err != nil {
		return nil, errorf(at, "must be 0x and an even number of hex digits for %s", t)
	}
	return b, nil
}

// normalise writes v, of type t, as Call.Args has it.
func normalise(t abi.Type, v reflect.Value) any {
	switch t.T {
	case abi.IntTy, abi.UintTy:
		switch v.Kind() {
		case reflect.Pointer:
			return v.Interface().(*big.Int).String()
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return strconv.FormatUint(v.Uint(), 10)
		default:
			return strconv.FormatInt(v.Int(), 10)
		}
	case abi.AddressTy:
		return v.Interface().(common.Address).Hex()
	case abi.BytesTy:
		return "0x" + hex.EncodeToString(v.Bytes())
	case abi.FixedBytesTy, abi.FunctionTy:
		b := make([]byte, v.Len())
		reflect.Copy(reflect.ValueOf(b), v)
		return "0x" + hex.EncodeToString(b)
	case abi.SliceTy, abi.ArrayTy:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = normalise(*t.Elem, v.Index(i))
		}
		return out
	case abi.TupleTy:
		out := make([]any, len(t.TupleElems))
		for i, e := range t.TupleElems {
			out[i] = normalise(*e, v.Field(i))
		}
		return out
	}
	return v.Interface() // bool, string
}

// jsonKind names a decoded JSON value's kind, for errors.
func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + short(string(v))
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// short cuts text for an error message.
func short(text string) string {
	if len(text) > 80 {
		return text[:77] + "..."
	}
	return text
}

func isDecimal(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
