#!/usr/bin/env bash
# The lanes' floors in PostgreSQL: what the rows of a lane's work cost the
# database server alone, measured with pgbench on a fresh database that
# ledgerq migrated (the lanes' real tables, indexes and row rules), with no
# ledgerq process running. bench/floor.sql has the functions it drives.
#
# The wallet lane (--lane wallet, the default), per send-tx task:
#   intake  ledgerq_floor_intake, one autocommit INSERT of a task per call,
#           as POST send-tx stores one (--intake-clients clients);
#   lane    ledgerq_floor_cycle over a backlog the intake left, every row
#           change the lane makes for a task (claim, nonces, attempt stored,
#           task started, attempt sent, attempt confirmed and task done) in
#           one transaction per --budget tasks (--lane-clients clients).
#
# The builder lane (--lane builder), per transaction /rpc takes in:
#   intake  ledgerq_floor_pool_group, one group of --group intakes of
#           different senders in one transaction, with the statements the
#           grouped intake runs (each sender's lock and reads, each row and
#           next nonce, the admission slots and bound, the wake-up), by
#           --pool-clients clients: the intake runs at most 6 intakes a
#           group and 2 groups at once; --senders senders at a time send
#           --txs-per-sender transactions each, as `ledgerq bench builder`.
#
# The batch lane (--lane batch), per batch:
#   intake  ledgerq_floor_batch_intake, --insert-size batches of random
#           services out of --services (--payload-bytes each) in one
#           autocommit statement, as BatchInsert stores a request's
#           (--batch-intake-clients clients);
#   lane    ledgerq_floor_batch_cycle over the backlog the intake left, the
#           monitor's round over --batch-budget held batches: each committed,
#           each freed service's lock taken and its next batch claimed with
#           its payload, in one transaction (--batch-lane-clients clients).
#
# Each phase is timed by pgbench and by the machine's CPU (/proc/stat, less
# pgbench's own; for the batch lane, when the server runs on this machine,
# the CPU of the server's own processes instead, which whatever else runs
# on the machine meanwhile does not inflate), so it prints the database's
# CPU per task (transaction, batch) of each phase and the ceiling they make: CORES / (intake CPU + lane
# CPU) per second, the most a lane that stores and moves these rows can
# finish per second on this machine while taking the same number in, before
# any of its own work (the builder's ceiling is its intake's alone; the batch
# lane's is printed too for the lane alone, from a backlog, as `ledgerq bench
# batches --mode preload` runs it). Run it on an otherwise idle machine.
#
#   usage: bench/floor.sh [ADMIN_URL] [--lane LIST] [--rounds N] [--seconds N]
#                         [--wallets N] [--budget N] [--intake-clients N]
#                         [--lane-clients N] [--senders N] [--txs-per-sender N]
#                         [--group N] [--pool-clients N] [--services N]
#                         [--insert-size N] [--payload-bytes N]
#                         [--batch-budget N] [--batch-intake-clients N]
#                         [--batch-lane-clients N]
#
#   ADMIN_URL  a PostgreSQL URL whose user may create and drop databases
#              (default: $LEDGERQ_ADMIN_URL, else
#              postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)
#   --lane LIST         comma-separated floors to measure: wallet, builder,
#                       batch (default wallet)
#   --rounds N          rounds, each lane's on a fresh database (default 3)
#   --seconds N         each intake phase's length; a lane phase runs a
#                       third of it (the batch lane's a quarter), so that it
#                       does not run out of backlog (default 9)
#   --wallets N         wallets the tasks are spread over (default 10)
#   --budget N          tasks per lane round (default 20)
#   --intake-clients N  pgbench clients of the wallet intake (default 16)
#   --lane-clients N    pgbench clients of the wallet lane (default 2)
#   --senders N         builder: senders sending at a time (default 200)
#   --txs-per-sender N  builder: transactions of each sender (default 16)
#   --group N           builder: intakes per transaction (default 6)
#   --pool-clients N    builder: pgbench clients, groups at once (default 2)
#   --services N        batch: services the batches are spread over
#                       (default 1000)
#   --insert-size N     batch: batches per intake statement (default 10)
#   --payload-bytes N   batch: each batch's payload (default 600)
#   --batch-budget N    batch: batches per monitor round, as the lane's
#                       --batch-check-batch-size (default 500)
#   --batch-intake-clients N  batch: pgbench clients of the intake (default 4)
#   --batch-lane-clients N    batch: pgbench clients of the lane (default 2)
#
#   env: LEDGERQ  the ledgerq binary that migrates the databases (default:
#                 built from this checkout)
#        PGBENCH  pgbench (default: pgbench on PATH, else the newest
#                 /usr/lib/postgresql/*/bin/pgbench)
#
# The last lines, one per lane, are (medians of the rounds), for
# bench/report.sh:
#   floor: intake … ms, lane … ms of database CPU per task; ceiling … tasks/s on N cores …
#   floor: builder intake … ms of database CPU per transaction; ceiling … tx/s on N cores …
#   floor: batch intake … ms, lane … ms of database CPU per batch; ceiling … batches/s taken in and finished, … batches/s finished from a backlog on N cores …
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
admin=${LEDGERQ_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
lanes=wallet rounds=3 seconds=9 wallets=10 budget=20 iclients=16 lclients=2
senders=200 per_sender=16 group=6 pclients=2
services=1000 insert_size=10 payload=600 bbudget=500 biclients=4 blclients=2
num() { case $2 in '' | *[!0-9]* | 0) echo "bench/floor.sh: $1 wants a positive number" >&2; exit 2 ;; esac; }
while [ $# -gt 0 ]; do
	case $1 in
	--lane) lanes=${2:?--lane LIST}; shift 2 ;;
	--rounds) num "$1" "${2:-}"; rounds=$2; shift 2 ;;
	--seconds) num "$1" "${2:-}"; seconds=$2; shift 2 ;;
	--wallets) num "$1" "${2:-}"; wallets=$2; shift 2 ;;
	--budget) num "$1" "${2:-}"; budget=$2; shift 2 ;;
	--intake-clients) num "$1" "${2:-}"; iclients=$2; shift 2 ;;
	--lane-clients) num "$1" "${2:-}"; lclients=$2; shift 2 ;;
	--senders) num "$1" "${2:-}"; senders=$2; shift 2 ;;
	--txs-per-sender) num "$1" "${2:-}"; per_sender=$2; shift 2 ;;
	--group) num "$1" "${2:-}"; group=$2; shift 2 ;;
	--pool-clients) num "$1" "${2:-}"; pclients=$2; shift 2 ;;
	--services) num "$1" "${2:-}"; services=$2; shift 2 ;;
	--insert-size) num "$1" "${2:-}"; insert_size=$2; shift 2 ;;
	--payload-bytes) num "$1" "${2:-}"; payload=$2; shift 2 ;;
	--batch-budget) num "$1" "${2:-}"; bbudget=$2; shift 2 ;;
	--batch-intake-clients) num "$1" "${2:-}"; biclients=$2; shift 2 ;;
	--batch-lane-clients) num "$1" "${2:-}"; blclients=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "bench/floor.sh: unknown flag $1" >&2; exit 2 ;;
	*) admin=$1; shift ;;
	esac
done
for lane in ${lanes//,/ }; do
	case $lane in wallet | builder | batch) ;; *) echo "bench/floor.sh: --lane: unknown lane $lane (wallet, builder, batch)" >&2; exit 2 ;; esac
done
[ "$group" -le "$senders" ] || { echo "bench/floor.sh: --group must not exceed --senders (a group's intakes are of different senders)" >&2; exit 2; }
[ -r /proc/stat ] || { echo "bench/floor.sh: needs Linux's /proc/stat to count CPU" >&2; exit 1; }
command -v psql >/dev/null || { echo "bench/floor.sh: psql is needed (apt-get install postgresql-client)" >&2; exit 1; }
pgbench=${PGBENCH:-}
if [ -z "$pgbench" ]; then
	pgbench=$(command -v pgbench || ls -d /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -1 || true)
fi
[ -n "$pgbench" ] && [ -x "$pgbench" ] || { echo "bench/floor.sh: pgbench not found (set PGBENCH)" >&2; exit 1; }
lq=${LEDGERQ:-}
if [ -z "$lq" ]; then
	lq=$(mktemp -d "${TMPDIR:-/tmp}/ledgerq-floor-bin.XXXXXX")/ledgerq
	echo "floor: building ledgerq into $lq" >&2
	(cd "$here/.." && go build -o "$lq" ./cmd/ledgerq)
fi

say() { echo "floor: $*" >&2; }
base=${admin%%\?*} query=
[ "$base" != "$admin" ] && query="?${admin#*\?}"
db_url() { echo "${base%/*}/$1$query"; }
psql_admin() { psql "$admin" -X -q -t -A -v ON_ERROR_STOP=1 "$@"; }
dbs=()
cleanup() {
	local d
	for d in "${dbs[@]}"; do psql_admin -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

# busy: the machine's busy CPU time so far, in clock ticks (user, nice,
# system, irq and softirq; not iowait, and not steal, which is the
# hypervisor's).
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat; }
tck=$(getconf CLK_TCK)
cores=$(nproc)

# server: the PostgreSQL server's postmaster, when it runs on this machine
# (the first line of postmaster.pid in its data directory names a process
# called postgres), else empty.
server() {
	local d p
	d=$(psql_admin -c 'SHOW data_directory' 2>/dev/null) || return 0
	p=$(head -1 "$d/postmaster.pid" 2>/dev/null) || return 0
	[ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = postgres ] && echo "$p"
	true
}
# server_cpu: the server's CPU time so far, in clock ticks: the
# postmaster's own and its finished children's (user and system), and each
# running child's (backends, WAL writer, checkpointer, autovacuum). Other
# programs on the machine are left out.
server_cpu() {
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v pm="$pg_server" '{
		sub(/^[0-9]+ \(.*\) /, "", $0); split($0, f, " ")
		# f[2] is the parent; f[12], f[13] user and system; f[14], f[15] those of reaped children.
		if (f[2] == pm) t += f[12] + f[13]
	} END { print t + 0 }'
	sed 's/^.*) //' "/proc/$pg_server/stat" | awk '{ print $12 + $13 + $14 + $15 }'
}
# quiet URL: waits until the database has no backend but this check's
# (pgbench's have gone and been reaped), so that their CPU is the
# postmaster's children's.
quiet() {
	for _ in $(seq 50); do
		[ "$(sql "$1" "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")" = 0 ] && break
		sleep 0.1
	done
	sleep 0.2
}
# meter: what phase counts as the database's CPU: "machine" (the machine's
# busy time less pgbench's own) or "server" (the PostgreSQL server's
# processes alone, which other programs running meanwhile do not inflate;
# the batch lane's phases use it when the server runs on this machine).
meter=machine
pg_server=$(server)

# phase URL SCRIPT CLIENTS SECONDS: runs pgbench; sets $tps and $cpu, the
# database's CPU seconds during it (see meter).
phase() {
	local before after t0 own
	if [ "$meter" = server ]; then
		quiet "$1"
		before=$(server_cpu | awk '{ t += $1 } END { print t }')
	else
		before=$(busy)
	fi
	local TIMEFORMAT='%U %S'
	t0=$({ time "$pgbench" -n -M prepared -c "$3" -j "$(( $3 < cores ? $3 : cores ))" -T "$4" -f "$2" "$1" >"$work/out" 2>&1; } 2>&1) ||
		{ cat "$work/out" >&2; say "pgbench failed"; exit 1; }
	own=$(echo "$t0" | awk '{ print $1 + $2 }')
	if [ "$meter" = server ]; then
		quiet "$1"
		after=$(server_cpu | awk '{ t += $1 } END { print t }')
		own=0
	else
		after=$(busy)
	fi
	tps=$(sed -nE 's/^tps = ([0-9.]+) .*/\1/p' "$work/out" | head -1)
	cpu=$(awk -v a="$after" -v b="$before" -v t="$tck" -v o="$own" 'BEGIN { printf "%.3f\n", (a - b) / t - o }')
}
sql() { psql "$1" -X -q -t -A -v ON_ERROR_STOP=1 -c "$2"; }
count() { sql "$1" "SELECT count(*) FROM ledgerq.wallet_tasks WHERE status = $2"; }
# per_ms CPU N: CPU seconds over N items, in ms each.
per_ms() { awk -v c="$1" -v n="$2" 'BEGIN { printf "%.4f\n", (n > 0) ? c * 1000 / n : 0 }'; }
# fresh: a new database for a lane's round, migrated, with bench/floor.sql
# loaded; sets $url.
fresh() {
	local db=floor_$$_$1_$2
	dbs+=("$db")
	psql_admin -c "CREATE DATABASE $db" >/dev/null
	url=$(db_url "$db")
	"$lq" migrate --database-url "$url" up >/dev/null 2>&1 || { say "migrating $db failed"; exit 1; }
	psql "$url" -X -q -v ON_ERROR_STOP=1 -f "$here/floor.sql" >/dev/null
}
drop() { psql_admin -c "DROP DATABASE IF EXISTS floor_$$_$1_$2 WITH (FORCE)" >/dev/null; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ledgerq-floor.XXXXXX")
lane_seconds=$(( seconds / 3 > 0 ? seconds / 3 : 1 ))
# The batch lane moves about three times what its intake stores per second.
blane_seconds=$(( seconds / 4 > 0 ? seconds / 4 : 1 ))

# wallet_round R: one round of the wallet lane's floor; appends "intake-CPU
# lane-CPU ceiling intake-tps lane-tps" to $work/wallet.
wallet_round() {
	printf '\\set s random(1, %d)\nSELECT ledgerq_floor_intake(:s);\n' "$wallets" >"$work/intake.pgb"
	printf '\\set s random(1, %d)\nSELECT ledgerq_floor_cycle(:s, %d);\n' "$wallets" "$budget" >"$work/lane.pgb"
	fresh wallet "$1"
	# A first round of every wallet and statistics, as a lane that has run
	# a while has them.
	psql "$url" -X -q -t -A -v ON_ERROR_STOP=1 \
		-c "SELECT count(ledgerq_floor_intake(s)) FROM generate_series(1, $wallets) s, generate_series(1, 300)" \
		-c "SELECT sum(ledgerq_floor_cycle(s, 300)) FROM generate_series(1, $wallets) s" \
		-c "ANALYZE ledgerq.wallet_tasks" -c "ANALYZE ledgerq.tx_attempts" -c "ANALYZE ledgerq.wallet_nonces" >/dev/null
	local done0 waiting itps icpu moved left lrate lcpu ceiling note=
	done0=$(count "$url" 3)
	phase "$url" "$work/intake.pgb" "$iclients" "$seconds"
	waiting=$(count "$url" 0)
	itps=$tps icpu=$(per_ms "$cpu" "$waiting")
	phase "$url" "$work/lane.pgb" "$lclients" "$lane_seconds"
	moved=$(( $(count "$url" 3) - done0 ))
	left=$(count "$url" 0)
	lrate=$(awk -v m="$moved" -v s="$lane_seconds" 'BEGIN { printf "%.0f\n", m / s }')
	lcpu=$(per_ms "$cpu" "$moved")
	ceiling=$(awk -v a="$icpu" -v b="$lcpu" -v n="$cores" 'BEGIN { printf "%.0f\n", n * 1000 / (a + b) }')
	[ "$left" -eq 0 ] && note=" (the lane ran out of backlog: its figures are bounds)"
	say "wallet round $1: intake $(printf '%.0f' "$itps") tasks/s, $icpu ms CPU per task; lane $lrate tasks/s, $lcpu ms CPU per task$note; ceiling $ceiling tasks/s"
	echo "$icpu $lcpu $ceiling $itps $lrate" >>"$work/wallet"
	drop wallet "$1"
}

# builder_round R: one round of the builder intake's floor; appends
# "CPU ceiling tx/s" to $work/builder.
builder_round() {
	printf 'SELECT ledgerq_floor_pool_group(%d, %d, %d);\n' "$senders" "$per_sender" "$group" >"$work/pool.pgb"
	fresh builder "$1"
	# The chain counted and a first round of every sender, with statistics.
	psql "$url" -X -q -t -A -v ON_ERROR_STOP=1 -c "SELECT ledgerq_floor_pool_setup()" \
		-c "SELECT sum(ledgerq_floor_pool_group($senders, $per_sender, $group)) FROM generate_series(1, $(( (senders * per_sender + group - 1) / group )))" \
		-c "ANALYZE ledgerq.pool_txs" -c "ANALYZE ledgerq.pool_senders" >/dev/null
	local n0 stored rate pcpu ceiling
	n0=$(sql "$url" "SELECT count(*) FROM ledgerq.pool_txs")
	phase "$url" "$work/pool.pgb" "$pclients" "$seconds"
	stored=$(( $(sql "$url" "SELECT count(*) FROM ledgerq.pool_txs") - n0 ))
	rate=$(awk -v m="$stored" -v s="$seconds" 'BEGIN { printf "%.0f\n", m / s }')
	pcpu=$(per_ms "$cpu" "$stored")
	ceiling=$(awk -v a="$pcpu" -v n="$cores" 'BEGIN { printf "%.0f\n", (a > 0) ? n * 1000 / a : 0 }')
	say "builder round $1: intake $rate tx/s in groups of $group, $pcpu ms CPU per transaction; ceiling $ceiling tx/s"
	echo "$pcpu $ceiling $rate" >>"$work/builder"
	drop builder "$1"
}

# batch_round R: one round of the batch lane's floor; appends "intake-CPU
# lane-CPU ceiling backlog-ceiling intake-rate lane-rate" to $work/batch.
batch_round() {
	printf 'SELECT ledgerq_floor_batch_intake(%d, %d, %d);\n' "$services" "$insert_size" "$payload" >"$work/bintake.pgb"
	printf 'SELECT ledgerq_floor_batch_cycle(%d);\n' "$bbudget" >"$work/blane.pgb"
	fresh batch "$1"
	local all="(SELECT array_agg('floor-' || s) FROM generate_series(1, $services) s)"
	# A first round of every service, committed, and statistics.
	psql "$url" -X -q -t -A -v ON_ERROR_STOP=1 \
		-c "SELECT sum(ledgerq_floor_batch_intake($services, $insert_size, $payload)) FROM generate_series(1, $(( services * 3 / insert_size + 1 )))" \
		-c "ANALYZE ledgerq.batches" -c "ANALYZE ledgerq.batch_payloads" >/dev/null
	sql "$url" "SELECT ledgerq_floor_batch_claim($all)" >/dev/null
	while [ "$(sql "$url" "SELECT ledgerq_floor_batch_cycle($bbudget)")" -gt 0 ]; do :; done
	# The server's own CPU, when it runs here: the lane's figure is read
	# against it, and the machine's busy time would charge it with whatever
	# else ran meanwhile.
	[ -n "$pg_server" ] && meter=server
	local n0 stored irate icpu done0 moved left lrate lcpu ceiling backlog note=
	n0=$(sql "$url" "SELECT count(*) FROM ledgerq.batches")
	phase "$url" "$work/bintake.pgb" "$biclients" "$seconds"
	stored=$(( $(sql "$url" "SELECT count(*) FROM ledgerq.batches") - n0 ))
	irate=$(awk -v m="$stored" -v s="$seconds" 'BEGIN { printf "%.0f\n", m / s }')
	icpu=$(per_ms "$cpu" "$stored")
	# Every service's first batch held, as the monitor's admission leaves
	# a busy lane.
	sql "$url" "SELECT ledgerq_floor_batch_claim($all)" >/dev/null
	done0=$(sql "$url" "SELECT count(*) FROM ledgerq.batches WHERE status = 'committed'")
	phase "$url" "$work/blane.pgb" "$blclients" "$blane_seconds"
	moved=$(( $(sql "$url" "SELECT count(*) FROM ledgerq.batches WHERE status = 'committed'") - done0 ))
	left=$(sql "$url" "SELECT count(*) FROM ledgerq.batches WHERE status IS NULL AND NOT submitted")
	lrate=$(awk -v m="$moved" -v s="$blane_seconds" 'BEGIN { printf "%.0f\n", m / s }')
	lcpu=$(per_ms "$cpu" "$moved")
	ceiling=$(awk -v a="$icpu" -v b="$lcpu" -v n="$cores" 'BEGIN { printf "%.0f\n", n * 1000 / (a + b) }')
	backlog=$(awk -v b="$lcpu" -v n="$cores" 'BEGIN { printf "%.0f\n", (b > 0) ? n * 1000 / b : 0 }')
	[ "$left" -eq 0 ] && note=" (the lane ran out of backlog: its figures are bounds)"
	say "batch round $1: intake $irate batches/s, $icpu ms CPU per batch; lane $lrate batches/s, $lcpu ms CPU per batch$note; ceiling $ceiling batches/s taken in and finished, $backlog from a backlog (CPU of $([ "$meter" = server ] && echo "the server's processes" || echo "the machine less pgbench"))"
	echo "$icpu $lcpu $ceiling $backlog $irate $lrate" >>"$work/batch"
	meter=machine
	drop batch "$1"
}

runs() { [[ ",$lanes," == *",$1,"* ]]; }
say "$cores cores; PostgreSQL $(psql_admin -c 'show server_version'); lanes $lanes; intake phases ${seconds}s, lane phases ${lane_seconds}s"
runs wallet && say "wallet: $wallets wallets, $iclients intake clients, $lclients lane clients (budget $budget)"
runs builder && say "builder: $senders senders x $per_sender transactions, groups of $group, $pclients clients"
runs batch && say "batch: $services services, $insert_size batches of $payload bytes per intake statement, $biclients intake clients, $blclients lane clients (budget $bbudget), lane phase ${blane_seconds}s"
: >"$work/wallet"
: >"$work/builder"
: >"$work/batch"
for r in $(seq "$rounds"); do
	if runs wallet; then wallet_round "$r"; fi
	if runs builder; then builder_round "$r"; fi
	if runs batch; then batch_round "$r"; fi
done
med() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# col FILE N: the median of column N of FILE.
col() { awk -v c="$2" '{ print $c }' "$work/$1" | med; }
# each FILE N: column N of every round, comma-separated.
each() { awk -v c="$2" '{ printf "%s%s", (NR > 1 ? ", " : ""), $c }' "$work/$1"; }
int() { printf '%.0f' "$1"; }
if runs wallet; then
	echo "floor: intake $(col wallet 1) ms, lane $(col wallet 2) ms of database CPU per task; ceiling $(int "$(col wallet 3)") tasks/s on $cores cores (rounds: $(each wallet 3)); pgbench alone: intake $(int "$(col wallet 4)") tasks/s, lane $(int "$(col wallet 5)") tasks/s"
fi
if runs builder; then
	echo "floor: builder intake $(col builder 1) ms of database CPU per transaction; ceiling $(int "$(col builder 2)") tx/s on $cores cores (rounds: $(each builder 2)); pgbench alone: $(int "$(col builder 3)") tx/s with $pclients clients in groups of $group"
fi
if runs batch; then
	echo "floor: batch intake $(col batch 1) ms, lane $(col batch 2) ms of database CPU per batch; ceiling $(int "$(col batch 3)") batches/s taken in and finished, $(int "$(col batch 4)") batches/s finished from a backlog on $cores cores (rounds: $(each batch 4)); pgbench alone: intake $(int "$(col batch 5)") batches/s, lane $(int "$(col batch 6)") batches/s"
fi
rm -rf "$work"
