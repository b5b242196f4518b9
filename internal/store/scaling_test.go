package store_test

// The Citus plan of docs/scaling.md, kept true as the SQL changes: every
// statement in queries/*.sql that touches a table the plan distributes is
// either single-key (each use of such a table filters on its distribution
// key, or an INSERT names the key's columns) or an accepted cross-key
// statement with the reason why, and the plan's to-do for it.
//
// The check is textual (no SQL parser): comments are stripped, each use of
// a distributed table is found with its alias ("ledgerq.batches b"), SET
// lists are removed, and each key column must appear as `alias.col =`,
// `= alias.col`, `alias.col = ANY(` or `alias.col IN` (unqualified when the
// table has no alias). An INSERT's target is single-key when its column
// list holds the key's columns.

import (
	"regexp"
	"sort"
	"strings"
	"testing"
)

// distKey is each distributed table's distribution key, as docs/scaling.md
// gives it. Tables not named here are reference tables or stay on the
// coordinator (api_keys, webhook_endpoints, goose's version table).
var distKey = map[string][]string{
	// Batch lane: distributed by service, batch_payloads co-located.
	"batches":        {"service_id"},
	"batch_payloads": {"service_id"},
	// Wallet lane: distributed by sender, chain_id in every key.
	"wallet_tasks":  {"chain_id", "sender"},
	"tx_attempts":   {"chain_id", "sender"},
	"wallet_nonces": {"chain_id", "sender"},
	"wallet_health": {"chain_id", "sender"},
	// The write-ahead across signers: a wallet's sign requests.
	"wallet_sign_requests": {"chain_id", "sender"},
	// Webhook outbox: co-located with the wallet lane once it carries the
	// task's chain and sender (docs/scaling.md, step 4); today it has
	// neither, so each of its statements is listed as cross-key.
	"webhook_deliveries": {"chain_id", "sender"},
	// Builder lane: distributed by chain, one co-location group.
	"pool_chains":          {"chain_id"},
	"pool_admission_slots": {"chain_id"},
	"pool_senders":         {"chain_id"},
	"pool_txs":             {"chain_id"},
	"builder_chains":       {"chain_id"},
	"bundles":              {"chain_id"},
	"bundle_versions":      {"chain_id"},
	"cores":                {"chain_id"},
	// Shard scheduler: by shard key.
	"shards": {"key"},
}

// singleKey lists the statements asserted single-key, with the columns a
// statement must filter on beyond its tables' keys: the pool's intake and
// sweep are per sender (the sender's intake lock), so they stay single-key
// if the pool is ever split by sender too. The hot statements among them:
// intake (Insert, Lock, Live, Start...), claims (Next, Claim...) and
// outcomes (Finish, Mark, Release...).
var singleKey = map[string][]string{
	// Batch lane: intake and its admission probes, the service listing.
	"BatchInsertMany":           nil,
	"BatchServiceLockForIntake": nil,
	"BatchServiceFilterIdle":    nil,
	"BatchWakeIfQueued":         nil,

	// Wallet lane: intake, the wallet run's reads and claims, nonces, health.
	"TaskInsert":                   nil,
	"TaskNextWaitingPriority":      nil,
	"TaskNextWaitingFIFO":          nil,
	"TaskListRequests":             nil,
	"AttemptInsertMany":            nil,
	"AttemptInsertOne":             nil,
	"AttemptListUnsent":            nil,
	"AttemptListSentBelow":         nil,
	"AttemptListMined":             nil,
	"AttemptListMinedFrom":         nil,
	"AttemptCountLive":             nil,
	"AttemptListUncertain":         nil,
	"AttemptListSentFrom":          nil,
	"AttemptListOfWallet":          nil,
	"AttemptGetFirstMinedBlock":    nil,
	"AttemptListHashesOfNonce":     nil,
	"SignRequestLockTasks":         nil,
	"SignRequestRecord":            nil,
	"SignRequestListPinned":        nil,
	"SignRequestDeleteBelow":       nil,
	"SignRequestDeleteAt":          nil,
	"SignRequestTakeForNoop":       nil,
	"SignRequestCountOfTask":       nil,
	"AttemptGetLiveAt":             nil,
	"AttemptGetMaxLiveNonce":       nil,
	"AttemptGetMaxHeldNonce":       nil,
	"WalletNonceGet":               nil,
	"WalletNonceAdvance":           nil,
	"WalletNonceRaise":             nil,
	"WalletNonceListFreed":         nil,
	"WalletNonceReset":             nil,
	"WalletHealthGet":              nil,
	"WalletHealthObserveNonce":     nil,
	"WalletHealthSetBalance":       nil,
	"WalletHealthMarkBalanceStale": nil,
	"WalletHealthRecordReset":      nil,
	"WalletHealthHold":             nil,
	"WalletHealthRelease":          nil,
	"WalletHealthSetSigner":        nil,
	"AttemptListInFlight":          nil,
	// Restore recovery, inside one wallet's run.
	"AttemptListUnknownNonces": nil,
	"AttemptGetLastMinedBlock": nil,
	"WalletRecoveryHold":       nil,
	"WalletRecoveryEnd":        nil,
	"WalletHealthSetScan":      nil,

	// Builder lane, pool intake and sweep: per chain and sender.
	"PoolSenderLock":        {"sender"},
	"PoolSenderSetNext":     {"sender"},
	"PoolSenderLive":        {"sender"},
	"PoolSenderRun":         {"sender"},
	"PoolTxInsert":          {"sender"},
	"PoolTxDemoteAbove":     {"sender"},
	"PoolTxUnbundleSkipped": {"sender"},
	"PoolSenderLowerNext":   {"sender"},
	// Builder lane, per chain: the global limits, the cut, the bundle line.
	"PoolChainEnsure":          nil,
	"PoolSlotTake":             nil,
	"PoolSlotTakeMany":         nil,
	"PoolSlotWait":             nil,
	"PoolAdmissionBound":       nil,
	"PoolSlotLockAll":          nil,
	"PoolChainRebase":          nil,
	"PoolChainAdjust":          nil,
	"PoolChainLock":            nil,
	"PoolCountWaiting":         nil,
	"PoolSenderLockExpired":    nil,
	"PoolTxGet":                nil,
	"BuilderChainLock":         nil,
	"BuilderChainGet":          nil,
	"BuilderChainSetProcessed": nil,
	"BundleLastLive":           nil,
	"BundleCountQueued":        nil,
	"BundleTxLockForCut":       nil,
	"BundleInsert":             nil,
	"BundleTxInclude":          nil,
	"CoreEnsure":               nil,
	"CoreRemoveFreeAbove":      nil,
	"CoreClaimFree":            nil,
	"BundleClaimNext":          nil,
	"CoreAssign":               nil,
	"CoreLockOf":               nil,
	"CoreFree":                 nil,
	"BundleFinalize":           nil,
	"BundleListToDrop":         nil,
	"BundleGet":                nil,
	"BundleList":               nil,
	"BundleHeads":              nil,

	// Shards: every statement about one shard.
	"ShardSchedule":    nil,
	"ShardExtendLease": nil,
	"ShardRelease":     nil,
	"ShardHeld":        nil,
	"ShardGet":         nil,
}

// Reasons shared by several cross-key statements.
const (
	fanOutRead   = "read-only fan-out to every shard, no row lock: Citus runs it as a multi-shard SELECT and merges (metrics, listings, operators)"
	batchBySeq   = "CHANGES (step 1): reaches batches by seq alone; add service_id = ANY(@service_ids) beside each seq (the claim that handed out the seq returned its service), so it is pruned to those services' shards"
	walletByHash = "CHANGES (step 2): reaches tx_attempts by (chain_id, tx_hash) or task_id alone inside a wallet's run, which knows its sender; add sender = @sender"
	taskByID     = "CHANGES (step 2): reaches wallet_tasks by id alone inside a wallet's run, which knows its (chain, sender); add chain_id = @chain_id AND sender = @sender"
	apiByWallet  = "CHANGES (step 2): API route keyed by wallet name; the API maps the name to its (chain, sender) from the configuration and adds both"
	bundleByID   = "CHANGES (step 3): reaches bundles by id or pool_txs by bundle_id alone; add chain_id = @chain_id (the caller has it)"
	versionNoKey = "CHANGES (step 3): bundle_versions has no chain_id; add the column (copied from its bundle) and filter on it"
	scanClaim    = "CHANGES (step 5): claim across keys with FOR UPDATE SKIP LOCKED, which Citus runs only on one shard; becomes a lock-free fan-out read of candidates, then a conditional UPDATE by key whose guard is re-checked on the row"
)

// crossKey lists the accepted cross-key statements, each with its reason.
var crossKey = map[string]string{
	// Batch lane.
	"BatchGetMany":              "CHANGES (step 1): intake's read-back by client id; add p.service_id = ANY(@service_ids) (intake has every batch's service), with batch_payloads' unique key widened to (service_id, id)",
	"BatchGet":                  "CHANGES (step 1): GET /v1/batches/{id} by client id alone; a fan-out read of batch_payloads' (service_id, id) index, or a batch_ids(id, service_id) lookup table distributed by id",
	"BatchList":                 fanOutRead,
	"BatchListByService":        "CHANGES (step 1): filters batch_payloads on service_id but joins batches by seq alone; add b.service_id = p.service_id to the join (a co-located join)",
	"BatchServiceListIdle":      "reconciliation scan, rarely run and read-only; what it finds goes to BatchServiceLock and BatchAdmit per service",
	"BatchAdmit":                batchBySeq,
	"BatchReleaseClaims":        batchBySeq,
	"BatchQueueRetries":         "CHANGES (step 5): scans every service's retries and locks them by seq; becomes a fan-out read of candidates (service_id, seq), then a guarded UPDATE per service",
	"BatchClaimQueued":          scanClaim + " (submitter: oldest queued across services)",
	"BatchRecordSubmitMany":     batchBySeq,
	"BatchClaimPendingForCheck": scanClaim + " (monitor: pending batches due)",
	"BatchClaimExpiredHeld":     scanClaim + " (monitor: expired leases)",
	"BatchRecordStatusMany":     batchBySeq,
	"BatchPayloadMarkVerified":  batchBySeq,
	"BatchCountByState":         fanOutRead,
	"BatchDepthByState":         fanOutRead,
	"BatchRunSummary":           "bench report, read-only, no loop or API path runs it",
	"BatchSeedFinished":         "bench only (--backlog-finished): no loop or API path runs it",
	"BatchDeleteFinished":       "CHANGES (step 5): retention across services with FOR UPDATE SKIP LOCKED; becomes a fan-out read of (service_id, seq) candidates and a DELETE by both keys, guarded by finished_at",

	// Wallet lane.
	"TaskGetByIdempotencyKey": apiByWallet,
	"TaskGet":                 apiByWallet,
	"WalletsUnfinishedTasks":  apiByWallet,
	"TaskList":                apiByWallet,
	"TaskCountByStatus":       "bench progress, read-only, no loop or API path runs it: counts the tasks of the run's wallets by wallet name",
	"TaskCancel":              apiByWallet,
	"TaskRequestCancel":       apiByWallet,
	"TaskGetForRequest":       apiByWallet,
	"TaskRequestSpeedUp":      apiByWallet,
	"TaskFinishCancelled":     taskByID,
	"TaskClearSpeedUp":        taskByID,
	"TaskRecordOutcomes":      taskByID,
	"TaskFinishDone":          taskByID,
	"TaskFinishError":         taskByID,
	"TaskReopen":              taskByID,
	"TaskRequeue":             taskByID,
	"TaskCountBump":           taskByID,
	"TaskMarkPriceCapped":     taskByID,
	"TaskRequeueReplaced":     taskByID,
	"TaskGetMany":             "CHANGES (step 2): a read of several tasks by id; group the ids by wallet and add (chain_id, sender), or fan out (read-only)",
	"TaskStartMany":           "CHANGES (step 2): the inner lock filters (chain_id, sender) but the UPDATE reaches its rows by id alone; add t.chain_id = @chain_id AND t.sender = @sender",
	"TaskSeedFinished":        "bench only (--backlog-finished): no loop or API path runs it",
	"TaskDeleteFinished":      "CHANGES (step 5): retention across wallets with FOR UPDATE SKIP LOCKED; becomes a fan-out read of candidates and a DELETE by (sender, id), guarded by finished_at",
	"AttemptMarkSent":         walletByHash,
	"AttemptConfirm":          walletByHash,
	"AttemptConfirmFinalMany": walletByHash + "; its tasks by id alone: add the same to the UPDATE of wallet_tasks",
	"AttemptMarkMined":        walletByHash,
	"AttemptReopen":           walletByHash,
	"AttemptDropByTask":       walletByHash,
	"AttemptListByTask":       walletByHash,
	"AttemptGetLiveOfTask":    walletByHash,
	"AttemptRecordBroadcast":  walletByHash,
	"AttemptDrop":             walletByHash,
	"AttemptSupersede":        walletByHash,
	"AttemptMineSuperseded":   walletByHash,
	"WalletListWithWork":      "the follower's discovery of wallets with work: a read-only fan-out (loose index scans per shard), no row lock; each wallet it finds is then scheduled by its shard key",

	// Webhook outbox (no chain_id or sender column yet).
	"WebhookDeliveryEmit":           "CHANGES (step 4): written inside a wallet's task change; gains the task's chain_id and sender so the row lands on the wallet's node (webhook_endpoints, a reference table, is joined locally)",
	"WebhookDeliveryClaim":          scanClaim + " (deliveries due across wallets)",
	"WebhookDeliveryMarkDelivered":  "CHANGES (step 4): by delivery id; the claim returns chain_id and sender, and the outcome filters on them",
	"WebhookDeliveryMarkFailed":     "CHANGES (step 4): by delivery id; the claim returns chain_id and sender, and the outcome filters on them",
	"WebhookDeliveryGet":            "tests and operators, by delivery id: a read-only fan-out",
	"WebhookDeliveryRetry":          "CHANGES (step 4): an operator's retry by delivery id (console, rare); once deliveries carry chain_id and sender, the console passes the endpoint's wallet's and the UPDATE filters on them",
	"WebhookDeliveryListByEndpoint": fanOutRead + " (console: an endpoint's deliveries; single-key once deliveries carry chain_id and sender, step 4)",
	"WebhookDeliveryCounts":         fanOutRead + " (console: backlog and given-up counts)",
	"WebhookDeliveryDeleteEnded":    "CHANGES (step 5): retention across wallets with FOR UPDATE SKIP LOCKED; becomes a fan-out read of candidates and a DELETE by (chain_id, sender, id), guarded by delivered_at or gave_up_at",

	// The console's overview and drill-downs: reads only, no row locks.
	"BatchListByServiceInOrder":         "CHANGES (step 1): filters batch_payloads on service_id but joins batches by seq alone; add b.service_id = p.service_id to the join (a co-located join)",
	"BatchFinishedPerMinute":            fanOutRead + " (console chart)",
	"BatchLastFinishedAt":               fanOutRead + " (console health)",
	"BundleCountLive":                   fanOutRead + " (console counts)",
	"BundleEndedPerMinute":              fanOutRead + " (console chart)",
	"BuilderChainLastApplied":           fanOutRead + " (console health)",
	"PoolTxCountWaiting":                fanOutRead + " (console counts)",
	"PoolTxListBySender":                fanOutRead + " (console: a sender's pool transactions on every chain; one chain's when the page names it)",
	"ShardCountPastLease":               fanOutRead + " (console health)",
	"AttemptMinedPerMinute":             fanOutRead + " (console chart)",
	"WalletHealthListStopped":           fanOutRead + " (console: paused and held wallets)",
	"WalletHealthLastRead":              fanOutRead + " (console health)",
	"WalletHealthListSignerUnavailable": fanOutRead + " (/readyz: wallets whose signer is unavailable)",
	"TaskCountLive":                     fanOutRead + " (console counts)",
	"TaskFinishedPerMinute":             fanOutRead + " (console chart)",

	// Builder lane.
	"PoolTxRevive":               "CHANGES (step 3): intake by (chain_id, tx_hash), single-shard under the chain key already; add sender = @sender so intake stays per sender",
	"PoolTxReplace":              "CHANGES (step 3): intake by (chain_id, tx_hash), single-shard under the chain key already; add sender = @sender so intake stays per sender",
	"PoolTxSetState":             "CHANGES (step 3): intake by (chain_id, tx_hash), single-shard under the chain key already; add sender = @sender so intake stays per sender",
	"PoolTxDrop":                 "CHANGES (step 3): intake by (chain_id, tx_hash), single-shard under the chain key already; add sender = @sender so intake stays per sender",
	"PoolTxExpire":               "CHANGES (step 3): the sweep locks by (chain_id, sender) but updates by (chain_id, tx_hash); add t.sender = expired.sender so it stays per sender",
	"PoolTxDeleteFinished":       "CHANGES (step 5): retention across chains with FOR UPDATE SKIP LOCKED; becomes a fan-out read of candidates and a DELETE by (chain_id, tx_hash), guarded by the state and updated_at",
	"BundleDeleteFinished":       "CHANGES (step 5): retention across chains with FOR UPDATE SKIP LOCKED; becomes a fan-out read of candidates and a DELETE by (chain_id, id) of each bundle with its versions and transactions, guarded by the state and its time",
	"BundleTxListRaw":            bundleByID,
	"BundleMarkSubmitted":        bundleByID,
	"BundleGuarantee":            bundleByID,
	"BundleAccumulate":           bundleByID,
	"BundleDropMany":             bundleByID,
	"BundleTxReturn":             bundleByID,
	"BundleGetByID":              bundleByID,
	"BundleVersionInsert":        versionNoKey,
	"BundleVersionGet":           versionNoKey,
	"BundleVersionSetOutcome":    versionNoKey,
	"BundleSubmitRefused":        versionNoKey,
	"BundleVersionSetGuaranteed": versionNoKey,
	"BundleRequeue":              versionNoKey,
	"BundleListTimedOut":         versionNoKey,
	"BundleDrop":                 versionNoKey,
	"BundleVersionList":          versionNoKey,

	// Shards.
	"ShardClaim":        scanClaim + " (oldest pending shard across keys)",
	"ShardRescue":       scanClaim + " (running shards whose holder is gone)",
	"ShardCountByState": fanOutRead,
}

// lineComment is a comment to the end of its line: sourceQueries drops the
// lines that are only a comment, this the comments after a statement's text.
var lineComment = regexp.MustCompile(`--[^\n]*`)

func stripComments(sql string) string { return lineComment.ReplaceAllString(sql, "") }

// tableUse is one mention of a distributed table: its alias ("" when
// none) and whether it is an INSERT's target (with its column list).
type tableUse struct {
	table, alias string
	insertCols   []string
	isInsert     bool
}

var (
	tableRef = regexp.MustCompile(`(?i)(\bINSERT\s+INTO\s+)?\bledgerq\.(\w+)\b(?:\s+(?:AS\s+)?(\w+))?(\s*\(([^)]*)\))?`)
	// Words that may follow a table name and are not an alias.
	notAlias = map[string]bool{
		"where": true, "set": true, "on": true, "join": true, "left": true, "inner": true, "cross": true,
		"order": true, "group": true, "limit": true, "for": true, "returning": true, "using": true,
		"values": true, "union": true, "and": true, "or": true, "select": true, "from": true,
		"default": true, "as": true, "with": true, "is": true, "then": true, "end": true,
	}
	setClause = regexp.MustCompile(`(?is)\bSET\b.*?(\bWHERE\b|\bFROM\b|\bRETURNING\b|$)`)
)

func tableUses(sql string) []tableUse {
	var uses []tableUse
	for _, m := range tableRef.FindAllStringSubmatch(sql, -1) {
		table := strings.ToLower(m[2])
		if _, ok := distKey[table]; !ok {
			continue
		}
		u := tableUse{table: table, isInsert: m[1] != ""}
		if a := strings.ToLower(m[3]); a != "" && !notAlias[a] {
			u.alias = a
		}
		if u.isInsert && m[4] != "" {
			for _, c := range strings.Split(m[5], ",") {
				u.insertCols = append(u.insertCols, strings.ToLower(strings.TrimSpace(c)))
			}
		}
		uses = append(uses, u)
	}
	return uses
}

// filters reports whether sql (SET lists removed) holds an equality or
// membership predicate on col, qualified by alias (or unqualified when
// alias is "").
func filters(sql, alias, col string) bool {
	var ref string
	if alias != "" {
		ref = `\b` + regexp.QuoteMeta(alias) + `\.` + regexp.QuoteMeta(col) + `\b`
	} else {
		ref = `(?:^|[^.\w])` + regexp.QuoteMeta(col) + `\b`
	}
	re := regexp.MustCompile(`(?i)` + ref + `\s*(?:=|\bIN\b)|=\s*` + ref)
	return re.MatchString(sql)
}

// missingKeys returns, for a query, each use of a distributed table that
// does not filter on (or insert) its key columns and the extra columns.
func missingKeys(sql string, extra []string) []string {
	preds := setClause.ReplaceAllString(sql, " $1")
	var missing []string
	for _, u := range tableUses(sql) {
		cols := append(append([]string(nil), distKey[u.table]...), extra...)
		for _, c := range cols {
			if c == "sender" && (u.table == "pool_chains" || u.table == "pool_admission_slots" || u.table == "builder_chains" || u.table == "bundles" ||
				u.table == "bundle_versions" || u.table == "cores") {
				continue // per-chain tables have no sender
			}
			ok := false
			if u.isInsert {
				for _, ic := range u.insertCols {
					ok = ok || ic == c
				}
			} else {
				ok = filters(preds, u.alias, c)
			}
			if !ok {
				name := u.table
				if u.alias != "" {
					name += " " + u.alias
				}
				missing = append(missing, name+": "+c)
			}
		}
	}
	return missing
}

func TestScalingPlanStatementsFilterOnDistributionKey(t *testing.T) {
	seen := map[string]bool{}
	for _, q := range sourceQueries(t) {
		seen[q.name] = true
		sql := stripComments(q.body)
		uses := tableUses(sql)
		extra, hot := singleKey[q.name]
		reason, cross := crossKey[q.name]
		switch {
		case hot && cross:
			t.Errorf("%s (%s) is listed both single-key and cross-key", q.name, q.file)
		case hot:
			if len(uses) == 0 {
				t.Errorf("%s (%s) is listed single-key but touches no distributed table", q.name, q.file)
			}
			if m := missingKeys(sql, extra); len(m) > 0 {
				t.Errorf("%s (%s) is a single-key statement of the scaling plan (docs/scaling.md) but does not filter on its distribution key: %s",
					q.name, q.file, strings.Join(m, ", "))
			}
		case cross:
			if strings.TrimSpace(reason) == "" {
				t.Errorf("%s (%s) is listed cross-key without a reason", q.name, q.file)
			}
		case len(uses) > 0:
			t.Errorf("%s (%s) touches a distributed table (%s) and is not classified: add it to singleKey (it filters on the key) or to crossKey with the reason, and to docs/scaling.md",
				q.name, q.file, uses[0].table)
		}
	}
	var gone []string
	for name := range singleKey {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	for name := range crossKey {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		t.Errorf("%s is classified in the scaling plan but no longer exists in queries/*.sql: update the table and docs/scaling.md", name)
	}
}
