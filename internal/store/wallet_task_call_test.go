package store_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testdb"
	"github.com/ledgerq/ledgerq/internal/testfactory"
)

// A task named by a call stores the call beside its data and reads it back,
// ABI included; a replay with the same call is the same task, and one with
// other arguments under the same key is a conflict.
func TestTask_InsertStoresTheCallAndItsReplayMustMatchIt(t *testing.T) {
	t.Parallel()
	st := testdb.NewTx(t)
	ctx := t.Context()
	p := newTask(testfactory.Start(), 0, "call-key")
	abi := json.RawMessage(`[{"type":"function","name":"transfer","inputs":[{"name":"to","type":"address"},{"name":"value","type":"uint256"}]}]`)
	p.Request.Call = &store.TaskCall{Function: "transfer(address,uint256)", Method: "transfer", ABI: abi, Args: json.RawMessage(`["0x00000000000000000000000000000000000000bB","1000"]`)}
	task := insertTask(t, st, p)
	require.NotNil(t, task.Request.Call)
	require.Equal(t, "transfer(address,uint256)", task.Request.Call.Function)
	require.Equal(t, "transfer", task.Request.Call.Method)
	require.JSONEq(t, string(abi), string(task.Request.Call.ABI))
	require.JSONEq(t, `["0x00000000000000000000000000000000000000bB","1000"]`, string(task.Request.Call.Args))

	got, err := st.TaskGet(ctx, task.Wallet, task.ID)
	require.NoError(t, err)
	require.Equal(t, task.Request.Call, got.Request.Call)

	again, created, err := st.TaskInsert(ctx, p)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, task.ID, again.ID)

	other := p
	call := *p.Request.Call
	call.Args = json.RawMessage(`["0x00000000000000000000000000000000000000bB","1001"]`)
	other.Request.Call = &call
	_, _, err = st.TaskInsert(ctx, other)
	var conflict *store.IdempotencyConflictError
	require.ErrorAs(t, err, &conflict, "the same key with other arguments")

	plain := newTask(testfactory.Start(), 0, "")
	require.Nil(t, insertTask(t, st, plain).Request.Call, "a task of data alone has no call")
}
