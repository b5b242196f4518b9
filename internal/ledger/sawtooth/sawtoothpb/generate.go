// Package sawtoothpb holds the Go code generated from Hyperledger Sawtooth's
// batch and transaction protobuf messages (batch.proto, transaction.proto).
// Run `go generate ./internal/ledger/sawtooth/sawtoothpb` after editing a
// .proto file; it needs protoc on PATH (Debian: protobuf-compiler) and uses the
// protoc-gen-go pinned as a tool in go.mod.
package sawtoothpb

//go:generate sh -c "protoc --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) --go_out=. --go_opt=paths=source_relative batch.proto transaction.proto"
