package httpapi

// The fee hints of POST /rpc. A client that follows any of them must be
// admitted by the pool: eth_gasPrice, eth_maxPriorityFeePerGas and every
// reward of eth_feeHistory are the chain's own answers raised to the pool's
// minimum tip (builder.PoolConfig.MinTip, --builder-pool-min-tip) where the
// chain says less. The chain's EVM knows nothing of the pool: on a chain
// whose recent blocks are empty its rewards are 0, and Foundry's cast
// (alloy), which takes its tip from eth_feeHistory, would offer 1 wei and be
// refused "transaction gas price below minimum". Base fees stay the chain's:
// they are what its blocks charge.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common/hexutil"
)

// GasPrice is eth_gasPrice: the chain's answer, but at least the next
// block's base fee plus the pool's minimum tip, so that a legacy
// transaction at this price clears the pool's minimum (its tip is its whole
// gas price) and the chain's base fee both.
func (api *ethAPI) GasPrice(ctx context.Context) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	out, err := api.s.evmCall(ctx, "eth_gasPrice")
	if err != nil {
		return nil, err
	}
	price, err := quantity(out)
	if err != nil {
		return nil, api.s.rpcFail("eth_gasPrice", fmt.Errorf("the chain's gas price: %w", err))
	}
	base, err := api.s.nextBaseFee(ctx)
	if err != nil {
		return nil, err
	}
	floor := new(big.Int).Add(base, api.s.pool.MinTip)
	if price.Cmp(floor) >= 0 {
		return out, nil
	}
	return json.Marshal((*hexutil.Big)(floor))
}

// nextBaseFee is the base fee of the chain's next block, the last of
// eth_feeHistory's base fees (one block up to latest); 0 on a chain without
// base fees.
func (s *Server) nextBaseFee(ctx context.Context) (*big.Int, error) {
	out, err := s.evmCall(ctx, "eth_feeHistory", rawJSON(hexutil.Uint64(1)), rawJSON("latest"), rawJSON([]float64{}))
	if err != nil {
		return nil, err
	}
	var hist struct {
		BaseFees []*hexutil.Big `json:"baseFeePerGas"`
	}
	if err := json.Unmarshal(out, &hist); err != nil {
		return nil, s.rpcFail("eth_gasPrice", fmt.Errorf("the chain's fee history: %w", err))
	}
	if n := len(hist.BaseFees); n > 0 && hist.BaseFees[n-1] != nil {
		return hist.BaseFees[n-1].ToInt(), nil
	}
	return new(big.Int), nil
}

// MaxPriorityFeePerGas is eth_maxPriorityFeePerGas: the chain's answer, but
// at least the pool's minimum tip.
func (api *ethAPI) MaxPriorityFeePerGas(ctx context.Context) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	out, err := api.s.evmCall(ctx, "eth_maxPriorityFeePerGas")
	if err != nil {
		return nil, err
	}
	tip, err := quantity(out)
	if err != nil {
		return nil, api.s.rpcFail("eth_maxPriorityFeePerGas", fmt.Errorf("the chain's priority fee: %w", err))
	}
	if tip.Cmp(api.s.pool.MinTip) >= 0 {
		return out, nil
	}
	return json.Marshal((*hexutil.Big)(api.s.pool.MinTip))
}

// FeeHistory is eth_feeHistory: the chain's history with every reward (the
// tips paid at each requested percentile) raised to at least the pool's
// minimum tip; its blocks, base fees and gas used ratios as the chain gives
// them, and its other fields (blob fees) untouched.
func (api *ethAPI) FeeHistory(ctx context.Context, count, newest json.RawMessage, percentiles *json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := rpcCall(ctx)
	defer cancel()
	out, err := api.s.evmCall(ctx, "eth_feeHistory", &count, &newest, percentiles)
	if err != nil || isNull(out) {
		return out, err
	}
	var hist map[string]json.RawMessage
	if err := json.Unmarshal(out, &hist); err != nil {
		return nil, api.s.rpcFail("eth_feeHistory", fmt.Errorf("the chain's fee history: %w", err))
	}
	raw, ok := hist["reward"]
	if !ok || isNull(raw) {
		return out, nil
	}
	var rewards [][]*hexutil.Big
	if err := json.Unmarshal(raw, &rewards); err != nil {
		return nil, api.s.rpcFail("eth_feeHistory", fmt.Errorf("the chain's fee history rewards: %w", err))
	}
	raised := false
	for _, block := range rewards {
		for i, r := range block {
			if r == nil || r.ToInt().Cmp(api.s.pool.MinTip) < 0 {
				block[i] = (*hexutil.Big)(api.s.pool.MinTip)
				raised = true
			}
		}
	}
	if !raised {
		return out, nil
	}
	if hist["reward"], err = json.Marshal(rewards); err != nil {
		return nil, api.s.rpcFail("eth_feeHistory", err)
	}
	return json.Marshal(hist)
}

// quantity decodes a JSON-RPC quantity ("0x…").
func quantity(out json.RawMessage) (*big.Int, error) {
	var q hexutil.Big
	if err := json.Unmarshal(out, &q); err != nil {
		return nil, err
	}
	return q.ToInt(), nil
}
