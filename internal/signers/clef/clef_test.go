package clef_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/keystore"
	"github.com/ledgerq/ledgerq/internal/signers/clef"
	"github.com/ledgerq/ledgerq/internal/signers/clef/cleftest"
	"github.com/ledgerq/ledgerq/internal/testgeth"
)

var _ keystore.Signer = (*clef.Signer)(nil)

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var (
	chainID   = big.NewInt(1337)
	recipient = common.HexToAddress("0x00000000000000000000000000000000000000bB")
)

// txOf is a transaction of type typ asking nonce, to recipient.
func txOf(typ uint8, nonce uint64) *types.Transaction {
	switch typ {
	case types.LegacyTxType:
		return types.NewTx(&types.LegacyTx{Nonce: nonce, GasPrice: big.NewInt(3e9), Gas: 21000, To: &recipient, Value: big.NewInt(7)})
	case types.AccessListTxType:
		return types.NewTx(&types.AccessListTx{ChainID: chainID, Nonce: nonce, GasPrice: big.NewInt(3e9), Gas: 30000, To: &recipient, Value: big.NewInt(7),
			AccessList: types.AccessList{{Address: recipient, StorageKeys: []common.Hash{{1}}}}})
	default:
		return types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(5e9), Gas: 21000, To: &recipient, Value: big.NewInt(7), Data: []byte{0xca, 0xfe}})
	}
}

// fakeClef is a JSON-RPC server that answers like clef: account_list with
// accounts, account_signTransaction by signing what it was asked (after
// change, if set) with key, unless answer is set.
type fakeClef struct {
	accounts []common.Address
	key      *ecdsa.PrivateKey
	// change, when set, alters the transaction before it is signed (clef's
	// UI may).
	change func(args *apitypes.SendTxArgs)
	// signer, when set, signs instead of London's for chainID.
	signer types.Signer
	// answer, when set, writes the whole HTTP answer to a signing request.
	answer func(w http.ResponseWriter, id json.RawMessage)
	// asked receives the arguments of each signing request.
	asked chan apitypes.SendTxArgs
}

func newFake(t *testing.T) (*fakeClef, common.Address) {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	addr := crypto.PubkeyToAddress(key.PublicKey)
	return &fakeClef{accounts: []common.Address{addr}, key: key, asked: make(chan apitypes.SendTxArgs, 10)}, addr
}

func (f *fakeClef) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage   `json:"id"`
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	reply := func(result any, rpcErr string) {
		msg := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if rpcErr != "" {
			msg["error"] = map[string]any{"code": -32000, "message": rpcErr}
		} else {
			msg["result"] = result
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(msg)
	}
	switch req.Method {
	case "account_list":
		reply(f.accounts, "")
	case "account_signTransaction":
		if f.answer != nil {
			f.answer(w, req.ID)
			return
		}
		var args apitypes.SendTxArgs
		if err := json.Unmarshal(req.Params[0], &args); err != nil {
			reply(nil, err.Error())
			return
		}
		f.asked <- args
		if f.change != nil {
			f.change(&args)
		}
		tx, err := args.ToTransaction()
		if err != nil {
			reply(nil, err.Error())
			return
		}
		signer := f.signer
		if signer == nil {
			signer = types.LatestSignerForChainID(chainID)
		}
		signed, err := types.SignTx(tx, signer, f.key)
		if err != nil {
			reply(nil, err.Error())
			return
		}
		raw, err := signed.MarshalBinary()
		if err != nil {
			reply(nil, err.Error())
			return
		}
		reply(map[string]any{"raw": hexutil.Bytes(raw), "tx": signed}, "")
	default:
		reply(nil, "the method "+req.Method+" does not exist/is not available")
	}
}

// withUserinfo is u with a user name and password that no error may show.
func withUserinfo(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	p.User = url.UserPassword("operator", "s3cret-token")
	return p.String()
}

func requireNoUserinfo(t *testing.T, err error) {
	t.Helper()
	require.NotContains(t, err.Error(), "s3cret-token")
	require.NotContains(t, err.Error(), "operator")
}

func open(t *testing.T, srvURL string, addr common.Address) *clef.Signer {
	t.Helper()
	s, err := clef.Open(ctxFor(t, 10*time.Second), clef.Config{URL: srvURL, Address: addr, Timeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func TestOpen_RefusesAnAddressClefDoesNotList(t *testing.T) {
	t.Parallel()
	f, addr := newFake(t)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	other := common.HexToAddress("0x1111111111111111111111111111111111111111")

	_, err := clef.Open(ctxFor(t, 10*time.Second), clef.Config{URL: withUserinfo(t, srv.URL), Address: other})
	require.Error(t, err)
	require.Contains(t, err.Error(), other.Hex())
	require.Contains(t, err.Error(), addr.Hex(), "the accounts clef lists")
	require.Contains(t, err.Error(), srv.URL[len("http://"):], "the URL, redacted")
	requireNoUserinfo(t, err)

	s := open(t, withUserinfo(t, srv.URL), addr)
	require.Equal(t, addr, common.Address(s.Address()))
	require.Equal(t, "clef", keystore.BackendOf(s))
	require.NotContains(t, s.String(), "s3cret-token")
}

func TestConfig_ValidateRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	addr := common.HexToAddress("0x1111111111111111111111111111111111111111")
	for name, cfg := range map[string]clef.Config{
		"no URL":           {Address: addr},
		"an IPC path":      {URL: "/home/clef/clef.ipc", Address: addr},
		"a websocket":      {URL: "ws://127.0.0.1:8550", Address: addr},
		"no address":       {URL: "http://127.0.0.1:8550"},
		"negative timeout": {URL: "http://127.0.0.1:8550", Address: addr, Timeout: -time.Second},
	} {
		require.Error(t, cfg.Validate(), name)
	}
	require.NoError(t, clef.Config{URL: "https://u:p@clef.internal:8550", Address: addr}.Validate())
}

func TestSigner_SignsTheTransactionAskedAndSendsClefItsFields(t *testing.T) {
	t.Parallel()
	f, addr := newFake(t)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s := open(t, srv.URL, addr)

	for _, typ := range []uint8{types.LegacyTxType, types.AccessListTxType, types.DynamicFeeTxType} {
		tx := txOf(typ, 4)
		signed, err := s.SignTx(ctxFor(t, 10*time.Second), tx, chainID)
		require.NoError(t, err, "type %d", typ)
		require.Equal(t, typ, signed.Type())
		signer := types.LatestSignerForChainID(chainID)
		require.Equal(t, signer.Hash(tx), signer.Hash(signed))
		from, err := types.Sender(signer, signed)
		require.NoError(t, err)
		require.Equal(t, addr, from)

		args := <-f.asked
		require.Equal(t, addr, args.From.Address())
		require.Equal(t, recipient.Hex(), args.To.Original(), "checksummed: clef refuses a recipient without a valid checksum")
		require.Equal(t, uint64(4), uint64(args.Nonce))
		require.Equal(t, tx.Gas(), uint64(args.Gas))
		require.Equal(t, 0, args.Value.ToInt().Cmp(tx.Value()))
		require.Equal(t, 0, args.ChainID.ToInt().Cmp(chainID))
		if typ == types.DynamicFeeTxType {
			require.Nil(t, args.GasPrice)
			require.Equal(t, 0, args.MaxFeePerGas.ToInt().Cmp(tx.GasFeeCap()))
			require.Equal(t, 0, args.MaxPriorityFeePerGas.ToInt().Cmp(tx.GasTipCap()))
			require.Equal(t, hexutil.Bytes(tx.Data()), *args.Input)
		} else {
			require.Nil(t, args.MaxFeePerGas)
			require.Equal(t, 0, args.GasPrice.ToInt().Cmp(tx.GasPrice()))
		}
	}
}

func TestSigner_RefusesAnAnswerThatIsNotTheTransactionAsked(t *testing.T) {
	t.Parallel()
	other, err := crypto.GenerateKey()
	require.NoError(t, err)
	elsewhere := common.NewMixedcaseAddress(common.HexToAddress("0x00000000000000000000000000000000000000cc"))
	bigOf := func(n int64) *hexutil.Big { return (*hexutil.Big)(big.NewInt(n)) }
	cases := []struct {
		name   string
		change func(*apitypes.SendTxArgs)
		signer types.Signer
		key    *ecdsa.PrivateKey
		want   string
	}{
		{name: "another recipient", change: func(a *apitypes.SendTxArgs) { a.To = &elsewhere }, want: "to " + elsewhere.Address().Hex() + ", not " + recipient.Hex()},
		{name: "another value", change: func(a *apitypes.SendTxArgs) { a.Value = *bigOf(8) }, want: "value 8, not 7"},
		{name: "another nonce", change: func(a *apitypes.SendTxArgs) { a.Nonce++ }, want: "nonce 5, not 4"},
		{name: "more gas", change: func(a *apitypes.SendTxArgs) { a.Gas++ }, want: "gas 21001, not 21000"},
		{name: "a higher fee cap", change: func(a *apitypes.SendTxArgs) { a.MaxFeePerGas = bigOf(6e9) }, want: "max fee per gas (gas price) 6000000000, not 5000000000"},
		{name: "a higher tip", change: func(a *apitypes.SendTxArgs) { a.MaxPriorityFeePerGas = bigOf(2e9) }, want: "max priority fee per gas 2000000000, not 1000000000"},
		{name: "other data", change: func(a *apitypes.SendTxArgs) { d := hexutil.Bytes{0xbe, 0xef}; a.Input = &d }, want: "data 0xbeef, not 0xcafe"},
		{name: "another type", change: func(a *apitypes.SendTxArgs) {
			a.GasPrice, a.MaxFeePerGas, a.MaxPriorityFeePerGas = a.MaxFeePerGas, nil, nil
		}, want: "type 0, not 2"},
		{name: "another chain", change: func(a *apitypes.SendTxArgs) { a.ChainID = bigOf(1) }, signer: types.LatestSignerForChainID(big.NewInt(1)), want: "chain id 1, not 1337"},
		{name: "another signer", key: other, want: "it is signed by " + crypto.PubkeyToAddress(other.PublicKey).Hex()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, addr := newFake(t)
			f.change, f.signer = c.change, c.signer
			if c.key != nil {
				f.key = c.key
			}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			s := open(t, srv.URL, addr)
			signed, err := s.SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, 4), chainID)
			require.Nil(t, signed)
			require.ErrorIs(t, err, clef.ErrMismatch)
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, "refused, not sent")
			_, unavailable := errors.AsType[*keystore.UnavailableError](err)
			require.False(t, unavailable, "a wrong answer is not a signer that cannot be reached")
		})
	}
}

func TestSigner_RefusesAnUnprotectedLegacySignature(t *testing.T) {
	t.Parallel()
	f, addr := newFake(t)
	f.signer = types.HomesteadSigner{} // no chain id in v: valid on every chain
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s := open(t, srv.URL, addr)
	_, err := s.SignTx(ctxFor(t, 10*time.Second), txOf(types.LegacyTxType, 4), chainID)
	require.ErrorIs(t, err, clef.ErrMismatch)
	require.ErrorContains(t, err, "chain id 0, not 1337")
}

func TestSigner_RefusesARawTransactionThatIsNotItsDecodedOne(t *testing.T) {
	t.Parallel()
	f, addr := newFake(t)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s := open(t, srv.URL, addr)
	asked := txOf(types.DynamicFeeTxType, 4)
	good, err := types.SignTx(asked, types.LatestSignerForChainID(chainID), f.key)
	require.NoError(t, err)
	other, err := types.SignTx(txOf(types.DynamicFeeTxType, 9), types.LatestSignerForChainID(chainID), f.key)
	require.NoError(t, err)
	raw, err := good.MarshalBinary()
	require.NoError(t, err)
	f.answer = func(w http.ResponseWriter, id json.RawMessage) {
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"raw": hexutil.Bytes(raw), "tx": other}})
	}
	_, err = s.SignTx(ctxFor(t, 10*time.Second), asked, chainID)
	require.ErrorIs(t, err, clef.ErrMismatch)
	require.ErrorContains(t, err, "differ")
}

func requireUnavailable(t *testing.T, err error) *keystore.UnavailableError {
	t.Helper()
	un, ok := errors.AsType[*keystore.UnavailableError](err)
	require.True(t, ok, "want *keystore.UnavailableError, got %v", err)
	require.Equal(t, clef.Backend, un.Backend)
	return un
}

func TestSigner_UnreachableClefIsUnavailable(t *testing.T) {
	t.Parallel()
	f, addr := newFake(t)
	srv := httptest.NewServer(f)
	s := open(t, withUserinfo(t, srv.URL), addr)
	srv.Close()

	_, err := s.SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, 4), chainID)
	requireUnavailable(t, err)
	requireNoUserinfo(t, err)

	_, err = clef.Open(ctxFor(t, 10*time.Second), clef.Config{URL: withUserinfo(t, srv.URL), Address: addr})
	requireUnavailable(t, err)
	requireNoUserinfo(t, err)
}

func TestSigner_AClefThatDoesNotAnswerIsUnavailableWithinTheTimeout(t *testing.T) {
	t.Parallel()
	f, addr := newFake(t)
	release := make(chan struct{})
	f.answer = func(http.ResponseWriter, json.RawMessage) { <-release } // a prompt nobody answers
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	s, err := clef.Open(ctxFor(t, 10*time.Second), clef.Config{URL: srv.URL, Address: addr, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(s.Close)

	began := time.Now()
	_, err = s.SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, 4), chainID)
	requireUnavailable(t, err)
	require.Less(t, time.Since(began), 5*time.Second, "SignTx outlived Config.Timeout")

	// The caller's shorter deadline wins over Config.Timeout.
	s2 := open(t, srv.URL, addr) // Timeout 5 s
	began = time.Now()
	_, err = s2.SignTx(ctxFor(t, 200*time.Millisecond), txOf(types.DynamicFeeTxType, 4), chainID)
	requireUnavailable(t, err)
	require.Less(t, time.Since(began), 3*time.Second, "SignTx outlived its context's deadline")
}

func TestSigner_ThrottledOrFailingClefIsUnavailableWithItsRetryAfter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status     int
		retryAfter string
		want       time.Duration
	}{
		{http.StatusTooManyRequests, "7", 7 * time.Second},
		{http.StatusTooManyRequests, "", clef.ThrottleRetryAfter},
		{http.StatusServiceUnavailable, "3", 3 * time.Second},
		{http.StatusBadGateway, "", 0},
	}
	for _, c := range cases {
		f, addr := newFake(t)
		f.answer = func(w http.ResponseWriter, _ json.RawMessage) {
			if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			http.Error(w, "slow down", c.status)
		}
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		s := open(t, srv.URL, addr)
		_, err := s.SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, 4), chainID)
		un := requireUnavailable(t, err)
		require.Equal(t, c.want, un.RetryAfter, "status %d, Retry-After %q", c.status, c.retryAfter)
	}

	// A refusal at the HTTP level (a proxy's 401) is the configuration's
	// problem, not an outage.
	f, addr := newFake(t)
	f.answer = func(w http.ResponseWriter, _ json.RawMessage) { http.Error(w, "who are you", http.StatusUnauthorized) }
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	_, err := open(t, srv.URL, addr).SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, 4), chainID)
	require.Error(t, err)
	_, unavailable := errors.AsType[*keystore.UnavailableError](err)
	require.False(t, unavailable, "%v", err)
}

func TestSigner_ARequestClefDeniesIsUnavailableAndOtherRefusalsAreErrors(t *testing.T) {
	t.Parallel()
	for msg, wantUnavailable := range map[string]bool{
		"Request denied": true,
		"request denied": true,
		"requested chainid 1337 does not match the configuration of the signer": false,
	} {
		f, addr := newFake(t)
		f.answer = func(w http.ResponseWriter, id json.RawMessage) {
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32000, "message": msg}})
		}
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		_, err := open(t, srv.URL, addr).SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, 4), chainID)
		require.ErrorContains(t, err, msg)
		un, unavailable := errors.AsType[*keystore.UnavailableError](err)
		require.Equal(t, wantUnavailable, unavailable, "%q: %v", msg, err)
		if unavailable {
			require.Equal(t, clef.DeniedRetryAfter, un.RetryAfter)
		}
	}
}

func TestSigner_RefusesBlobAndSetCodeTransactions(t *testing.T) {
	t.Parallel()
	f, addr := newFake(t)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s := open(t, srv.URL, addr)
	tx := types.NewTx(&types.SetCodeTx{Nonce: 1, Gas: 50000})
	_, err := s.SignTx(ctxFor(t, 10*time.Second), tx, chainID)
	require.ErrorContains(t, err, "type 4 is not signed through clef")
	require.Empty(t, f.asked, "nothing was asked of clef")
}

// --- a real clef

// realSetup starts a clef signing for chainID and opens its Signer.
func realSetup(t testing.TB, id *big.Int) (*cleftest.Server, *clef.Signer) {
	t.Helper()
	srv := cleftest.Start(t, id)
	s, err := clef.Open(ctxFor(t, 10*time.Second), clef.Config{URL: srv.URL, Address: srv.Address})
	if err != nil {
		t.Fatalf("opening the clef signer: %v", err)
	}
	t.Cleanup(s.Close)
	return srv, s
}

func TestSigner_ATransferClefSignsIsMinedByGeth(t *testing.T) {
	t.Parallel()
	cleftest.Binary(t) // skip before starting geth when there is no clef
	node := testgeth.Start(t)
	srv, s := realSetup(t, node.ChainID)
	from := srv.Address
	node.Fund(t, from, big.NewInt(1e18))

	ctx := ctxFor(t, 30*time.Second)
	ec := node.Client()
	nonce, err := ec.PendingNonceAt(ctx, from)
	require.NoError(t, err)
	head, err := ec.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	to := common.HexToAddress("0x00000000000000000000000000000000000000bb")
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(1_000_000_000))
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: node.ChainID, Nonce: nonce, GasTipCap: big.NewInt(1_000_000_000), GasFeeCap: feeCap, Gas: 21000, To: &to, Value: big.NewInt(12345)})
	signed, err := s.SignTx(ctx, tx, node.ChainID)
	require.NoError(t, err)
	require.NoError(t, ec.SendTransaction(ctx, signed))

	r := node.WaitMined(t, signed.Hash())
	require.Equal(t, types.ReceiptStatusSuccessful, r.Status)
	block, err := ec.BlockByHash(ctx, r.BlockHash)
	require.NoError(t, err)
	mined := block.Transaction(signed.Hash())
	require.NotNil(t, mined, "the transaction is in the receipt's block")
	sender, err := types.Sender(types.LatestSignerForChainID(node.ChainID), mined)
	require.NoError(t, err)
	require.Equal(t, from, sender, "the chain's sender is clef's account")
	got, err := ec.BalanceAt(ctx, to, nil)
	require.NoError(t, err)
	require.Equal(t, big.NewInt(12345), got)
}

func TestSigner_ARealClefsRulesRefusalIsUnavailable(t *testing.T) {
	t.Parallel()
	srv, s := realSetup(t, chainID)
	denied := cleftest.DeniedRecipient
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: 0, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(2), Gas: 21000, To: &denied, Value: big.NewInt(1)})
	_, err := s.SignTx(ctxFor(t, 10*time.Second), tx, chainID)
	un := requireUnavailable(t, err)
	require.Equal(t, clef.DeniedRetryAfter, un.RetryAfter)

	// clef signs for its --chainid only: another is an error, not a wait.
	other := big.NewInt(1)
	_, err = s.SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, 0), other)
	require.ErrorContains(t, err, "does not match the configuration of the signer")
	_, unavailable := errors.AsType[*keystore.UnavailableError](err)
	require.False(t, unavailable, "%v (log %s)", err, srv.LogPath())
}

func TestSigner_ClefStoppedMidRunIsUnavailableAndSignsAgainAfterItsRestart(t *testing.T) {
	t.Parallel()
	srv, s := realSetup(t, chainID)
	_, err := s.SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, 0), chainID)
	require.NoError(t, err)

	srv.Kill()
	const deadline = 3 * time.Second
	began := time.Now()
	_, err = s.SignTx(ctxFor(t, deadline), txOf(types.DynamicFeeTxType, 1), chainID)
	requireUnavailable(t, err)
	require.Less(t, time.Since(began), deadline+time.Second, "SignTx outlived its deadline")

	srv.Restart(t)
	signed, err := s.SignTx(ctxFor(t, 10*time.Second), txOf(types.DynamicFeeTxType, 1), chainID)
	require.NoError(t, err)
	from, err := types.Sender(types.LatestSignerForChainID(chainID), signed)
	require.NoError(t, err)
	require.Equal(t, srv.Address, from)
}

// BenchmarkSigner_RealClef signs through a real clef and reports the p50
// and p99 of one signature (run it with -benchtime=200x for 200).
func BenchmarkSigner_RealClef(b *testing.B) {
	_, s := realSetup(b, chainID)
	var took []time.Duration
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		began := time.Now()
		if _, err := s.SignTx(ctx, txOf(types.DynamicFeeTxType, uint64(i)), chainID); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(began))
	}
	b.StopTimer()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	q := func(p float64) time.Duration { return took[min(len(took)-1, int(p*float64(len(took))))] }
	b.ReportMetric(float64(q(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(q(0.99).Microseconds())/1000, "p99-ms")
	b.Logf("clef: %d signatures: p50 %s, p99 %s", len(took), q(0.50), q(0.99))
}
