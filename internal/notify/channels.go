package notify

// The NOTIFY channels, one per lane and role, so that work created for one
// lane wakes only that lane's loop. Whoever creates work for a loop notifies
// its channel in the same transaction; the notification is delivered when
// that transaction commits.
const (
	BatchQueuer    = "ledgerq_batch_queuer"
	BatchSubmitter = "ledgerq_batch_submitter"
	BatchMonitor   = "ledgerq_batch_monitor"
	Shards         = "ledgerq_shards"
)
