package jam

import (
	"fmt"
	"math/big"
	"net/http"

	"github.com/ethereum/go-ethereum/rpc"
)

// Limits of the EVM JSON-RPC, geth's defaults.
const (
	// MaxEVMRequestBytes bounds a request body.
	MaxEVMRequestBytes = 5 << 20
	// MaxEVMBatch bounds a batch's requests.
	MaxEVMBatch = 1000
)

// JSON-RPC error codes the methods answer with; go-ethereum's rpc.Server
// answers the protocol's own (parse error, invalid request, method not
// found) and -32000 for any other error.
const (
	codeInvalidParams = -32602
	// codeReverted is geth's code for execution reverted, with the revert
	// data as the error's data.
	codeReverted = 3
)

// rpcError is an error answered with its own code (and data): go-ethereum's
// rpc.Server reads them through ErrorCode and ErrorData.
type rpcError struct {
	code    int
	message string
	data    any
}

func (e *rpcError) Error() string { return e.message }

// ErrorCode is the JSON-RPC code (go-ethereum's rpc.Error).
func (e *rpcError) ErrorCode() int { return e.code }

// ErrorData is the error's data, or nil (go-ethereum's rpc.DataError).
func (e *rpcError) ErrorData() any { return e.data }

func invalidParams(format string, args ...any) error {
	return &rpcError{code: codeInvalidParams, message: fmt.Sprintf(format, args...)}
}

// newEVMServer serves c's EVM JSON-RPC with go-ethereum's rpc.Server (its
// framing, batches, parameter decoding and errors), the methods of evmAPI
// registered under eth, net and web3. Every HTTP request first produces the
// blocks whose slot has begun (c.advance), once for a whole batch.
func newEVMServer(c *Chain) http.Handler {
	chainID := big.NewInt(c.cfg.ChainID)
	srv := rpc.NewServer()
	srv.SetHTTPBodyLimit(MaxEVMRequestBytes)
	// No bound on a batch's answer, as before geth's rpc.Server served it:
	// eth_getLogs answers of up to MaxLogsBlockRange blocks may be large.
	srv.SetBatchLimits(MaxEVMBatch, 0)
	for name, api := range map[string]any{
		"eth":  &evmAPI{e: c.evm, chainID: chainID},
		"net":  netAPI{chainID: chainID},
		"web3": web3API{},
	} {
		if err := srv.RegisterName(name, api); err != nil {
			// Only a service without a method to serve is refused: a
			// programming error every test meets.
			panic(fmt.Sprintf("jam: registering JSON-RPC namespace %s: %v", name, err))
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.advance()
		srv.ServeHTTP(w, r)
	})
}
