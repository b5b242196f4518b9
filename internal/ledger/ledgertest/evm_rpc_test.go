package ledgertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/ledgerq/ledgerq/internal/ledger/evmrpc"
	"github.com/ledgerq/ledgerq/internal/ledger/ledgertest"
)

func TestEVMRPC_AnswersWithItsHandlersRecordsCallsAndRefusesOtherMethods(t *testing.T) {
	t.Parallel()
	e := ledgertest.NewEVMRPC()
	e.Answer("eth_gasPrice", `"0x3b9aca00"`)
	got, err := e.Call(context.Background(), "eth_gasPrice", nil)
	if err != nil || string(got) != `"0x3b9aca00"` {
		t.Fatalf("eth_gasPrice = %s, %v", got, err)
	}
	_, err = e.Call(context.Background(), "eth_sign", []json.RawMessage{json.RawMessage(`"0x01"`)})
	var rpcErr *evmrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32601 {
		t.Fatalf("eth_sign: %v, want -32601", err)
	}
	calls := e.Calls()
	if len(calls) != 2 || calls[1].Method != "eth_sign" || string(calls[1].Params[0]) != `"0x01"` {
		t.Fatalf("calls = %+v", calls)
	}
}
