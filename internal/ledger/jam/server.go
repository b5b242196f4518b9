package jam

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/ledgerq/ledgerq/internal/ledger"
)

// MaxWorkPackageBytes bounds a POST /work-packages body.
const MaxWorkPackageBytes = 8 << 20

// The wire types. Hashes and transactions are 0x-hex strings.

// InfoJSON is GET /info's answer.
type InfoJSON struct {
	Genesis time.Time `json:"genesis"`
	// SlotLengthNS is the slot length in nanoseconds.
	SlotLengthNS int64 `json:"slot_length_ns"`
	Cores        int   `json:"cores"`
	// Head is the newest block's slot.
	Head     uint64       `json:"head"`
	Executed ExecutedJSON `json:"executed"`
}

// ExecutedJSON is the builder service's last executed EVM block.
type ExecutedJSON struct {
	Number uint64 `json:"number"`
	Hash   string `json:"hash"`
}

// RefJSON names a JAM block.
type RefJSON struct {
	Slot uint64 `json:"slot"`
	Hash string `json:"hash"`
}

// WorkPackageJSON is POST /work-packages' body.
type WorkPackageJSON struct {
	Number  uint64          `json:"number"`
	Parent  string          `json:"parent"`
	Version int             `json:"version"`
	Core    int             `json:"core"`
	Anchor  RefJSON         `json:"anchor"`
	Txs     []hexutil.Bytes `json:"txs"`
}

// SubmittedJSON is a taken package's answer.
type SubmittedJSON struct {
	PackageHash string `json:"package_hash"`
}

// ErrorJSON is every error answer.
type ErrorJSON struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// BlockJSON is one block of GET /blocks.
type BlockJSON struct {
	Slot          uint64   `json:"slot"`
	Hash          string   `json:"hash"`
	Guarantees    []string `json:"guarantees"`
	Accumulations []string `json:"accumulations"`
	// Skipped are the transactions of the accumulated packages the EVM
	// left out; absent (a server before it was added, or none) is none.
	Skipped []SkippedJSON `json:"skipped,omitempty"`
}

// SkippedJSON is one transaction of BlockJSON.Skipped (ledger.SkippedTx).
type SkippedJSON struct {
	PackageHash string `json:"package_hash"`
	TxHash      string `json:"tx_hash"`
	Reason      string `json:"reason"`
	NonceGap    bool   `json:"nonce_gap,omitempty"`
}

// LogJSON is GET /debug/log's answer.
type LogJSON struct {
	Executions []Execution `json:"executions"`
	Refusals   []Execution `json:"refusals"`
}

// NewHandler serves c over HTTP; the package doc lists the endpoints.
func NewHandler(c *Chain) http.Handler {
	s := &server{c: c}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /info", s.info)
	mux.HandleFunc("GET /recent", s.recent)
	mux.HandleFunc("POST /work-packages", s.submit)
	mux.HandleFunc("GET /blocks", s.blocks)
	mux.HandleFunc("GET /nonce", s.nonce)
	mux.HandleFunc("GET /debug/log", s.debugLog)
	mux.HandleFunc("GET /debug/stats", s.debugStats)
	mux.Handle("POST /evm", c.EVMHandler())
	return mux
}

type server struct{ c *Chain }

func (s *server) info(w http.ResponseWriter, r *http.Request) {
	info, _ := s.c.Info(r.Context())
	writeJSON(w, http.StatusOK, InfoJSON{
		Genesis: info.Genesis, SlotLengthNS: int64(info.SlotLength), Cores: info.Cores,
		Head:     info.Slot(s.c.clock.Now()),
		Executed: ExecutedJSON{Number: info.Executed.Number, Hash: info.Executed.Hash.Hex()},
	})
}

// NonceJSON is GET /nonce's answer.
type NonceJSON struct {
	Address string `json:"address"`
	Nonce   uint64 `json:"nonce"`
}

func (s *server) nonce(w http.ResponseWriter, r *http.Request) {
	a := r.URL.Query().Get("address")
	if !common.IsHexAddress(a) {
		writeJSON(w, http.StatusBadRequest, ErrorJSON{Reason: "bad address", Message: "address: want 0x and 40 hex digits"})
		return
	}
	addr := common.HexToAddress(a)
	n, err := s.c.NonceAt(r.Context(), ledger.Address(addr))
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, ErrorJSON{Reason: "unavailable", Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, NonceJSON{Address: strings.ToLower(addr.Hex()), Nonce: n})
}

func (s *server) recent(w http.ResponseWriter, r *http.Request) {
	recent, _ := s.c.RecentBlocks(r.Context())
	out := make([]RefJSON, len(recent))
	for i, b := range recent {
		out[i] = RefJSON{Slot: b.Number, Hash: b.Hash.Hex()}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) submit(w http.ResponseWriter, r *http.Request) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxWorkPackageBytes))
	dec.DisallowUnknownFields()
	var body WorkPackageJSON
	if err := dec.Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, ErrorJSON{Reason: "malformed work package", Message: err.Error()})
		return
	}
	wp, err := body.workPackage()
	if err != nil {
		writeJSON(w, http.StatusBadRequest, ErrorJSON{Reason: "malformed work package", Message: err.Error()})
		return
	}
	hash, lost, err := s.c.submit(wp)
	if err != nil {
		status := http.StatusUnprocessableEntity
		if ledger.ClassOf(err) == ledger.Transient {
			status = http.StatusServiceUnavailable
		}
		msg := err.Error()
		var le *ledger.Error
		if errors.As(err, &le) && le.Err != nil {
			msg = le.Err.Error()
		}
		writeJSON(w, status, ErrorJSON{Reason: ledger.ReasonOf(err), Message: msg})
		return
	}
	if lost {
		// The chain has the package; the caller never hears so.
		panic(http.ErrAbortHandler)
	}
	writeJSON(w, http.StatusOK, SubmittedJSON{PackageHash: hash.Hex()})
}

func (b WorkPackageJSON) workPackage() (ledger.WorkPackage, error) {
	wp := ledger.WorkPackage{Number: b.Number, Version: b.Version, Core: b.Core, Anchor: ledger.BlockRef{Number: b.Anchor.Slot}}
	var ok bool
	if wp.Parent, ok = ledger.ParseHash(b.Parent); !ok {
		return wp, fmt.Errorf("parent %q is not a 0x-hex hash", b.Parent)
	}
	if wp.Anchor.Hash, ok = ledger.ParseHash(b.Anchor.Hash); !ok {
		return wp, fmt.Errorf("anchor hash %q is not a 0x-hex hash", b.Anchor.Hash)
	}
	wp.Txs = make([][]byte, len(b.Txs))
	for i, tx := range b.Txs {
		wp.Txs[i] = tx
	}
	return wp, nil
}

func workPackageJSON(wp ledger.WorkPackage) WorkPackageJSON {
	b := WorkPackageJSON{
		Number: wp.Number, Parent: wp.Parent.Hex(), Version: wp.Version, Core: wp.Core,
		Anchor: RefJSON{Slot: wp.Anchor.Number, Hash: wp.Anchor.Hash.Hex()},
		Txs:    make([]hexutil.Bytes, len(wp.Txs)),
	}
	for i, tx := range wp.Txs {
		b.Txs[i] = tx
	}
	return b
}

func (s *server) blocks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var after uint64
	limit := 0
	var err error
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			writeJSON(w, http.StatusBadRequest, ErrorJSON{Reason: "bad after", Message: err.Error()})
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil {
			writeJSON(w, http.StatusBadRequest, ErrorJSON{Reason: "bad limit", Message: err.Error()})
			return
		}
	}
	blocks, _ := s.c.Blocks(r.Context(), after, limit)
	out := make([]BlockJSON, len(blocks))
	for i, b := range blocks {
		out[i] = BlockJSON{Slot: b.Slot, Hash: b.Hash.Hex(), Guarantees: hexes(b.Guarantees), Accumulations: hexes(b.Accumulations)}
		for _, sk := range b.Skipped {
			out[i].Skipped = append(out[i].Skipped, SkippedJSON{
				PackageHash: sk.Package.Hex(), TxHash: sk.Tx.Hex(), Reason: sk.Reason, NonceGap: sk.NonceGap,
			})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) debugLog(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, LogJSON{Executions: s.c.Executions(), Refusals: s.c.Refusals()})
}

func (s *server) debugStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.c.Stats())
}

func hexes(hs []ledger.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Hex()
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
