package jam

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// The journal is a file of JSON lines: a header, then one line per executed
// package, in execution order, each written and fsync'd before its
// execution is visible. A line is whole only with its newline: bytes after
// the last newline are a write a crash cut short, dropped when the journal
// is opened.
//
//	{"genesis":"2026-01-01T00:00:00Z","chain_id":1337,"evm_genesis":"0x…"}
//	{"number":1,"hash":"0x…","parent":"0x…","version":1,"package_hash":"0x…",
//	 "slot":5,"time":1767225630,"evm_hash":"0x…","txs":["0x02f8…", …]}

// journalHeader is the journal's first line: what the chain's slots and EVM
// genesis were, so that a restart continues them.
type journalHeader struct {
	Genesis time.Time `json:"genesis"`
	ChainID int64     `json:"chain_id"`
	// EVMGenesis is the EVM genesis block's hash, which names its chain id
	// and alloc: replaying onto another genesis would build other blocks.
	EVMGenesis common.Hash `json:"evm_genesis"`
}

// journalEntry is one executed package.
type journalEntry struct {
	Number      uint64      `json:"number"`
	Hash        common.Hash `json:"hash"`
	Parent      common.Hash `json:"parent"`
	Version     int         `json:"version"`
	PackageHash common.Hash `json:"package_hash"`
	Slot        uint64      `json:"slot"`
	// Time is the EVM block's timestamp; EVMHash its hash, checked on
	// replay.
	Time    uint64          `json:"time"`
	EVMHash common.Hash     `json:"evm_hash"`
	Txs     []hexutil.Bytes `json:"txs"`
}

// journal appends to the journal file.
type journal struct {
	f *os.File
}

// openJournal opens (or creates) the journal at path and reads it: its
// header (nil for a new or empty journal) and entries. A torn last line is
// cut off the file; any other line that does not decode is an error.
func openJournal(path string) (*journal, *journalHeader, []journalEntry, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("jam: opening journal: %w", err)
	}
	hdr, entries, err := readJournal(f, path)
	if err != nil {
		_ = f.Close()
		return nil, nil, nil, err
	}
	return &journal{f: f}, hdr, entries, nil
}

func readJournal(f *os.File, path string) (*journalHeader, []journalEntry, error) {
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, fmt.Errorf("jam: reading journal %s: %w", path, err)
	}
	whole := bytes.LastIndexByte(raw, '\n') + 1
	if whole < len(raw) {
		if err := f.Truncate(int64(whole)); err != nil {
			return nil, nil, fmt.Errorf("jam: cutting the torn last line off journal %s: %w", path, err)
		}
	}
	if _, err := f.Seek(int64(whole), io.SeekStart); err != nil {
		return nil, nil, fmt.Errorf("jam: journal %s: %w", path, err)
	}
	lines := bytes.SplitAfter(raw[:whole], []byte("\n"))
	if whole == 0 {
		return nil, nil, nil
	}
	var hdr journalHeader
	if err := json.Unmarshal(lines[0], &hdr); err != nil || hdr.Genesis.IsZero() {
		return nil, nil, fmt.Errorf("jam: journal %s line 1 is not a header: %v", path, err)
	}
	var entries []journalEntry
	for i, line := range lines[1:] {
		if len(line) == 0 {
			continue
		}
		var e journalEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, nil, fmt.Errorf("jam: journal %s line %d: %w", path, i+2, err)
		}
		entries = append(entries, e)
	}
	return &hdr, entries, nil
}

// append writes v as one line and syncs it to disk.
func (j *journal) append(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("jam: encoding journal line: %w", err)
	}
	if _, err := j.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("jam: writing journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("jam: syncing journal: %w", err)
	}
	return nil
}

func (j *journal) close() error {
	if err := j.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("jam: closing journal: %w", err)
	}
	return nil
}
