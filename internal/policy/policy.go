// Package policy reads wallets' policies as operators write them — in the
// configuration (--wallet-policy) and in the API's JSON — into the
// store.WalletPolicy the intake applies (ledgerq.wallet_policy_refusal),
// and writes a stored policy back in the API's form. A refusal of bad input
// names the field at fault.
package policy

import (
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ledgerq/ledgerq/internal/calldata"
	"github.com/ledgerq/ledgerq/internal/config"
	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/store"
)

// Bounds of a policy, so that one row stays small.
const (
	MaxRecipients = 1000
	MaxContracts  = 1000
	MaxFunctions  = 256
	MaxCaps       = 8
)

// Spec is a policy as the API and the configuration give it.
type Spec struct {
	Recipients []string
	Contracts  []ContractSpec
	// MaxValuePerTx is wei, a decimal integer; "" is no bound.
	MaxValuePerTx string
	ValueCaps     []CapSpec
	FeeCaps       []CapSpec
}

// ContractSpec is a contract a wallet may call.
type ContractSpec struct {
	Address string
	// Functions are signatures ("transfer(address,uint256)") or selectors
	// ("0xa9059cbb"); none: every function.
	Functions []string
}

// CapSpec is an amount of wei (a decimal integer) per rolling window (a Go
// duration: "24h", "30m").
type CapSpec struct {
	Window string
	Max    string
}

// Error is bad input: Field names where (for example
// "contracts[0].functions[1]").
type Error struct {
	Field   string
	Problem string
}

func (e *Error) Error() string { return e.Field + ": " + e.Problem }

func errorf(field, format string, a ...any) *Error {
	return &Error{Field: field, Problem: fmt.Sprintf(format, a...)}
}

var (
	hexAddress  = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
	hexSelector = regexp.MustCompile(`^0x[0-9a-fA-F]{8}$`)
	decimal     = regexp.MustCompile(`^[0-9]{1,78}$`)
	maxUint256  = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
)

// Policy checks s and returns it as stored: addresses lower-case,
// functions as selectors (each with the signature it was given as),
// amounts and windows parsed. An address listed twice is one.
func (s Spec) Policy() (store.WalletPolicy, error) {
	var p store.WalletPolicy
	if len(s.Recipients) > MaxRecipients {
		return p, errorf("recipients", "at most %d", MaxRecipients)
	}
	for i, r := range s.Recipients {
		if !hexAddress.MatchString(r) {
			return p, errorf(fmt.Sprintf("recipients[%d]", i), "%q is not a hex address", short(r))
		}
		if a := strings.ToLower(r); !slices.Contains(p.Recipients, a) {
			p.Recipients = append(p.Recipients, a)
		}
	}
	if len(s.Contracts) > MaxContracts {
		return p, errorf("contracts", "at most %d", MaxContracts)
	}
	for i, c := range s.Contracts {
		field := fmt.Sprintf("contracts[%d]", i)
		if !hexAddress.MatchString(c.Address) {
			return p, errorf(field+".address", "%q is not a hex address", short(c.Address))
		}
		if len(c.Functions) > MaxFunctions {
			return p, errorf(field+".functions", "at most %d", MaxFunctions)
		}
		if p.Contracts == nil {
			p.Contracts = map[string]map[string]string{}
		}
		a := strings.ToLower(c.Address)
		sels, listed := p.Contracts[a]
		switch {
		case len(c.Functions) == 0 || listed && sels == nil:
			p.Contracts[a] = nil // every function
			continue
		case sels == nil:
			sels = map[string]string{}
		}
		for j, f := range c.Functions {
			sel, sig, err := Selector(f)
			if err != nil {
				return p, errorf(fmt.Sprintf("%s.functions[%d]", field, j), "%v", err)
			}
			if sels[sel] == "" {
				sels[sel] = sig
			}
		}
		p.Contracts[a] = sels
	}
	if s.MaxValuePerTx != "" {
		v, err := Amount(s.MaxValuePerTx)
		if err != nil {
			return p, errorf("max_value_per_tx", "%v", err)
		}
		p.MaxValuePerTx = v
	}
	var err error
	if p.ValueCaps, err = caps("value_caps", s.ValueCaps); err != nil {
		return p, err
	}
	if p.FeeCaps, err = caps("fee_caps", s.FeeCaps); err != nil {
		return p, err
	}
	return p, p.Validate()
}

func caps(field string, in []CapSpec) ([]store.PolicyCap, error) {
	if len(in) > MaxCaps {
		return nil, errorf(field, "at most %d", MaxCaps)
	}
	var out []store.PolicyCap
	for i, c := range in {
		at := fmt.Sprintf("%s[%d]", field, i)
		w, err := time.ParseDuration(c.Window)
		switch {
		case err != nil:
			return nil, errorf(at+".window", "%q is not a duration such as 24h or 30m", short(c.Window))
		case w < time.Second || w > store.MaxPolicyWindow || w%time.Second != 0:
			return nil, errorf(at+".window", "%s is not whole seconds from 1s to %s", w, store.MaxPolicyWindow)
		}
		m, err := Amount(c.Max)
		if err != nil {
			return nil, errorf(at+".max", "%v", err)
		}
		out = append(out, store.PolicyCap{Window: w, Max: m})
	}
	return out, nil
}

// Amount reads wei: a decimal integer below 2^256.
func Amount(s string) (*big.Int, error) {
	if !decimal.MatchString(s) {
		return nil, fmt.Errorf("%q is not wei as a decimal integer", short(s))
	}
	v, _ := new(big.Int).SetString(s, 10)
	if v.Cmp(maxUint256) > 0 {
		return nil, errors.New("above 2^256 - 1")
	}
	return v, nil
}

// Selector reads a function as a policy names it: a selector, 0x and 8 hex
// digits (its signature then ""), or a signature, whose selector it
// computes (and whose canonical form it returns).
func Selector(f string) (selector, signature string, err error) {
	if hexSelector.MatchString(f) {
		return strings.ToLower(f), "", nil
	}
	sel, sig, err := calldata.Selector(f)
	if err != nil {
		return "", "", fmt.Errorf("%q is neither a selector (0x and 8 hex digits) nor a signature such as transfer(address,uint256): %w", short(f), err)
	}
	return "0x" + hex.EncodeToString(sel[:]), sig, nil
}

// FromStore is a stored policy in the API's form: each function as the
// signature it was given as, else its selector; contracts and functions
// in order.
func FromStore(p store.WalletPolicy) Spec {
	s := Spec{Recipients: p.Recipients}
	for _, a := range slices.Sorted(maps.Keys(p.Contracts)) {
		c := ContractSpec{Address: a}
		sels := p.Contracts[a]
		for _, sel := range slices.Sorted(maps.Keys(sels)) {
			if sels[sel] != "" {
				c.Functions = append(c.Functions, sels[sel])
			} else {
				c.Functions = append(c.Functions, sel)
			}
		}
		s.Contracts = append(s.Contracts, c)
	}
	if p.MaxValuePerTx != nil {
		s.MaxValuePerTx = p.MaxValuePerTx.String()
	}
	for _, c := range p.ValueCaps {
		s.ValueCaps = append(s.ValueCaps, CapSpec{Window: c.Window.String(), Max: c.Max.String()})
	}
	for _, c := range p.FeeCaps {
		s.FeeCaps = append(s.FeeCaps, CapSpec{Window: c.Window.String(), Max: c.Max.String()})
	}
	return s
}

func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Decl is one --wallet-policy: a wallet's policy in the configuration.
type Decl struct {
	Wallet string
	Spec   Spec
}

// String is d as --wallet-policy takes it.
func (d Decl) String() string {
	parts := []string{"wallet=" + d.Wallet}
	for _, r := range d.Spec.Recipients {
		parts = append(parts, "recipient="+r)
	}
	for _, c := range d.Spec.Contracts {
		if len(c.Functions) == 0 {
			parts = append(parts, "contract="+c.Address)
		}
		for _, f := range c.Functions {
			parts = append(parts, "function="+c.Address+":"+f)
		}
	}
	if d.Spec.MaxValuePerTx != "" {
		parts = append(parts, "max-value="+d.Spec.MaxValuePerTx)
	}
	for _, c := range d.Spec.ValueCaps {
		parts = append(parts, "value-cap="+c.Max+"/"+c.Window)
	}
	for _, c := range d.Spec.FeeCaps {
		parts = append(parts, "fee-cap="+c.Max+"/"+c.Window)
	}
	return strings.Join(parts, ",")
}

// ParseDecl parses wallet=NAME[,recipient=0x…][,contract=0x…]
// [,function=0xCONTRACT:SIGNATURE_OR_SELECTOR][,max-value=WEI]
// [,value-cap=WEI/WINDOW][,fee-cap=WEI/WINDOW], each key but wallet
// repeatable. A signature's own commas are inside its parentheses.
func ParseDecl(s string) (Decl, error) {
	var d Decl
	contracts := map[string]int{}
	contract := func(a string) *ContractSpec {
		k := strings.ToLower(a)
		i, ok := contracts[k]
		if !ok {
			i = len(d.Spec.Contracts)
			contracts[k] = i
			d.Spec.Contracts = append(d.Spec.Contracts, ContractSpec{Address: a})
		}
		return &d.Spec.Contracts[i]
	}
	anyFunction := map[string]bool{}
	for _, part := range splitTop(s) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return d, fmt.Errorf("policy: %q: want key=value", part)
		}
		switch k {
		case "wallet":
			d.Wallet = v
		case "recipient":
			d.Spec.Recipients = append(d.Spec.Recipients, v)
		case "contract":
			contract(v)
			anyFunction[strings.ToLower(v)] = true
		case "function":
			a, f, ok := strings.Cut(v, ":")
			if !ok {
				return d, fmt.Errorf("policy of wallet %s: function %q: want CONTRACT:SIGNATURE or CONTRACT:SELECTOR", d.Wallet, v)
			}
			c := contract(a)
			c.Functions = append(c.Functions, f)
		case "max-value":
			d.Spec.MaxValuePerTx = v
		case "value-cap", "fee-cap":
			m, w, ok := strings.Cut(v, "/")
			if !ok {
				return d, fmt.Errorf("policy of wallet %s: %s %q: want WEI/WINDOW, for example 100000000000000000000/24h", d.Wallet, k, v)
			}
			if k == "value-cap" {
				d.Spec.ValueCaps = append(d.Spec.ValueCaps, CapSpec{Window: w, Max: m})
			} else {
				d.Spec.FeeCaps = append(d.Spec.FeeCaps, CapSpec{Window: w, Max: m})
			}
		default:
			return d, fmt.Errorf("policy of wallet %s: unknown key %q (want wallet, recipient, contract, function, max-value, value-cap, fee-cap)", d.Wallet, k)
		}
	}
	// contract=A allows every function of A, whatever function=A:… says.
	for i, c := range d.Spec.Contracts {
		if anyFunction[strings.ToLower(c.Address)] {
			d.Spec.Contracts[i].Functions = nil
		}
	}
	return d, d.Validate()
}

// splitTop splits s at the commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// Validate reports what cannot work in one declaration.
func (d Decl) Validate() error {
	if !keystore.ValidID(d.Wallet) {
		return fmt.Errorf("policy: wallet %q: a name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", d.Wallet)
	}
	if _, err := d.Spec.Policy(); err != nil {
		return fmt.Errorf("policy of wallet %s: %w", d.Wallet, err)
	}
	return nil
}

// Decls is the repeatable --wallet-policy setting (a flag.Value; in the
// file a list of mappings). Several declarations in one value are
// separated by ';'.
type Decls []Decl

// KeyValues marks Decls as a setting of key=value pairs (config.KeyValues).
func (*Decls) KeyValues() {}

// String lists the declarations.
func (l *Decls) String() string {
	if l == nil {
		return ""
	}
	return config.JoinKeyValues(*l)
}

// Set adds the declarations of v.
func (l *Decls) Set(v string) error {
	return config.AppendKeyValues((*[]Decl)(l), v, ParseDecl)
}

// Validate reports declarations that clash (one wallet twice).
func (l Decls) Validate() error {
	seen := map[string]bool{}
	var errs []error
	for _, d := range l {
		if err := d.Validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[d.Wallet] {
			errs = append(errs, fmt.Errorf("wallet %s has two policies (--wallet-policy)", d.Wallet))
		}
		seen[d.Wallet] = true
	}
	return errors.Join(errs...)
}

// Policies are the declarations as the store writes them at serve start
// (store.WalletPolicySyncConfig).
func (l Decls) Policies() (map[string]store.WalletPolicy, error) {
	out := make(map[string]store.WalletPolicy, len(l))
	for _, d := range l {
		p, err := d.Spec.Policy()
		if err != nil {
			return nil, fmt.Errorf("policy of wallet %s: %w", d.Wallet, err)
		}
		out[d.Wallet] = p
	}
	return out, nil
}
