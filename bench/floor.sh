#!/usr/bin/env bash
# The wallet lane's floor in PostgreSQL: what the rows of a send-tx task cost
# the database server alone, measured with pgbench on a fresh database that
# ledgerq migrated (the lane's real tables, indexes and row rules), with no
# ledgerq process running. bench/floor.sql has the two functions it drives:
#
#   intake  ledgerq_floor_intake, one autocommit INSERT of a task per call,
#           as POST send-tx stores one (--intake-clients clients);
#   lane    ledgerq_floor_cycle over a backlog the intake left, every row
#           change the lane makes for a task (claim, nonces, attempt stored,
#           task started, attempt sent, attempt confirmed and task done) in
#           one transaction per --budget tasks (--lane-clients clients).
#
# Each phase is timed by pgbench and by the machine's CPU (/proc/stat, less
# pgbench's own), so it prints the database's CPU per task of each phase and
# the ceiling they make together: CORES / (intake CPU + lane CPU) tasks/s, the
# most a lane that stores and moves these rows can finish per second on this
# machine while taking the same number in, before any of its own work. Run it
# on an otherwise idle machine.
#
#   usage: bench/floor.sh [ADMIN_URL] [--rounds N] [--seconds N] [--wallets N]
#                         [--budget N] [--intake-clients N] [--lane-clients N]
#
#   ADMIN_URL  a PostgreSQL URL whose user may create and drop databases
#              (default: $LEDGERQ_ADMIN_URL, else
#              postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)
#   --rounds N          rounds, each on a fresh database (default 3)
#   --seconds N         the intake phase's length; the lane phase runs a third
#                       of it, so that it does not run out of backlog (default 9)
#   --wallets N         wallets the tasks are spread over (default 10)
#   --budget N          tasks per lane round (default 20)
#   --intake-clients N  pgbench clients of the intake phase (default 16)
#   --lane-clients N    pgbench clients of the lane phase (default 2)
#
#   env: LEDGERQ  the ledgerq binary that migrates the databases (default:
#                 built from this checkout)
#        PGBENCH  pgbench (default: pgbench on PATH, else the newest
#                 /usr/lib/postgresql/*/bin/pgbench)
#
# The last line is "floor: intake … ms, lane … ms of database CPU per task;
# ceiling … tasks/s on N cores" (medians of the rounds), for bench/report.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
admin=${LEDGERQ_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
rounds=3 seconds=9 wallets=10 budget=20 iclients=16 lclients=2
num() { case $2 in '' | *[!0-9]* | 0) echo "bench/floor.sh: $1 wants a positive number" >&2; exit 2 ;; esac; }
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) num "$1" "${2:-}"; rounds=$2; shift 2 ;;
	--seconds) num "$1" "${2:-}"; seconds=$2; shift 2 ;;
	--wallets) num "$1" "${2:-}"; wallets=$2; shift 2 ;;
	--budget) num "$1" "${2:-}"; budget=$2; shift 2 ;;
	--intake-clients) num "$1" "${2:-}"; iclients=$2; shift 2 ;;
	--lane-clients) num "$1" "${2:-}"; lclients=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "bench/floor.sh: unknown flag $1" >&2; exit 2 ;;
	*) admin=$1; shift ;;
	esac
done
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

# phase URL SCRIPT CLIENTS SECONDS: runs pgbench; sets $tps and $cpu, the
# machine's busy CPU seconds during it less pgbench's own.
phase() {
	local before after t0 own
	before=$(busy)
	local TIMEFORMAT='%U %S'
	t0=$({ time "$pgbench" -n -M prepared -c "$3" -j "$(( $3 < cores ? $3 : cores ))" -T "$4" -f "$2" "$1" >"$work/out" 2>&1; } 2>&1) ||
		{ cat "$work/out" >&2; say "pgbench failed"; exit 1; }
	after=$(busy)
	own=$(echo "$t0" | awk '{ print $1 + $2 }')
	tps=$(sed -nE 's/^tps = ([0-9.]+) .*/\1/p' "$work/out" | head -1)
	cpu=$(awk -v a="$after" -v b="$before" -v t="$tck" -v o="$own" 'BEGIN { printf "%.3f\n", (a - b) / t - o }')
}
count() { psql "$1" -X -q -t -A -c "SELECT count(*) FROM ledgerq.wallet_tasks WHERE status = $2"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ledgerq-floor.XXXXXX")
printf '\\set s random(1, %d)\nSELECT ledgerq_floor_intake(:s);\n' "$wallets" >"$work/intake.pgb"
printf '\\set s random(1, %d)\nSELECT ledgerq_floor_cycle(:s, %d);\n' "$wallets" "$budget" >"$work/lane.pgb"
lane_seconds=$(( seconds / 3 > 0 ? seconds / 3 : 1 ))

say "$cores cores; PostgreSQL $(psql_admin -c 'show server_version'); $wallets wallets, $iclients intake clients for ${seconds}s, $lclients lane clients (budget $budget) for ${lane_seconds}s"
: >"$work/values"
for r in $(seq "$rounds"); do
	db=floor_$$_$r
	dbs+=("$db")
	psql_admin -c "CREATE DATABASE $db" >/dev/null
	url=$(db_url "$db")
	"$lq" migrate --database-url "$url" up >/dev/null 2>&1 || { say "migrating $db failed"; exit 1; }
	psql "$url" -X -q -v ON_ERROR_STOP=1 -f "$here/floor.sql" >/dev/null
	# A first round of every wallet and statistics, as a lane that has run
	# a while has them.
	psql "$url" -X -q -t -A -v ON_ERROR_STOP=1 \
		-c "SELECT count(ledgerq_floor_intake(s)) FROM generate_series(1, $wallets) s, generate_series(1, 300)" \
		-c "SELECT sum(ledgerq_floor_cycle(s, 300)) FROM generate_series(1, $wallets) s" \
		-c "ANALYZE ledgerq.wallet_tasks" -c "ANALYZE ledgerq.tx_attempts" -c "ANALYZE ledgerq.wallet_nonces" >/dev/null
	done0=$(count "$url" 3)
	phase "$url" "$work/intake.pgb" "$iclients" "$seconds"
	waiting=$(count "$url" 0)
	itps=$tps icpu=$(awk -v c="$cpu" -v n="$waiting" 'BEGIN { printf "%.4f\n", c * 1000 / n }')
	phase "$url" "$work/lane.pgb" "$lclients" "$lane_seconds"
	moved=$(( $(count "$url" 3) - done0 ))
	left=$(count "$url" 0)
	lrate=$(awk -v m="$moved" -v s="$lane_seconds" 'BEGIN { printf "%.0f\n", m / s }')
	lcpu=$(awk -v c="$cpu" -v n="$moved" 'BEGIN { printf "%.4f\n", c * 1000 / n }')
	ceiling=$(awk -v a="$icpu" -v b="$lcpu" -v n="$cores" 'BEGIN { printf "%.0f\n", n * 1000 / (a + b) }')
	note=
	[ "$left" -eq 0 ] && note=" (the lane ran out of backlog: its figures are bounds)"
	say "round $r: intake $(printf '%.0f' "$itps") tasks/s, $icpu ms CPU per task; lane $lrate tasks/s, $lcpu ms CPU per task$note; ceiling $ceiling tasks/s"
	echo "$icpu $lcpu $ceiling $itps $lrate" >>"$work/values"
	psql_admin -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
done
med() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v c="$1" '{ print $c }' "$work/values" | med; }
rm -rf "$work/out" "$work/intake.pgb" "$work/lane.pgb"
echo "floor: intake $(col 1) ms, lane $(col 2) ms of database CPU per task; ceiling $(printf '%.0f' "$(col 3)") tasks/s on $cores cores (rounds: $(awk '{ printf "%s%s", (NR > 1 ? ", " : ""), $3 }' "$work/values")); pgbench alone: intake $(printf '%.0f' "$(col 4)") tasks/s, lane $(printf '%.0f' "$(col 5)") tasks/s"
rm -rf "$work"
