package submitter

import "github.com/ledgerq/ledgerq/internal/store"

// SetCheck replaces the check s runs on a batch stored unverified
// (sawtooth.CheckBatchForID), so that a test counts or holds the checks.
// Call it before the first round.
func SetCheck(s *BatchSubmitter, check func(id string, payload []byte) error) { s.check = check }

// Verify runs s's checks of a round's claimed batches.
func Verify(s *BatchSubmitter, claimed []store.ClaimedBatch) (refused []error, verified []bool) {
	return s.verify(claimed)
}
