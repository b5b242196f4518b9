package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"time"

	"github.com/ledgerq/ledgerq/internal/store/internal/dbsqlc"
)

// WalletPolicy is what a wallet may send (ledgerq.wallet_policies). The
// zero WalletPolicy restricts nothing; each field set is a rule:
//
//   - Recipients and Contracts, when either lists an address, are an
//     allow-list: a plain transfer (no data) goes to a listed recipient or a
//     contract allowed whole; a call (data) goes to a listed contract, and,
//     when the contract lists selectors, its data starts with one of them.
//   - MaxValuePerTx bounds one task's value.
//   - ValueCaps bound the value of the wallet's tasks within each rolling
//     window (waiting, executing and done ones; an error or a revert gives
//     its value back).
//   - FeeCaps bound the fees of the wallet's transactions within each
//     window: mined ones at what the chain charged, those in flight at
//     their worst case. A cap stops new tasks once reached; what is in
//     flight may pass it by its own fees.
type WalletPolicy struct {
	// Recipients are lower-case hex addresses.
	Recipients []string
	// Contracts maps a lower-case hex address to its allowed selectors
	// ("0x" and 8 hex digits) with the signature each was given as (""
	// for a bare selector); a nil map allows every function.
	Contracts     map[string]map[string]string
	MaxValuePerTx *big.Int
	ValueCaps     []PolicyCap
	FeeCaps       []PolicyCap
}

// PolicyCap is an amount of wei per rolling window.
type PolicyCap struct {
	// Window is whole seconds, 1 s to 366 days.
	Window time.Duration
	Max    *big.Int
}

// MaxPolicyWindow is the longest window a cap may have.
const MaxPolicyWindow = 366 * 24 * time.Hour

// Policy rules, as refusals name them (the API's "rule").
const (
	RuleRecipient   = "recipient"
	RuleContract    = "contract"
	RuleSelector    = "selector"
	RuleMaxValue    = "max_value"
	RuleValueWindow = "value_window"
	RuleFeeWindow   = "fee_window"
)

var selectorHex = regexp.MustCompile(`^0x[0-9a-f]{8}$`)

// Validate reports the first field that the table would refuse, named as
// the API names it.
func (p WalletPolicy) Validate() error {
	for i, r := range p.Recipients {
		if !hexAddress.MatchString(r) || r != lowerHex(r) {
			return fmt.Errorf("recipients[%d]: %q is not a lower-case hex address", i, r)
		}
	}
	for a, sels := range p.Contracts {
		if !hexAddress.MatchString(a) || a != lowerHex(a) {
			return fmt.Errorf("contracts: %q is not a lower-case hex address", a)
		}
		for sel := range sels {
			if !selectorHex.MatchString(sel) {
				return fmt.Errorf("contracts: %s: selector %q is not 0x and 8 lower-case hex digits", a, sel)
			}
		}
	}
	if v := p.MaxValuePerTx; v != nil && (v.Sign() < 0 || v.BitLen() > 256) {
		return fmt.Errorf("max_value_per_tx: %s is not a uint256", v)
	}
	for name, caps := range map[string][]PolicyCap{"value_caps": p.ValueCaps, "fee_caps": p.FeeCaps} {
		for i, c := range caps {
			switch {
			case c.Window < time.Second || c.Window > MaxPolicyWindow || c.Window%time.Second != 0:
				return fmt.Errorf("%s[%d].window: %s is not whole seconds from 1s to %s", name, i, c.Window, MaxPolicyWindow)
			case c.Max == nil || c.Max.Sign() < 0 || c.Max.BitLen() > 256:
				return fmt.Errorf("%s[%d].max: %v is not a uint256", name, i, c.Max)
			}
		}
	}
	return nil
}

// policyJSON is a WalletPolicy as the table stores it.
type policyJSON struct {
	Recipients    []string                     `json:"recipients,omitempty"`
	Contracts     map[string]map[string]string `json:"contracts,omitempty"`
	MaxValuePerTx string                       `json:"max_value_per_tx,omitempty"`
	ValueCaps     []capJSON                    `json:"value_caps,omitempty"`
	FeeCaps       []capJSON                    `json:"fee_caps,omitempty"`
}

type capJSON struct {
	Seconds int64  `json:"seconds"`
	Max     string `json:"max"`
}

func (p WalletPolicy) marshal() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	j := policyJSON{Recipients: p.Recipients, Contracts: p.Contracts}
	if p.MaxValuePerTx != nil {
		j.MaxValuePerTx = p.MaxValuePerTx.String()
	}
	caps := func(cs []PolicyCap) []capJSON {
		out := make([]capJSON, len(cs))
		for i, c := range cs {
			out[i] = capJSON{Seconds: int64(c.Window / time.Second), Max: c.Max.String()}
		}
		return out
	}
	j.ValueCaps, j.FeeCaps = caps(p.ValueCaps), caps(p.FeeCaps)
	return json.Marshal(j)
}

func policyFromJSON(raw []byte) (WalletPolicy, error) {
	var j policyJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return WalletPolicy{}, fmt.Errorf("reading a stored policy: %w", err)
	}
	p := WalletPolicy{Recipients: j.Recipients, Contracts: j.Contracts}
	if j.MaxValuePerTx != "" {
		p.MaxValuePerTx, _ = new(big.Int).SetString(j.MaxValuePerTx, 10)
	}
	caps := func(cs []capJSON) []PolicyCap {
		var out []PolicyCap
		for _, c := range cs {
			m, _ := new(big.Int).SetString(c.Max, 10)
			out = append(out, PolicyCap{Window: time.Duration(c.Seconds) * time.Second, Max: m})
		}
		return out
	}
	p.ValueCaps, p.FeeCaps = caps(j.ValueCaps), caps(j.FeeCaps)
	return p, nil
}

// Policy sources (wallet_policies.source).
const (
	PolicyFromConfig = "config"
	PolicyFromAPI    = "api"
)

// StoredPolicy is one row of ledgerq.wallet_policies.
type StoredPolicy struct {
	Wallet string
	Policy WalletPolicy
	// Source is PolicyFromConfig or PolicyFromAPI.
	Source    string
	UpdatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func storedPolicyFromRow(r dbsqlc.LedgerqWalletPolicy) (StoredPolicy, error) {
	p, err := policyFromJSON(r.Policy)
	if err != nil {
		return StoredPolicy{}, fmt.Errorf("wallet %q: %w", r.WalletID, err)
	}
	return StoredPolicy{Wallet: r.WalletID, Policy: p, Source: r.Source, UpdatedBy: r.UpdatedBy,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}, nil
}

// ErrPolicyConfigured is the refusal to change, through the API, a policy
// the configuration sets (--wallet-policy): the API's 409.
var ErrPolicyConfigured = errors.New("the wallet's policy is set by the configuration (--wallet-policy)")

// PolicyRefusedError is a task refused by its wallet's policy. Limit, Used
// and Requested are wei (nil when the rule has none); Window is the cap's
// window for the window rules; Selector the refused call's selector.
type PolicyRefusedError struct {
	Wallet      string
	Rule        string
	Limit, Used *big.Int
	Requested   *big.Int
	Window      time.Duration
	Selector    string
	Recipient   string
}

func (e *PolicyRefusedError) Error() string {
	switch e.Rule {
	case RuleRecipient:
		return fmt.Sprintf("refused by the policy of wallet %q: %s is not an allowed recipient", e.Wallet, e.Recipient)
	case RuleContract:
		return fmt.Sprintf("refused by the policy of wallet %q: %s is not an allowed contract", e.Wallet, e.Recipient)
	case RuleSelector:
		return fmt.Sprintf("refused by the policy of wallet %q: function %s is not allowed on contract %s", e.Wallet, e.Selector, e.Recipient)
	case RuleMaxValue:
		return fmt.Sprintf("refused by the policy of wallet %q: value %s wei is above the largest value per transaction, %s wei", e.Wallet, e.Requested, e.Limit)
	case RuleValueWindow:
		return fmt.Sprintf("refused by the policy of wallet %q: value %s wei would bring the value sent in %s to more than its cap, %s wei (%s used)",
			e.Wallet, e.Requested, e.Window, e.Limit, e.Used)
	case RuleFeeWindow:
		return fmt.Sprintf("refused by the policy of wallet %q: the fees of %s reached their cap, %s wei (%s used, counting transactions in flight at their worst case)",
			e.Wallet, e.Window, e.Limit, e.Used)
	}
	return fmt.Sprintf("refused by the policy of wallet %q: rule %s", e.Wallet, e.Rule)
}

// refusalJSON is ledgerq.wallet_policy_refusal's answer.
type refusalJSON struct {
	Rule          string `json:"rule"`
	Limit         string `json:"limit"`
	Used          string `json:"used"`
	Requested     string `json:"requested"`
	WindowSeconds int64  `json:"window_seconds"`
	Selector      string `json:"selector"`
}

func refusalFromJSON(wallet, to string, raw []byte) (*PolicyRefusedError, error) {
	var j refusalJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("reading the policy refusal of wallet %q: %w", wallet, err)
	}
	num := func(s string) *big.Int {
		if s == "" {
			return nil
		}
		v, _ := new(big.Int).SetString(s, 10)
		return v
	}
	return &PolicyRefusedError{Wallet: wallet, Rule: j.Rule, Limit: num(j.Limit), Used: num(j.Used), Requested: num(j.Requested),
		Window: time.Duration(j.WindowSeconds) * time.Second, Selector: j.Selector, Recipient: to}, nil
}

// insertUnderPolicy stores a task of a wallet whose policy TaskInsert's
// statement would not pass over, in the transaction q is bound to: the
// policy's row lock, its rules (ledgerq.wallet_policy_refusal, which the
// SQL function ledgerq.send_tx can share), then the insert. A refusal is
// returned as refused with a nil error, so that the caller commits its
// record. A replay under a stored idempotency key is never refused: the
// insert then stores nothing (ErrNotFound, as a conflict on the key).
func insertUnderPolicy(ctx context.Context, q *dbsqlc.Queries, ins dbsqlc.TaskInsertParams) (row dbsqlc.LedgerqWalletTask, refused *PolicyRefusedError, err error) {
	raw, err := one(q.WalletPolicyRefusal(ctx, dbsqlc.WalletPolicyRefusalParams{
		WalletID: ins.WalletID, ChainID: ins.ChainID, Sender: ins.Sender, ToAddress: ins.ToAddress, ValueWei: ins.ValueWei,
		Data: ins.Data, IdempotencyKey: ins.IdempotencyKey, Now: ins.Now,
	}))
	if err != nil {
		return row, nil, fmt.Errorf("applying the policy of wallet %q: %w", ins.WalletID, err)
	}
	if len(raw) > 0 && string(raw) != "null" {
		refused, err := refusalFromJSON(ins.WalletID, ins.ToAddress, raw)
		return row, refused, err
	}
	ins.PolicyChecked = true
	row, err = one(q.TaskInsert(ctx, ins))
	return row, nil, err
}

// WalletPolicyGet returns the wallet's policy, or ErrNotFound when it has
// none (it is unrestricted).
func (s *Store) WalletPolicyGet(ctx context.Context, wallet string) (StoredPolicy, error) {
	row, err := one(s.q.WalletPolicyGet(ctx, wallet))
	if err != nil {
		return StoredPolicy{}, fmt.Errorf("reading the policy of wallet %q: %w", wallet, err)
	}
	return storedPolicyFromRow(row)
}

// WalletPolicyList returns every wallet's policy, by wallet.
func (s *Store) WalletPolicyList(ctx context.Context) ([]StoredPolicy, error) {
	rows, err := s.q.WalletPolicyList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing wallet policies: %w", err)
	}
	out := make([]StoredPolicy, 0, len(rows))
	for _, r := range rows {
		p, err := storedPolicyFromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// WalletPolicyPutParams set a wallet's policy through the API.
type WalletPolicyPutParams struct {
	Now    time.Time
	Wallet string
	Policy WalletPolicy
	// Audit records the change in the same transaction (required).
	Audit *AuditEntry
}

// WalletPolicyPut sets the wallet's policy, audited as policy.put. A
// policy the configuration sets is left alone: ErrPolicyConfigured.
func (s *Store) WalletPolicyPut(ctx context.Context, p WalletPolicyPutParams) (StoredPolicy, error) {
	raw, err := p.Policy.marshal()
	if err != nil {
		return StoredPolicy{}, err
	}
	if p.Audit == nil {
		return StoredPolicy{}, fmt.Errorf("setting the policy of wallet %q: no audit entry", p.Wallet)
	}
	by := p.Audit.KeyName
	if by == "" {
		by = "anonymous"
	}
	var out StoredPolicy
	err = s.withTx(ctx, func(q *dbsqlc.Queries) error {
		row, err := one(q.WalletPolicyPutAPI(ctx, dbsqlc.WalletPolicyPutAPIParams{WalletID: p.Wallet, Policy: raw, UpdatedBy: by, Now: p.Now}))
		switch {
		case errors.Is(err, ErrNotFound):
			return ErrPolicyConfigured
		case err != nil:
			return fmt.Errorf("setting the policy of wallet %q: %w", p.Wallet, err)
		}
		if out, err = storedPolicyFromRow(row); err != nil {
			return err
		}
		return auditInsert(ctx, q, p.Audit.with(p.Now, "policy.put", "wallet/"+p.Wallet+"/policy", map[string]any{"policy": json.RawMessage(raw)}))
	})
	return out, err
}

// WalletPolicyDeleteParams remove a wallet's policy through the API.
type WalletPolicyDeleteParams struct {
	Now    time.Time
	Wallet string
	Audit  *AuditEntry
}

// WalletPolicyDelete removes the wallet's policy (the wallet is then
// unrestricted), audited as policy.delete. ErrNotFound: it had none;
// ErrPolicyConfigured: the configuration sets it.
func (s *Store) WalletPolicyDelete(ctx context.Context, p WalletPolicyDeleteParams) error {
	if p.Audit == nil {
		return fmt.Errorf("removing the policy of wallet %q: no audit entry", p.Wallet)
	}
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		row, err := one(q.WalletPolicyDeleteAPI(ctx, p.Wallet))
		switch {
		case errors.Is(err, ErrNotFound):
			if _, err := one(q.WalletPolicyGet(ctx, p.Wallet)); err == nil {
				return ErrPolicyConfigured
			}
			return fmt.Errorf("removing the policy of wallet %q: %w", p.Wallet, ErrNotFound)
		case err != nil:
			return fmt.Errorf("removing the policy of wallet %q: %w", p.Wallet, err)
		}
		return auditInsert(ctx, q, p.Audit.with(p.Now, "policy.delete", "wallet/"+p.Wallet+"/policy", map[string]any{"policy": json.RawMessage(row.Policy)}))
	})
}

// WalletPolicySyncConfig writes the configuration's policies at serve
// start, marked as from the configuration (the API cannot change them),
// and removes those the configuration set before and sets no more. A
// policy set through the API for a wallet the configuration names is
// replaced.
func (s *Store) WalletPolicySyncConfig(ctx context.Context, now time.Time, policies map[string]WalletPolicy) error {
	wallets := make([]string, 0, len(policies))
	raws := map[string][]byte{}
	for w, p := range policies {
		raw, err := p.marshal()
		if err != nil {
			return fmt.Errorf("policy of wallet %q: %w", w, err)
		}
		wallets, raws[w] = append(wallets, w), raw
	}
	slices.Sort(wallets)
	return s.withTx(ctx, func(q *dbsqlc.Queries) error {
		for _, w := range wallets {
			if err := q.WalletPolicyPutConfig(ctx, dbsqlc.WalletPolicyPutConfigParams{WalletID: w, Policy: raws[w], Now: now}); err != nil {
				return fmt.Errorf("writing the configured policy of wallet %q: %w", w, err)
			}
		}
		if _, err := q.WalletPolicyDeleteConfigExcept(ctx, wallets); err != nil {
			return fmt.Errorf("removing policies the configuration no longer sets: %w", err)
		}
		return nil
	})
}

// PolicySpend is a cap's use now.
type PolicySpend struct {
	Cap PolicyCap
	// Used is the wei the cap counts within its window now.
	Used *big.Int
}

// WalletPolicySpendParams name a wallet whose caps' use is read.
type WalletPolicySpendParams struct {
	Now     time.Time
	Wallet  string
	ChainID int64
	Sender  string
	Policy  WalletPolicy
}

// WalletPolicySpend reads the use of each of the policy's caps, by the
// same SQL functions the intake applies (ledgerq.wallet_value_spent and
// ledgerq.wallet_fees_spent).
func (s *Store) WalletPolicySpend(ctx context.Context, p WalletPolicySpendParams) (value, fees []PolicySpend, err error) {
	for _, c := range p.Policy.ValueCaps {
		n, err := one(s.q.WalletPolicyValueSpent(ctx, dbsqlc.WalletPolicyValueSpentParams{WalletID: p.Wallet, Since: p.Now.Add(-c.Window)}))
		if err != nil {
			return nil, nil, fmt.Errorf("reading the value spent by wallet %q: %w", p.Wallet, err)
		}
		value = append(value, PolicySpend{Cap: c, Used: bigFromNumeric(n)})
	}
	for _, c := range p.Policy.FeeCaps {
		n, err := one(s.q.WalletPolicyFeesSpent(ctx, dbsqlc.WalletPolicyFeesSpentParams{ChainID: p.ChainID, Sender: lowerHex(p.Sender), Since: p.Now.Add(-c.Window)}))
		if err != nil {
			return nil, nil, fmt.Errorf("reading the fees spent by wallet %q: %w", p.Wallet, err)
		}
		fees = append(fees, PolicySpend{Cap: c, Used: bigFromNumeric(n)})
	}
	return value, fees, nil
}

// speedUpWithinFeeCaps refuses a speed-up of task whose live attempt
// (gas limit and fee cap) would be replaced by one with feeCap, when the
// wallet's fees within a fee cap's window, counting the replacement at its
// worst case in place of the live attempt's, would pass the cap. The
// refusal is recorded by the caller after its transaction rolled back.
func speedUpWithinFeeCaps(ctx context.Context, q *dbsqlc.Queries, now time.Time, task Task, gasLimit int64, liveFeeCap, feeCap *big.Int) (*PolicyRefusedError, error) {
	row, err := one(q.WalletPolicyGet(ctx, task.Wallet))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the policy of wallet %q: %w", task.Wallet, err)
	}
	pol, err := storedPolicyFromRow(row)
	if err != nil {
		return nil, err
	}
	gas := big.NewInt(gasLimit)
	more := new(big.Int).Sub(new(big.Int).Mul(gas, feeCap), new(big.Int).Mul(gas, liveFeeCap))
	for _, c := range pol.Policy.FeeCaps {
		n, err := one(q.WalletPolicyFeesSpent(ctx, dbsqlc.WalletPolicyFeesSpentParams{ChainID: task.ChainID, Sender: task.Sender, Since: now.Add(-c.Window)}))
		if err != nil {
			return nil, fmt.Errorf("reading the fees spent by wallet %q: %w", task.Wallet, err)
		}
		used := bigFromNumeric(n)
		if new(big.Int).Add(used, more).Cmp(c.Max) > 0 {
			return &PolicyRefusedError{Wallet: task.Wallet, Rule: RuleFeeWindow, Limit: c.Max, Used: used, Requested: more, Window: c.Window, Recipient: task.Request.To}, nil
		}
	}
	return nil, nil
}

// recordRefusal records a refusal decided outside
// ledgerq.wallet_policy_refusal.
func (s *Store) recordRefusal(ctx context.Context, now time.Time, r *PolicyRefusedError, value *big.Int) error {
	j := map[string]any{"rule": r.Rule}
	for k, v := range map[string]*big.Int{"limit": r.Limit, "used": r.Used, "requested": r.Requested} {
		if v != nil {
			j[k] = v.String()
		}
	}
	if r.Window > 0 {
		j["window_seconds"] = int64(r.Window / time.Second)
	}
	raw, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return s.q.WalletPolicyRefusalInsert(ctx, dbsqlc.WalletPolicyRefusalInsertParams{
		WalletID: r.Wallet, At: now, Rule: r.Rule, ToAddress: lowerHex(r.Recipient), ValueWei: numericFromBig(value), Detail: raw,
	})
}

// PolicyRefusal is a recorded refusal (ledgerq.wallet_policy_refusals).
type PolicyRefusal struct {
	At     time.Time
	Rule   string
	To     string
	Value  *big.Int
	Detail json.RawMessage
}

// WalletPolicyRefusals returns the wallet's latest max refusals, newest
// first.
func (s *Store) WalletPolicyRefusals(ctx context.Context, wallet string, max int) ([]PolicyRefusal, error) {
	rows, err := s.q.WalletPolicyRefusalList(ctx, dbsqlc.WalletPolicyRefusalListParams{WalletID: wallet, Max: int32(max)})
	if err != nil {
		return nil, fmt.Errorf("listing the policy refusals of wallet %q: %w", wallet, err)
	}
	out := make([]PolicyRefusal, len(rows))
	for i, r := range rows {
		out[i] = PolicyRefusal{At: r.At.UTC(), Rule: r.Rule, To: r.ToAddress, Value: bigFromNumeric(r.ValueWei), Detail: r.Detail}
	}
	return out, nil
}

// WalletPolicyRefusalsDeleteOld deletes up to max policy refusals recorded
// before before, oldest first (the wallet lane's retention), and returns
// how many.
func (s *Store) WalletPolicyRefusalsDeleteOld(ctx context.Context, before time.Time, max int) (int64, error) {
	n, err := s.q.WalletPolicyRefusalDeleteOld(ctx, dbsqlc.WalletPolicyRefusalDeleteOldParams{Before: before, Max: int32(max)})
	if err != nil {
		return 0, fmt.Errorf("deleting old policy refusals: %w", err)
	}
	return n, nil
}
