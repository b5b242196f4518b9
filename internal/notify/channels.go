package notify

// The NOTIFY channels, one per lane and role, so that work created for one
// lane wakes only that lane's loop. Whoever creates work for a loop notifies
// its channel in the same transaction; the notification is delivered when
// that transaction commits, and only then. A process that both creates the
// work and runs the loop also pokes it directly (loop.Loop.Poke); the
// channel is how a loop in another process hears of it. A lost
// notification costs a poll interval, never work: every loop polls.
const (
	// The batch lane: a submit answered delayed (queuer: admit it again), a
	// batch admitted (submitter), accepted and not followed by its
	// submitter (monitor).
	BatchQueuer    = "ledgerq_batch_queuer"
	BatchSubmitter = "ledgerq_batch_submitter"
	BatchMonitor   = "ledgerq_batch_monitor"

	// The builder lane: a transaction pending in the pool, or returned to
	// pending from a dropped bundle (queuer: cut bundles); a bundle queued or
	// requeued, or a core freed (submitter); a bundle version sent (monitor:
	// follow its guarantee).
	BundleQueuer    = "ledgerq_bundle_queuer"
	BundleSubmitter = "ledgerq_bundle_submitter"
	BundleMonitor   = "ledgerq_bundle_monitor"

	// The wallet lane's queuer, submitter and monitor steps run in the
	// shard scheduler's jobs, one wallet per shard: a shard made runnable
	// (a task stored, a shard rescued or scheduled to follow) wakes the
	// scheduler. Webhook deliveries stored with a task's transition wake
	// the deliverer (monitor role).
	Shards         = "ledgerq_shards"
	WalletWebhooks = "ledgerq_wallet_webhooks"
)

// Wallets: a wallet added, disabled, enabled or removed at run time
// (ledgerq.wallets): every process reads the table again.
const Wallets = "ledgerq_wallets"

// APIKeys: API keys changed (revoked, rescoped, deleted: by ledgerq keys,
// or plain SQL), notified by a trigger on ledgerq.api_keys: every process
// forgets the keys it keeps in memory.
const APIKeys = "ledgerq_api_keys"
