package httpapi_test

import (
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/store"
	"github.com/ledgerq/ledgerq/internal/testcontracts"
)

// callAnswer is a task answer with its data and call.
type callAnswer struct {
	Task struct {
		ID   string `json:"id"`
		Data string `json:"data"`
		Call *struct {
			Function string          `json:"function"`
			Method   string          `json:"method"`
			ABI      json.RawMessage `json:"abi"`
			Args     json.RawMessage `json:"args"`
		} `json:"call"`
	} `json:"task"`
	Tasks []struct {
		Call *struct {
			ABI json.RawMessage `json:"abi"`
		} `json:"call"`
	} `json:"tasks"`
}

func decodeCall(t *testing.T, resp httpResult) callAnswer {
	t.Helper()
	var a callAnswer
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &a), resp.Body)
	return a
}

// A send-tx named by a signature, or by an ABI and a method, stores the
// encoded data (what the contract's own ABI packs) and the call, and the
// answer, the task read back and the list show it (the list without the
// ABI).
func TestWallets_SendTxByFunctionOrABIStoresTheDataAndShowsTheCall(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	want, err := testcontracts.ABI(testcontracts.TestToken).Pack("transfer", common.HexToAddress(recipient), big.NewInt(1000))
	require.NoError(t, err)
	tokenABI := string(testcontracts.ABIJSON(testcontracts.TestToken))
	args := `["` + recipient + `","1000"]`
	normal := `["` + common.HexToAddress(recipient).Hex() + `","1000"]`

	for name, body := range map[string]string{
		"function": `{"to":"` + recipient + `","function":"transfer(address,uint256)","args":` + args + `}`,
		"abi":      `{"to":"` + recipient + `","abi":` + tokenABI + `,"method":"transfer","args":["` + recipient + `",1000]}`,
	} {
		resp := f.sendTx("?task=true", body)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s: %s", name, resp.Body)
		a := decodeCall(t, resp)
		require.Equal(t, "0x"+hex.EncodeToString(want), a.Task.Data, name)
		require.NotNil(t, a.Task.Call, name)
		require.Equal(t, "transfer(address,uint256)", a.Task.Call.Function, name)
		require.JSONEq(t, normal, string(a.Task.Call.Args), name)

		stored := f.task(a.Task.ID)
		require.Equal(t, want, stored.Request.Data, name)
		require.NotNil(t, stored.Request.Call, name)

		read := decodeCall(t, f.call(http.MethodGet, "/v1/wallets/main/tasks/"+a.Task.ID, nil, bearer(f.key)...))
		require.Equal(t, a.Task.Call.Function, read.Task.Call.Function, name)
		if name == "abi" {
			require.Equal(t, "transfer", read.Task.Call.Method)
			require.JSONEq(t, tokenABI, string(read.Task.Call.ABI), "the ABI is kept for decoding")
		} else {
			require.Empty(t, read.Task.Call.Method)
			require.Empty(t, read.Task.Call.ABI)
		}
	}
	list := decodeCall(t, f.call(http.MethodGet, "/v1/wallets/main/tasks", nil, bearer(f.key)...))
	require.Len(t, list.Tasks, 2)
	for _, task := range list.Tasks {
		require.NotNil(t, task.Call)
		require.Empty(t, task.Call.ABI, "lists leave the ABI out, as they leave the data out")
	}
}

// A bad call is a 400 that names the field or argument, and nothing is
// stored.
func TestWallets_SendTxRefusesABadCallNamingTheArgument(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	to := `"to":"` + recipient + `"`
	for _, tc := range []struct {
		body   string
		status int
		msg    string
	}{
		{`{` + to + `,"function":"f(address,uint8)","args":["` + recipient + `",300]}`, 400, "field args[1]: 300 does not fit uint8"},
		{`{` + to + `,"function":"f(int8)","args":[-129]}`, 400, "field args[0]: -129 does not fit int8"},
		{`{` + to + `,"function":"transfer(address,uint256)","args":["` + recipient + `"]}`, 400, "field args: function transfer(address,uint256) takes 2 arguments, got 1"},
		{`{` + to + `,"function":"transfer(address,uint256)","args":["` + recipient + `",1],"data":"0x"}`, 400, "field data: not with function or abi"},
		{`{` + to + `,"abi":[],"method":"f","data":"0xcafe"}`, 400, "field data: not with function or abi"},
		{`{` + to + `,"function":"f()","abi":[],"method":"f"}`, 400, "field function: give function, or abi and method, not both"},
		{`{` + to + `,"args":[1]}`, 400, "field function: required"},
		{`{` + to + `,"method":"f"}`, 400, "field abi: required with method"},
		{`{` + to + `,"abi":{"type":"function","name":"f","inputs":[]}}`, 400, "field method: required with abi"},
		{`{` + to + `,"function":"transfer"}`, 400, "field function: must be a name"},
		{`{` + to + `,"function":"f(uint256)","args":"1"}`, 400, "field args: must be an array"},
		{`{` + to + `,"function":"f(uint256[])","args":[` + strings.Repeat("[", 9) + strings.Repeat("]", 9) + `]}`, 400, "field args: nested deeper than 8"},
		{`{` + to + `,"function":"f(uint8[])","args":[[` + strings.TrimSuffix(strings.Repeat("1,", 2000), ",") + `]]}`, 400, "field args: more than 1024 values"},
		{`{` + to + `,"function":"f(string)","args":["` + strings.Repeat("x", 300<<10) + `"]}`, 413, "more than 131072"},
		{`{` + to + `,"function":"f(string)","args":["` + strings.Repeat("\\u0001", 60<<10) + `"]}`, 413, "fields abi and args: the call is"},
		{`{` + to + `,"function":"f(uint256)","args":[1.5]}`, 400, "field args[0]: JSON number 1.5 is not a whole number"},
		{`{` + to + `,"function":"f(uint256)","args":[9007199254740993]}`, 400, "beyond 2^53-1"},
	} {
		resp := f.sendTx("?task=true", tc.body)
		require.Equal(t, tc.status, resp.StatusCode, "%.200s: %s", tc.body, resp.Body)
		require.Contains(t, resp.Body, tc.msg, "%.200s", tc.body)
	}
	tasks, err := f.db.Store.TaskList(t.Context(), store.TaskListParams{Wallet: "main", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, tasks, "nothing is stored")
}

// A replay with the same call under the Idempotency-Key is the same task,
// whatever the spelling of its values; one with other arguments is 422.
func TestWallets_SendTxCallReplayIsTheSameTaskAndOtherArgumentsAre422(t *testing.T) {
	t.Parallel()
	f := setupWallets(t)
	body := func(amount string) string {
		return `{"to":"` + recipient + `","function":"transfer(address,uint256)","args":["` + recipient + `",` + amount + `]}`
	}
	first := f.sendTx("?task=true", body(`"16"`), "Idempotency-Key", "k1")
	require.Equal(t, http.StatusAccepted, first.StatusCode, first.Body)
	again := f.sendTx("?task=true", body(`"0x10"`), "Idempotency-Key", "k1")
	require.Equal(t, http.StatusAccepted, again.StatusCode, again.Body)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, decodeCall(t, first).Task.ID, decodeCall(t, again).Task.ID)

	other := f.sendTx("?task=true", body(`"17"`), "Idempotency-Key", "k1")
	require.Equal(t, http.StatusUnprocessableEntity, other.StatusCode, other.Body)

	// The same data sent raw is another request too: it names no call.
	raw := `{"to":"` + recipient + `","data":"` + decodeCall(t, first).Task.Data + `"}`
	require.Equal(t, http.StatusUnprocessableEntity, f.sendTx("?task=true", raw, "Idempotency-Key", "k1").StatusCode)
}
