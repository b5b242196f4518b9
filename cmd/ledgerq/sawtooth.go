package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/mattn/go-isatty"

	"github.com/ledgerq/ledgerq/internal/ledger/sawtooth"
)

const sawtoothUsage = `Usage: ledgerq sawtooth <command> [flags]

Commands:
  sample   print signed sample batches: a POST /v1/batches body (--format json)
           or a Sawtooth BatchList for POST /batches (--format batchlist)

Run 'ledgerq sawtooth <command> --help' for the flags of a command.
`

// runSawtooth runs the sawtooth helper commands.
func runSawtooth(_ context.Context, args []string) error {
	return subcommand("ledgerq sawtooth", "command", sawtoothUsage, args, os.Stdout, os.Stderr, map[string]func([]string) error{
		"sample": func(args []string) error { return runSawtoothSample(args, os.Stdout, os.Stderr) },
	})
}

// sampleBatch is one item of a POST /v1/batches body.
type sampleBatch struct {
	ID        string `json:"id"`
	ServiceID string `json:"service_id"`
	Payload   string `json:"payload"`
	CreatedAt string `json:"created_at,omitempty"`
}

// runSawtoothSample signs --count batches, each of one transaction, and
// writes them to stdout: as the JSON body of POST /v1/batches, or as a
// serialized BatchList for Sawtooth's POST /batches.
func runSawtoothSample(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sawtooth sample", "Print signed sample Sawtooth batches for trying the API:\n"+
		"  --format json       the body of POST /v1/batches: one batch object, or an array with --count above 1\n"+
		"  --format batchlist  a serialized Sawtooth BatchList, the body of POST /batches\n"+
		"                      (application/octet-stream); its service comes from the request's\n"+
		"                      X-Ledgerq-Service-Id header or service_id parameter, else the signer's key\n"+
		"The batches are signed with a throwaway key, or the hex private key in --key-file (as\n"+
		"'sawtooth keygen' writes it).")
	fs.SetOutput(stderr)
	service := fs.String("service", "", "service id of the batches (--format json; required there)")
	count := fs.Int("count", 1, "number of batches, 1 to 1000")
	keyFile := fs.String("key-file", "", "file holding a secp256k1 private key in hex (default: a throwaway key)")
	format := fs.String("format", "json", "json or batchlist")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *count < 1 || *count > 1000:
		return fmt.Errorf("--count must be from 1 to 1000, got %d", *count)
	case *format != "json" && *format != "batchlist":
		return fmt.Errorf("--format must be json or batchlist, got %q", *format)
	case *format == "json" && *service == "":
		return errors.New("--service is required with --format json (the service the batches are queued for)")
	case *format == "batchlist" && *service != "":
		return errors.New("--service does not apply to --format batchlist: a BatchList's service comes from the request (X-Ledgerq-Service-Id or ?service_id=), else its signer's key")
	case len(*service) > 256:
		return errors.New("--service is longer than 256 characters")
	}
	if f, ok := stdout.(*os.File); ok && *format == "batchlist" && isatty.IsTerminal(f.Fd()) {
		return errors.New("a BatchList is binary: redirect it to a file or pipe it to curl --data-binary @-")
	}

	signer, keyNote, err := sampleSigner(*keyFile)
	if err != nil {
		return err
	}
	// Apart in time by a microsecond each, the batches of an array keep the
	// array's order in the lane, as the list's order is kept by POST /batches.
	now := time.Now().UTC().Truncate(time.Microsecond)
	items := make([]sampleBatch, *count)
	payloads := make([][]byte, *count)
	for i := range items {
		txn := fmt.Sprintf(`{"sample":%d,"at":%q}`, i+1, now.Format(time.RFC3339Nano))
		id, payload, err := signer.NewBatch([]byte(txn))
		if err != nil {
			return err
		}
		payloads[i] = payload
		items[i] = sampleBatch{ID: id, ServiceID: *service, Payload: base64.StdEncoding.EncodeToString(payload)}
		if *count > 1 {
			items[i].CreatedAt = now.Add(time.Duration(i) * time.Microsecond).Format(time.RFC3339Nano)
		}
	}
	noun := "batches"
	if *count == 1 {
		noun = "batch"
	}
	fmt.Fprintf(stderr, "ledgerq sawtooth sample: %d %s signed by %s (%s)\n", *count, noun, signer.PublicKey(), keyNote)

	if *format == "batchlist" {
		_, err := stdout.Write(sawtooth.AppendBatchList(nil, payloads...))
		return err
	}
	var out any = items
	if *count == 1 {
		out = items[0]
	}
	enc := json.NewEncoder(stdout)
	return enc.Encode(out)
}

// sampleSigner returns a Signer for the key in keyFile, or for a new
// throwaway key when keyFile is empty, and words for which it is.
func sampleSigner(keyFile string) (*sawtooth.Signer, string, error) {
	if keyFile == "" {
		s, err := sawtooth.GenerateSigner()
		return s, "a throwaway key", err
	}
	data, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, "", fmt.Errorf("reading --key-file: %w", err)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(raw) != 32 {
		return nil, "", fmt.Errorf("--key-file %s: want a secp256k1 private key as 64 hex characters", keyFile)
	}
	priv := secp256k1.PrivKeyFromBytes(raw)
	if priv.Key.IsZero() {
		return nil, "", fmt.Errorf("--key-file %s: the key is zero (mod the curve order)", keyFile)
	}
	return sawtooth.NewSigner(priv), "the key in " + keyFile, nil
}
