package store_test

import (
	"encoding/hex"
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
)

const (
	policyRecipient = "0x00000000000000000000000000000000000000c1"
	policyToken     = "0x00000000000000000000000000000000000000c2"
	policyAnyCall   = "0x00000000000000000000000000000000000000c3"
	transferSel     = "0xa9059cbb"
)

var testAudit = &store.AuditEntry{KeyName: "ops", Via: "api"}

func putPolicy(t *testing.T, st *store.Store, now time.Time, wallet string, p store.WalletPolicy) {
	t.Helper()
	_, err := st.WalletPolicyPut(t.Context(), store.WalletPolicyPutParams{Now: now, Wallet: wallet, Policy: p, Audit: testAudit})
	require.NoError(t, err)
}

// postTask stores a task of wallet "main" (TaskInsert, as the API does) and
// returns it, or the policy's refusal.
func postTask(t *testing.T, st *store.Store, now time.Time, to string, value int64, data string) (store.Task, *store.PolicyRefusedError) {
	t.Helper()
	raw, err := hex.DecodeString(data)
	require.NoError(t, err)
	task, _, err := st.TaskInsert(t.Context(), store.TaskInsertParams{
		Now: now, Wallet: "main", ChainID: taskChain, Sender: taskSender,
		Request: store.TaskRequest{To: to, Value: big.NewInt(value), Data: raw},
	})
	var refused *store.PolicyRefusedError
	if errors.As(err, &refused) {
		return store.Task{}, refused
	}
	require.NoError(t, err)
	return task, nil
}

func requireRefused(t *testing.T, rule string, refused *store.PolicyRefusedError) {
	t.Helper()
	require.NotNil(t, refused, "want a refusal by rule %s", rule)
	require.Equal(t, rule, refused.Rule, refused.Error())
}

func TestWalletPolicy_RecipientsAndContractsWithTheirSelectorsAreAnAllowList(t *testing.T) {
	t.Parallel()
	st, clk, _ := txRows(t)
	now := clk.Now()
	putPolicy(t, st, now, "main", store.WalletPolicy{
		Recipients: []string{policyRecipient},
		Contracts: map[string]map[string]string{
			policyToken:   {transferSel: "transfer(address,uint256)"},
			policyAnyCall: nil,
		},
	})
	transfer := "a9059cbb" + "00000000000000000000000000000000000000000000000000000000000000c1" + "0000000000000000000000000000000000000000000000000000000000000001"
	approve := "095ea7b3" + "00000000000000000000000000000000000000000000000000000000000000c1" + "0000000000000000000000000000000000000000000000000000000000000001"

	_, refused := postTask(t, st, now, policyRecipient, 5, "")
	require.Nil(t, refused, "a plain transfer to a listed recipient")
	_, refused = postTask(t, st, now, policyToken, 0, transfer)
	require.Nil(t, refused, "an allowed function of an allowed contract")
	_, refused = postTask(t, st, now, policyAnyCall, 0, approve)
	require.Nil(t, refused, "any function of a contract allowed whole")
	_, refused = postTask(t, st, now, policyAnyCall, 1, "")
	require.Nil(t, refused, "a plain transfer to a contract allowed whole")

	_, refused = postTask(t, st, now, taskTo, 1, "")
	requireRefused(t, store.RuleRecipient, refused)
	_, refused = postTask(t, st, now, policyToken, 1, "")
	requireRefused(t, store.RuleRecipient, refused) // a contract allowed some functions takes no plain transfer
	_, refused = postTask(t, st, now, policyRecipient, 0, transfer)
	requireRefused(t, store.RuleContract, refused) // a recipient takes transfers, not calls
	_, refused = postTask(t, st, now, taskTo, 0, transfer)
	requireRefused(t, store.RuleContract, refused)
	_, refused = postTask(t, st, now, policyToken, 0, approve)
	requireRefused(t, store.RuleSelector, refused)
	require.Equal(t, "0x095ea7b3", refused.Selector)
	_, refused = postTask(t, st, now, policyToken, 0, "a905")
	requireRefused(t, store.RuleSelector, refused) // data shorter than a selector

	recorded, err := st.WalletPolicyRefusals(t.Context(), "main", 10)
	require.NoError(t, err)
	require.Len(t, recorded, 6, "every refusal is recorded")
	require.Equal(t, store.RuleSelector, recorded[0].Rule)
	tasks, err := st.TaskList(t.Context(), store.TaskListParams{Wallet: "main", Limit: 100})
	require.NoError(t, err)
	require.Len(t, tasks, 4, "a refused task is not stored")
}

func TestWalletPolicy_AValueAboveTheLargestPerTransactionIsRefused(t *testing.T) {
	t.Parallel()
	st, clk, _ := txRows(t)
	putPolicy(t, st, clk.Now(), "main", store.WalletPolicy{MaxValuePerTx: big.NewInt(100)})
	_, refused := postTask(t, st, clk.Now(), taskTo, 100, "")
	require.Nil(t, refused)
	_, refused = postTask(t, st, clk.Now(), taskTo, 101, "")
	requireRefused(t, store.RuleMaxValue, refused)
	require.Equal(t, "100", refused.Limit.String())
	require.Equal(t, "101", refused.Requested.String())
}

func TestWalletPolicy_AValueWindowCountsLiveAndDoneTasksAndAnErrorACancelOrARevertGivesItsValueBack(t *testing.T) {
	t.Parallel()
	st, clk, f := txRows(t)
	ctx := t.Context()
	putPolicy(t, st, clk.Now(), "main", store.WalletPolicy{ValueCaps: []store.PolicyCap{{Window: time.Hour, Max: big.NewInt(10)}}})
	a, refused := postTask(t, st, clk.Now(), taskTo, 4, "")
	require.Nil(t, refused)
	clk.Advance(time.Minute)
	b, refused := postTask(t, st, clk.Now(), taskTo, 4, "")
	require.Nil(t, refused)
	f.FinishTask(b) // done counts
	_, refused = postTask(t, st, clk.Now(), taskTo, 3, "")
	requireRefused(t, store.RuleValueWindow, refused)
	require.Equal(t, []string{"10", "8", "3"}, []string{refused.Limit.String(), refused.Used.String(), refused.Requested.String()})
	require.Equal(t, time.Hour, refused.Window)

	f.CancelTask(a) // a cancelled waiting task gives its value back
	c, refused := postTask(t, st, clk.Now(), taskTo, 4, "")
	require.Nil(t, refused)
	_, refused = postTask(t, st, clk.Now(), taskTo, 3, "")
	requireRefused(t, store.RuleValueWindow, refused)

	_, err := st.TaskFail(ctx, store.TaskFailParams{Now: clk.Now(), ID: c.ID, Reason: "refused by the node"})
	require.NoError(t, err) // one ended in error gives it back too
	d, refused := postTask(t, st, clk.Now(), taskTo, 2, "")
	require.Nil(t, refused)
	at := f.StartTask(d)
	_, err = st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: clk.Now(), ChainID: at.ChainID, TxHash: at.TxHash, Final: true, Reverted: true})
	require.NoError(t, err) // and one that reverted on chain
	clk.Advance(30 * time.Minute)
	_, refused = postTask(t, st, clk.Now(), taskTo, 6, "")
	require.Nil(t, refused, "4 (b) + 6 = 10: the cap, not above it")

	// b leaves the window an hour after it was stored.
	clk.Advance(31 * time.Minute)
	_, refused = postTask(t, st, clk.Now(), taskTo, 4, "")
	require.Nil(t, refused, "b left the window; the task of 6 is still in it")
	_, refused = postTask(t, st, clk.Now(), taskTo, 1, "")
	requireRefused(t, store.RuleValueWindow, refused)
}

func TestWalletPolicy_AFeeWindowCountsMinedFeesAndTheWorstCaseInFlightAndStopsNewTasksOnceReached(t *testing.T) {
	t.Parallel()
	st, clk, f := txRows(t)
	ctx := t.Context()
	// testfactory.SignedTx: 21000 gas at a fee cap of 2 gwei, a worst
	// case of 42e12 wei.
	worst := big.NewInt(42_000_000_000_000)
	limit := new(big.Int).Mul(worst, big.NewInt(2))
	putPolicy(t, st, clk.Now(), "main", store.WalletPolicy{FeeCaps: []store.PolicyCap{{Window: 24 * time.Hour, Max: limit}}})
	a, refused := postTask(t, st, clk.Now(), taskTo, 0, "")
	require.Nil(t, refused)
	b, refused := postTask(t, st, clk.Now(), taskTo, 0, "")
	require.Nil(t, refused, "nothing spent yet")
	atA := f.StartTasks(0, a, b)[0]
	_, refused = postTask(t, st, clk.Now(), taskTo, 0, "")
	requireRefused(t, store.RuleFeeWindow, refused)
	require.Equal(t, limit.String(), refused.Used.String(), "two transactions in flight at their worst case")

	// a is mined at 1 gwei: what the chain charged replaces its worst case.
	_, err := st.AttemptConfirm(ctx, store.AttemptConfirmParams{Now: clk.Now(), ChainID: atA.ChainID, TxHash: atA.TxHash, Final: true,
		GasUsed: 21000, EffectiveGasPrice: big.NewInt(1_000_000_000)})
	require.NoError(t, err)
	_, refused = postTask(t, st, clk.Now(), taskTo, 0, "")
	require.Nil(t, refused, "21e12 spent and 42e12 in flight are below the cap")
	value, fees, err := st.WalletPolicySpend(ctx, store.WalletPolicySpendParams{Now: clk.Now(), Wallet: "main", ChainID: taskChain, Sender: taskSender,
		Policy: store.WalletPolicy{FeeCaps: []store.PolicyCap{{Window: 24 * time.Hour, Max: limit}}}})
	require.NoError(t, err)
	require.Empty(t, value)
	require.Equal(t, "63000000000000", fees[0].Used.String())

	clk.Advance(25 * time.Hour) // a's fee leaves the window; b is still in flight
	_, fees, err = st.WalletPolicySpend(ctx, store.WalletPolicySpendParams{Now: clk.Now(), Wallet: "main", ChainID: taskChain, Sender: taskSender,
		Policy: store.WalletPolicy{FeeCaps: []store.PolicyCap{{Window: 24 * time.Hour, Max: limit}}}})
	require.NoError(t, err)
	require.Equal(t, worst.String(), fees[0].Used.String())
}

func TestWalletPolicy_AReplayOfAStoredTaskIsAnsweredAsStoredWhateverThePolicySaysNow(t *testing.T) {
	t.Parallel()
	st, clk, _ := txRows(t)
	p := newTask(clk.Now(), 0, "k1")
	stored := insertTask(t, st, p)
	putPolicy(t, st, clk.Now(), "main", store.WalletPolicy{Recipients: []string{policyRecipient}})
	again, created, err := st.TaskInsert(t.Context(), p)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, stored.ID, again.ID)
	p.IdempotencyKey = "k2"
	_, _, err = st.TaskInsert(t.Context(), p)
	var refused *store.PolicyRefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, store.RuleContract, refused.Rule)
}

func TestWalletPolicy_TheAPIChangesItsOwnPoliciesAuditedAndTheConfigurationsNot(t *testing.T) {
	t.Parallel()
	st, clk, _ := txRows(t)
	ctx := t.Context()
	now := clk.Now()
	_, err := st.WalletPolicyGet(ctx, "main")
	require.ErrorIs(t, err, store.ErrNotFound)
	putPolicy(t, st, now, "main", store.WalletPolicy{MaxValuePerTx: big.NewInt(7)})
	got, err := st.WalletPolicyGet(ctx, "main")
	require.NoError(t, err)
	require.Equal(t, store.PolicyFromAPI, got.Source)
	require.Equal(t, "ops", got.UpdatedBy)
	require.Equal(t, "7", got.Policy.MaxValuePerTx.String())
	require.NoError(t, st.WalletPolicyDelete(ctx, store.WalletPolicyDeleteParams{Now: now, Wallet: "main", Audit: testAudit}))
	require.ErrorIs(t, st.WalletPolicyDelete(ctx, store.WalletPolicyDeleteParams{Now: now, Wallet: "main", Audit: testAudit}), store.ErrNotFound)

	require.NoError(t, st.WalletPolicySyncConfig(ctx, now, map[string]store.WalletPolicy{"cold": {MaxValuePerTx: big.NewInt(1)}}))
	got, err = st.WalletPolicyGet(ctx, "cold")
	require.NoError(t, err)
	require.Equal(t, store.PolicyFromConfig, got.Source)
	_, err = st.WalletPolicyPut(ctx, store.WalletPolicyPutParams{Now: now, Wallet: "cold", Policy: store.WalletPolicy{}, Audit: testAudit})
	require.ErrorIs(t, err, store.ErrPolicyConfigured)
	require.ErrorIs(t, st.WalletPolicyDelete(ctx, store.WalletPolicyDeleteParams{Now: now, Wallet: "cold", Audit: testAudit}), store.ErrPolicyConfigured)
	require.NoError(t, st.WalletPolicySyncConfig(ctx, now, nil))
	_, err = st.WalletPolicyGet(ctx, "cold")
	require.ErrorIs(t, err, store.ErrNotFound, "a policy the configuration no longer sets is gone")

	audit, err := st.AuditList(ctx, 0, 10)
	require.NoError(t, err)
	var actions []string
	for _, a := range audit {
		actions = append(actions, a.Action+" "+a.Target+" "+a.KeyName)
	}
	require.Equal(t, []string{"policy.delete wallet/main/policy ops", "policy.put wallet/main/policy ops"}, actions)

	_, err = st.WalletPolicyPut(ctx, store.WalletPolicyPutParams{Now: now, Wallet: "main", Audit: testAudit,
		Policy: store.WalletPolicy{ValueCaps: []store.PolicyCap{{Window: 0, Max: big.NewInt(1)}}}})
	require.ErrorContains(t, err, "value_caps[0].window")
}

func TestWalletPolicy_TheTableRefusesAMalformedPolicy(t *testing.T) {
	t.Parallel()
	st, clk, _ := txRows(t)
	for _, bad := range []string{
		`[]`, `{"other": 1}`, `{"recipients": ["0xAB"]}`, `{"recipients": "0x00000000000000000000000000000000000000c1"}`,
		`{"contracts": {"0x00000000000000000000000000000000000000c1": {"0xa9059cb": ""}}}`,
		`{"contracts": {"0x00000000000000000000000000000000000000c1": []}}`,
		`{"max_value_per_tx": "-1"}`, `{"max_value_per_tx": 5}`,
		`{"value_caps": [{"seconds": 0, "max": "1"}]}`, `{"fee_caps": [{"seconds": 60, "max": "1.5"}]}`,
		`{"fee_caps": [{"seconds": 1.5, "max": "1"}]}`, `{"fee_caps": [5]}`, `{"value_caps": [{"seconds": 60, "max": "1", "x": 1}]}`,
		`{"recipients": ["0x00000000000000000000000000000000000000C1"]}`,
	} {
		err := execUndone(t, st, `INSERT INTO ledgerq.wallet_policies (wallet_id, policy, source, updated_by, created_at, updated_at)
			VALUES ('main', $1::jsonb, 'api', 'x', $2, $2)`, bad, clk.Now())
		require.ErrorContains(t, err, "wallet_policies_policy_shape", bad)
	}
	require.NoError(t, execUndone(t, st, `INSERT INTO ledgerq.wallet_policies (wallet_id, policy, source, updated_by, created_at, updated_at)
		VALUES ('main', $1::jsonb, 'api', 'x', $2, $2)`,
		`{"recipients": ["0x00000000000000000000000000000000000000c1"], "contracts": {"0x00000000000000000000000000000000000000c2": null, "0x00000000000000000000000000000000000000c3": {"0xa9059cbb": "transfer(address,uint256)"}}, "max_value_per_tx": "5", "value_caps": [{"seconds": 60, "max": "10"}], "fee_caps": []}`,
		clk.Now()))
}

func TestWalletPolicy_ConcurrentIntakesRacingForAValueCapNeverPassIt(t *testing.T) {
	t.Parallel()
	db, clk, _ := committedRows(t)
	st := db.Store
	putPolicy(t, st, clk.Now(), "main", store.WalletPolicy{ValueCaps: []store.PolicyCap{{Window: 24 * time.Hour, Max: big.NewInt(1050)}}})
	const clients = 30
	var wg sync.WaitGroup
	refusals := make(chan *store.PolicyRefusedError, clients)
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			_, _, err := st.TaskInsert(t.Context(), store.TaskInsertParams{
				Now: clk.Now(), Wallet: "main", ChainID: taskChain, Sender: taskSender,
				Request: store.TaskRequest{To: taskTo, Value: big.NewInt(100)},
			})
			var refused *store.PolicyRefusedError
			switch {
			case errors.As(err, &refused):
				refusals <- refused
			case err != nil:
				errs <- err
			}
		})
	}
	wg.Wait()
	close(refusals)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, refusals, clients-10)
	for r := range refusals {
		require.Equal(t, store.RuleValueWindow, r.Rule)
	}
	value, _, err := st.WalletPolicySpend(t.Context(), store.WalletPolicySpendParams{Now: clk.Now(), Wallet: "main",
		Policy: store.WalletPolicy{ValueCaps: []store.PolicyCap{{Window: 24 * time.Hour, Max: big.NewInt(1050)}}}})
	require.NoError(t, err)
	require.Equal(t, "1000", value[0].Used.String())
}

func TestWalletPolicy_ASpeedUpWhoseFeesWouldPassAFeeCapIsRefusedAndRecorded(t *testing.T) {
	t.Parallel()
	st, clk, f := txRows(t)
	task, refused := postTask(t, st, clk.Now(), taskTo, 0, "")
	require.Nil(t, refused)
	f.StartTask(task) // 21000 gas at a fee cap of 2 gwei: 42e12 at worst
	putPolicy(t, st, clk.Now(), "main", store.WalletPolicy{FeeCaps: []store.PolicyCap{{Window: time.Hour, Max: big.NewInt(50_000_000_000_000)}}})
	speedUp := func(feeCap, tip int64) error {
		_, err := st.TaskRequestSpeedUp(t.Context(), store.TaskSpeedUpParams{Now: clk.Now(), Wallet: "main", ID: task.ID,
			Fees: store.SpeedUpFees{FeeCap: big.NewInt(feeCap), TipCap: big.NewInt(tip)}})
		return err
	}
	err := speedUp(3_000_000_000, 2_000_000_000) // 63e12 at worst
	var r *store.PolicyRefusedError
	require.ErrorAs(t, err, &r)
	require.Equal(t, store.RuleFeeWindow, r.Rule)
	require.Equal(t, "42000000000000", r.Used.String())
	require.Equal(t, "21000000000000", r.Requested.String(), "what the speed-up adds to the worst case")
	recorded, err := st.WalletPolicyRefusals(t.Context(), "main", 10)
	require.NoError(t, err)
	require.Len(t, recorded, 1)
	require.Equal(t, store.RuleFeeWindow, recorded[0].Rule)

	require.NoError(t, speedUp(2_300_000_000, 1_100_000_000), "48.3e12 at worst: within the cap")
}
