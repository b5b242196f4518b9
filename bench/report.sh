#!/usr/bin/env bash
# The Performance table (docs/benchmarking.md) in one command: every lane's `ledgerq bench`
# runs (and River's benchmark, for the batch lane), in interleaved rounds (each
# round runs every workload once, in the same order), each ledgerq run on a
# fresh database (created, migrated, run, dropped). Progress goes to stderr, the
# markdown table to stdout: medians of the rounds and the rounds' values, each
# with its target and whether it is met, then the machine, the commit and the
# exact commands.
#
#   usage: bench/report.sh [ADMIN_URL] [--rounds N] [--quick] [--only LIST]
#                          [--backlog N] [--logs DIR]
#
#   ADMIN_URL   a PostgreSQL URL whose user may create and drop databases
#               (default: $LEDGERQ_ADMIN_URL, else
#               postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)
#   --rounds N  rounds (default 3)
#   --quick     small sizes, for a smoke check of the script (a minute or two);
#               the figures mean nothing
#   --only LIST comma-separated lanes to run: batches, wallets, builder
#               (default all)
#   --backlog N finished rows seeded for the backlog rows (default 1000000;
#               10000 with --quick)
#   --logs DIR  keep every run's output there (default: a temporary directory,
#               kept and named on stderr)
#
#   env: LEDGERQ  the ledgerq binary (default: built from this checkout into
#                 the cache directory)
#        RIVER    River's CLI (default: river on PATH or ~/go/bin/river, else
#                 built into the cache directory from
#                 github.com/riverqueue/river/cmd/river $RIVER_VERSION, v0.26.0,
#                 through the Go module proxy; RIVER=none, or a failed build,
#                 and the River row says "River not installed")
#        GETH     geth for the wallet lane's real-node row and the builder
#                 lane's baseline (default: $LEDGERQ_TEST_GETH, else geth on
#                 PATH; without it those rows say "geth not installed")
#        LEDGERQ_BENCH_CACHE  the cache directory (default
#                 ${XDG_CACHE_HOME:-~/.cache}/ledgerq-bench)
#        BATCH_FLAGS  extra loop settings for every `ledgerq bench batches`
#                 run (default none: the commands run as written, and bench
#                 batches first asks about a batch when the simulated ledger
#                 commits it)
#
# The floors (bench/floor.sh, pgbench: each lane's rows alone in PostgreSQL,
# no ledgerq process) run in every round of their lane, and the table reads
# the lane against them: the wallet lane's ceiling, the builder's /rpc
# intake over its intake's floor, the batch lane's preload over its floor.
#
# Workloads a binary does not have yet (a flag missing from its --help) are
# reported as "n/a (not supported by this binary)".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

admin=${LEDGERQ_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
rounds=3
quick=false
only=batches,wallets,builder
backlog=
logs=
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=${2:?--rounds N}; shift 2 ;;
	--rounds=*) rounds=${1#*=}; shift ;;
	--quick) quick=true; shift ;;
	--only) only=${2:?--only LIST}; shift 2 ;;
	--only=*) only=${1#*=}; shift ;;
	--backlog) backlog=${2:?--backlog N}; shift 2 ;;
	--backlog=*) backlog=${1#*=}; shift ;;
	--logs) logs=${2:?--logs DIR}; shift 2 ;;
	--logs=*) logs=${1#*=}; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "bench/report.sh: unknown flag $1" >&2; exit 2 ;;
	*) admin=$1; shift ;;
	esac
done
case $rounds in '' | *[!0-9]* | 0) echo "bench/report.sh: --rounds wants a positive number" >&2; exit 2 ;; esac
for lane in ${only//,/ }; do
	case $lane in batches | wallets | builder) ;; *) echo "bench/report.sh: --only: unknown lane $lane (batches, wallets, builder)" >&2; exit 2 ;; esac
done
runs() { [[ ",$only," == *",$1,"* ]]; }

say() { echo "report: $*" >&2; }

command -v psql >/dev/null || { echo "bench/report.sh: psql is needed (apt-get install postgresql-client)" >&2; exit 1; }
psql_admin() { psql "$admin" -X -q -t -A -v ON_ERROR_STOP=1 "$@"; }
psql_admin -c 'select 1' >/dev/null || { echo "bench/report.sh: cannot connect to $admin" >&2; exit 1; }

# Sizes. The full sizes are docs/benchmarking.md's; --quick shrinks every workload.
if $quick; then
	backlog=${backlog:-10000}
	river_jobs=10000
	preload="--services 100 --batches-per-service 20"
	e2e="--services 20 --batches-per-service 20"
	http="--services 100 --batches-per-service 10 --insert-size 10"
	wallets="--wallets 3 --tasks-per-wallet 20"
	wallets_http="--wallets 3 --tasks-per-wallet 50"
	floor="--rounds 1 --seconds 3"
	builder="--senders 20 --txs-per-sender 4 --clients 4"
else
	backlog=${backlog:-1000000}
	river_jobs=100000
	preload="--services 1000 --batches-per-service 100"
	e2e="--services 100 --batches-per-service 100"
	http="--services 1000 --batches-per-service 10 --insert-size 100"
	wallets="--wallets 10 --tasks-per-wallet 200"
	wallets_http="--wallets 10 --tasks-per-wallet 1000"
	floor="--rounds 1"
	builder="--senders 200 --txs-per-sender 16 --clients 20"
fi
sim0="--batch-sim-commit-delay 0 --batch-sim-verify=false"
batch_flags=${BATCH_FLAGS-}
# The pool's limits raised so that no transaction of the workload is refused.
pool_limits="--builder-pool-max-pending 100000 --builder-pool-max-queued 100000 --builder-pool-max-per-sender 1000"

cache=${LEDGERQ_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ledgerq-bench}
mkdir -p "$cache"
if [ -z "$logs" ]; then
	logs=$(mktemp -d "${TMPDIR:-/tmp}/ledgerq-report.XXXXXX")
else
	mkdir -p "$logs"
fi
say "every run's output is kept in $logs"

# The ledgerq binary and its commit.
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	commit="$commit (with uncommitted changes)"
fi
if [ -n "${LEDGERQ:-}" ]; then
	lq=$LEDGERQ
	commit="$commit ($lq, given)"
else
	lq=$cache/ledgerq
	say "building ledgerq ($commit) into $lq"
	(cd "$repo" && go build -o "$lq" ./cmd/ledgerq)
fi

# supports WORKLOAD FLAG: the binary's workload takes FLAG (a line of its
# --help's flag list starts with it).
# grep reads the whole help (no -q): under pipefail, a grep that quits at
# the first match makes the help's writer fail on the closed pipe.
supports() { "$lq" bench "$1" --help 2>&1 | grep -E -- "^ +$2[[:space:]]" >/dev/null; }

# River's CLI.
river=${RIVER:-}
if [ "$river" = none ]; then
	river=
elif [ -n "$river" ] && ! [ -x "$river" ] && ! command -v "$river" >/dev/null; then
	say "RIVER=$river is not a program: the River row is skipped"
	river=
elif [ -z "$river" ] && runs batches; then
	if command -v river >/dev/null; then
		river=$(command -v river)
	elif [ -x "$HOME/go/bin/river" ]; then
		river=$HOME/go/bin/river
	elif [ -x "$cache/river" ]; then
		river=$cache/river
	else
		v=${RIVER_VERSION:-v0.26.0}
		say "building River's CLI $v into $cache/river"
		src=$cache/river-src
		mkdir -p "$src"
		if (cd "$src" && { [ -f go.mod ] || go mod init ledgerq-bench-river >/dev/null 2>&1; } &&
			go get "github.com/riverqueue/river/cmd/river@$v" >&2 &&
			go build -o "$cache/river" github.com/riverqueue/river/cmd/river >&2); then
			river=$cache/river
		else
			say "River's CLI could not be built: the River row is skipped"
		fi
	fi
fi

# geth.
geth=${GETH:-${LEDGERQ_TEST_GETH:-}}
if [ -z "$geth" ] && command -v geth >/dev/null; then geth=$(command -v geth); fi
if [ -n "$geth" ] && ! [ -x "$geth" ]; then say "geth $geth is not executable: the geth rows are skipped"; geth=; fi

# Databases: fresh ones named report_<pid>_<n> on the admin URL's server.
dbseq=0
db_url() { # NAME -> the admin URL with its database replaced by NAME
	local base=${admin%%\?*} query=
	[ "$base" != "$admin" ] && query="?${admin#*\?}"
	echo "${base%/*}/$1$query"
}
fresh_db() { # -> sets $db and $url: a new empty database, migrated unless "bare"
	dbseq=$((dbseq + 1))
	db="report_$$_$dbseq"
	psql_admin -c "CREATE DATABASE $db" >/dev/null
	url=$(db_url "$db")
	if [ "${1:-}" != bare ]; then
		"$lq" migrate --database-url "$url" up >/dev/null 2>&1 || { say "migrating $db failed"; return 1; }
	fi
}
drop_db() { psql_admin -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null || true; }
geth_pid=
cleanup() {
	stop_geth
	if declare -F stop_chains >/dev/null; then stop_chains; fi
	local d
	for d in $(psql_admin -c "SELECT datname FROM pg_database WHERE datname LIKE 'report\_$$\_%'"); do drop_db "$d"; done
}
trap cleanup EXIT

# Results: one line per value, "KEY ROUND VALUE" in $logs/values.
: >"$logs/values"
put() { echo "$1 $2 $3" >>"$logs/values"; }
# first FILE REGEX...: the first capture of the first regex (sed -E) that
# matches a line of FILE.
first() {
	local f=$1 re v
	shift
	for re in "$@"; do
		v=$(sed -nE "s/$re/\1/p" "$f" | head -1)
		if [ -n "$v" ]; then
			echo "$v"
			return
		fi
	done
}

# bench NAME ROUND CMD...: runs `ledgerq bench CMD… --database-url U` on a
# fresh database; its stdout is $logs/NAME-rROUND.out. Returns its status.
declare -A commands
bench() {
	local name=$1 r=$2
	shift 2
	commands[$name]="ledgerq bench $*"
	fresh_db || return 1
	local out=$logs/$name-r$r.out start=$SECONDS status=0
	say "round $r: $name: ledgerq bench $*"
	"$lq" bench "$@" --database-url "$url" >"$out" 2>"$logs/$name-r$r.err" || status=$?
	drop_db "$db"
	if [ $status -ne 0 ]; then
		say "round $r: $name failed (exit $status) after $((SECONDS - start))s; see $logs/$name-r$r.err"
	else
		say "round $r: $name done in $((SECONDS - start))s"
	fi
	return $status
}

# start_geth: a fresh geth --dev (a block a second, the pool's limits raised)
# on free ports; sets $geth_url.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}
# run_geth DIR PORT AUTH: geth --dev (a block a second, the pool's limits
# raised) on DIR/data in the background, its HTTP API at PORT; $! is its pid.
run_geth() {
	"$geth" --dev --dev.period 1 --datadir "$1/data" --ipcdisable \
		--http --http.addr 127.0.0.1 --http.port "$2" --http.api eth,net,web3,txpool \
		--authrpc.addr 127.0.0.1 --authrpc.port "$3" --nodiscover --maxpeers 0 --port 0 --cache 256 \
		--txpool.globalslots 100000 --txpool.accountslots 10000 --txpool.globalqueue 100000 --txpool.accountqueue 10000 \
		--verbosity 2 >"$1/geth.log" 2>&1 &
}
start_geth() {
	local dir=$logs/geth-$1 port auth
	rm -rf "$dir"
	mkdir -p "$dir"
	port=$(free_port)
	auth=$(free_port)
	run_geth "$dir" "$port" "$auth"
	geth_pid=$!
	geth_url=http://127.0.0.1:$port
	for _ in $(seq 100); do
		if curl -sf -m 1 -H 'Content-Type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' "$geth_url" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	say "geth did not answer at $geth_url; see $dir/geth.log"
	stop_geth
	return 1
}
stop_geth() {
	if [ -n "$geth_pid" ]; then
		kill "$geth_pid" 2>/dev/null || true
		wait "$geth_pid" 2>/dev/null || true
		geth_pid=
	fi
}

# What the binary can do.
have_wallet_baseline=false have_wallet_http=false have_wallet_backlog=false have_wallet_sql=false
have_builder_baseline=false have_builder_backlog=false have_builder_geth_flag=false
if runs wallets; then
	supports wallets --baseline && have_wallet_baseline=true
	supports wallets --mode && have_wallet_http=true
	"$lq" bench wallets --help 2>&1 | grep 'client.EnqueueTx' >/dev/null && have_wallet_sql=true
	supports wallets --backlog-finished && have_wallet_backlog=true
fi
if runs builder; then
	supports builder --baseline && have_builder_baseline=true
	supports builder --backlog-finished && have_builder_backlog=true
	supports builder --geth && have_builder_geth_flag=true
fi

# ratio_in FILE: the lane-over-baseline ratio a summary printed: "ledgerq /
# direct  0.83 x (…)", "ratio: … = 0.83" or "ratio 0.83".
ratio_in() {
	first "$1" '^ *ledgerq \/ [a-z]+ +([0-9.]+) *(x|×).*' '.*ratio[^=]*= *([0-9.]+).*' '^ *ratio[: ]+([0-9.]+).*'
}

# p99_ms FILE: the enqueue-to-mined p99 a wallets run printed, in ms.
p99_ms() {
	sed -nE 's/^ *latency +enqueue to mined[^:]*: .*p99 ([0-9.]+)(µs|ms|s),.*/\1 \2/p' "$1" | head -1 |
		awk '{ f = ($2 == "s") ? 1000 : ($2 == "ms") ? 1 : 0.001; printf "%.0f\n", $1 * f }'
}

# parse_wallets KEY ROUND FILE: a wallets run's lane figure (mined/s, or
# confirmed/s from a binary that does not print mined/s) and, with
# --baseline, the ratio the run printed.
parse_wallets() {
	put "$1" "$2" "$(first "$3" '^ *mined +([0-9.]+) .*' '.*lane[^0-9]*([0-9.]+) mined\/s.*' '^ *confirmed +([0-9.]+) tasks\/s.*')"
	# The process's own CPU per task ("  cpu   0.258 ms per task: this
	# process, …"), when the binary prints it.
	put "$1_cpu" "$2" "$(first "$3" '^ *cpu +([0-9.]+) ms per task.*')"
	if $have_wallet_baseline; then
		put "$1_ratio" "$2" "$(ratio_in "$3")"
	fi
}

# run_floor KEY ROUND LANE REGEX: runs bench/floor.sh --lane LANE (its
# wallet floor without --lane, as before) and puts the first capture of
# REGEX in its output under KEY.
run_floor() {
	local key=$1 r=$2 lane=$3 re=$4 args=()
	[ "$lane" != wallet ] && args=(--lane "$lane")
	# shellcheck disable=SC2206 # the size string is a flag list
	args+=($floor)
	commands[$key]="bench/floor.sh ADMIN_URL ${args[*]}"
	say "round $r: $key: bench/floor.sh ${args[*]}"
	if LEDGERQ=$lq "$here/floor.sh" "$admin" "${args[@]}" >"$logs/$key-r$r.out" 2>"$logs/$key-r$r.err"; then
		put "$key" "$r" "$(first "$logs/$key-r$r.out" "$re")"
	else
		say "round $r: $key failed; see $logs/$key-r$r.err"
	fi
}

# ---- Several chains, each behind two nodes: the row "3 chains × 2 nodes over
# 1 chain × 1 node on geth". Each chain is a geth --dev of its own with a chain
# id of its own (geth --dev keeps a data directory's genesis: init_chain writes
# --dev's own genesis with another chain id and a developer account of its own
# funded); its second node is a second endpoint of that same geth through a
# process of its own, the repository's faultproxy with no faults (two geth
# --dev cannot follow one chain: after the merge a second node needs a
# consensus client). The lane broadcasts every send to both nodes and health-
# checks and reads from both, as it does with two real nodes; the second
# node is not a second copy of the chain (no pool or state of its own, never
# behind, never down on its own).
chains_n=3
chain_geth_pids=() chain_proxy_pids=()
have_wallet_chains=false
runs wallets && supports wallets --chain && have_wallet_chains=true
# faultproxy: $FAULTPROXY, else built from this checkout into the cache.
faultproxy=${FAULTPROXY:-}
chains_tools() {
	[ -n "$faultproxy" ] && return 0
	[ -n "$geth" ] && $have_wallet_chains || return 1
	if command -v go >/dev/null && (cd "$repo" && go build -o "$cache/faultproxy" ./internal/ledger/faultproxy/cmd/faultproxy); then
		faultproxy=$cache/faultproxy
		return 0
	fi
	say "faultproxy could not be built (go missing?): the row of several chains is skipped"
	have_wallet_chains=false
	return 1
}
# init_chain DIR ID: a data directory for geth --dev on chain ID.
init_chain() {
	local dir=$1 id=$2 dev
	: >"$dir/empty-passphrase"
	"$geth" account new --datadir "$dir/data" --password "$dir/empty-passphrase" --lightkdf >"$dir/init.log" 2>&1 || return 1
	dev=$(find "$dir/data/keystore" -type f -name 'UTC--*' | head -1 | sed 's/.*--//')
	[ -n "$dev" ] || return 1
	"$geth" --dev dumpgenesis 2>>"$dir/init.log" |
		sed -e "s/\"chainId\":1337,/\"chainId\":$id,/" \
			-e "s/\"alloc\":{/\"alloc\":{\"0x$dev\":{\"balance\":\"0x8000000000000000000000000000000000000000000000000000000000000000\"},/" >"$dir/genesis.json"
	grep -q "\"chainId\":$id," "$dir/genesis.json" || return 1
	"$geth" init --datadir "$dir/data" "$dir/genesis.json" >>"$dir/init.log" 2>&1
}
answers() { # URL: eth_chainId answers
	curl -sf -m 1 -H 'Content-Type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "$1" >/dev/null 2>&1
}
# start_chains ROUND: $chains_n chains (ids 1401…), each a geth --dev as
# start_geth runs it and a faultproxy in front of it; sets $chains_flags
# (--chain cK=GETH_URL,PROXY_URL each).
start_chains() {
	local r=$1 k dir port auth pport url purl
	chains_flags=
	for k in $(seq "$chains_n"); do
		dir=$logs/chain$k-$r
		rm -rf "$dir"
		mkdir -p "$dir"
		init_chain "$dir" $((1400 + k)) || { say "preparing chain $k failed; see $dir/init.log"; stop_chains; return 1; }
		port=$(free_port)
		auth=$(free_port)
		run_geth "$dir" "$port" "$auth"
		chain_geth_pids+=($!)
		url=http://127.0.0.1:$port
		pport=$(free_port)
		"$faultproxy" -upstream "$url" -listen "127.0.0.1:$pport" -report 0 >"$dir/faultproxy.log" 2>&1 &
		chain_proxy_pids+=($!)
		purl=http://127.0.0.1:$pport
		for _ in $(seq 100); do
			answers "$url" && answers "$purl" && break
			sleep 0.2
		done
		if ! answers "$url" || ! answers "$purl"; then
			say "chain $k did not answer at $url and $purl; see $dir"
			stop_chains
			return 1
		fi
		chains_flags="$chains_flags --chain c$k=$url,$purl"
	done
}
stop_chains() {
	local p
	for p in "${chain_proxy_pids[@]}" "${chain_geth_pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	chain_geth_pids=() chain_proxy_pids=()
}
# run_chains ROUND: the wallet lane on $chains_n chains × 2 nodes, the same
# wallets and tasks as the 1 chain × 1 node geth row of the round (wgeth).
run_chains() {
	local r=$1
	chains_tools || return 0
	start_chains "$r" || return 0
	# A chain id other than 1337 waits 12 confirmations by default; the
	# geth row's 1337 waits 1.
	# shellcheck disable=SC2086
	if bench w3x2 "$r" wallets $wallets --ledger evm --fund-from-dev-account --wallet-confirmations 1 $chains_flags; then
		put w3x2 "$r" "$(first "$logs/w3x2-r$r.out" '^ *mined +([0-9.]+) .*')"
	fi
	commands[w3x2]=$(echo "${commands[w3x2]}" | sed -E 's|--chain (c[0-9]+)=[^ ]+|--chain \1=GETH_\1,PROXY_\1|g')
	stop_chains
}
# chains_row: the row, after the wallet lane's others.
chains_row() {
	local what="wallet lane, $chains_n chains × 2 nodes over 1 chain × 1 node on geth --dev (mined/s, the geth row's wallets and tasks spread over the chains; each chain's second node a faultproxy in front of its geth)"
	if [ -z "$geth" ]; then
		ratio_row "$what" w3x2 wgeth "0.9" "" "$nogeth"
	elif ! $have_wallet_chains; then
		ratio_row "$what" w3x2 wgeth "0.9" "" "$unsupported (or no faultproxy)"
	else
		ratio_row "$what" w3x2 wgeth "0.9" "mined/s / mined/s"
	fi
}

started=$(date -u '+%Y-%m-%d %H:%M UTC')
for r in $(seq "$rounds"); do
	say "== round $r of $rounds"
	if runs batches; then
		if [ -n "$river" ]; then
			fresh_db bare
			commands[river]="bench/river.sh \$U $river_jobs"
			say "round $r: river: bench/river.sh $river_jobs"
			if RIVER=$river "$here/river.sh" "$url" "$river_jobs" >"$logs/river-r$r.out" 2>"$logs/river-r$r.err"; then
				put river "$r" "$(first "$logs/river-r$r.out" '.*river bench: ([0-9.]+) jobs\/s.*')"
			else
				say "round $r: river failed; see $logs/river-r$r.err"
			fi
			drop_db "$db"
		fi
		# shellcheck disable=SC2086 # the size strings are flag lists
		if bench preload "$r" batches --mode preload $preload $sim0 $batch_flags; then
			put preload "$r" "$(first "$logs/preload-r$r.out" '^ *processing +([0-9.]+) committed\/s.*')"
		fi
		# shellcheck disable=SC2086
		if bench e2e "$r" batches $e2e $sim0 $batch_flags; then
			put e2e "$r" "$(first "$logs/e2e-r$r.out" '^ *end to end +([0-9.]+) committed\/s.*')"
		fi
		# shellcheck disable=SC2086
		if bench http "$r" batches --mode http $http $sim0 $batch_flags; then
			put http "$r" "$(first "$logs/http-r$r.out" '^ *intake +([0-9.]+) batches\/s.*')"
		fi
		# shellcheck disable=SC2086
		if bench backlog "$r" batches --mode preload $preload $sim0 --backlog-finished "$backlog" $batch_flags; then
			put backlog "$r" "$(first "$logs/backlog-r$r.out" '^ *processing +([0-9.]+) committed\/s.*')"
		fi
		# The batch rows' own cost in PostgreSQL, no ledgerq process: what
		# the lane can finish from a backlog, as the preload run does.
		run_floor bfloor "$r" batch '.* ([0-9]+) batches\/s finished from a backlog.*'
	fi
	if runs wallets; then
		base=
		$have_wallet_baseline && base="--baseline direct"
		# shellcheck disable=SC2086
		if bench wsim "$r" wallets $wallets $base; then
			parse_wallets wsim "$r" "$logs/wsim-r$r.out"
		fi
		if [ -n "$geth" ] && start_geth "r$r"; then
			# shellcheck disable=SC2086
			if bench wgeth "$r" wallets $wallets $base --ledger evm --ledger-url "$geth_url" --fund-from-dev-account; then
				parse_wallets wgeth "$r" "$logs/wgeth-r$r.out"
			fi
			commands[wgeth]=${commands[wgeth]//$geth_url/http://127.0.0.1:8545}
			stop_geth
		fi
		run_chains "$r"
		if $have_wallet_http; then
			# shellcheck disable=SC2086
			if bench whttp "$r" wallets --mode http --ingest-workers 16 $wallets_http; then
				put whttp "$r" "$(first "$logs/whttp-r$r.out" '^ *intake +([0-9.]+) tasks\/s.*' '^ *enqueue +([0-9.]+) tasks\/s.*')"
				# Latency at half the capacity that run measured (its mined/s).
				half=$(first "$logs/whttp-r$r.out" '^ *mined +([0-9.]+) .*' | awk '$1 > 0 { printf "%d\n", $1 / 2 }')
				# shellcheck disable=SC2086
				if [ -n "$half" ] && bench whalf "$r" wallets --mode http --ingest-workers 16 $wallets_http --rate "$half"; then
					put whalf "$r" "$(p99_ms "$logs/whalf-r$r.out")"
					put whalf_rate "$r" "$half"
				fi
			fi
		fi
		# The SQL intake (docs/enqueue.md) as a Go application uses it,
		# right after the HTTP run, with the same sizes and workers.
		if $have_wallet_sql; then
			# shellcheck disable=SC2086
			if bench wsql "$r" wallets --mode sql --ingest-workers 16 $wallets_http; then
				put wsql "$r" "$(first "$logs/wsql-r$r.out" '^ *enqueue +([0-9.]+) tasks\/s.*')"
			fi
		fi
		# The rows' own cost in PostgreSQL, no ledgerq process: the ceiling
		# the wallet rows are read against.
		run_floor floor "$r" wallet '.*ceiling ([0-9]+) tasks\/s.*'
		if $have_wallet_backlog; then
			# shellcheck disable=SC2086
			if bench wbacklog "$r" wallets $wallets --backlog-finished "$backlog"; then
				put wbacklog "$r" "$(first "$logs/wbacklog-r$r.out" '^ *mined +([0-9.]+) .*' '.*lane[^0-9]*([0-9.]+) mined\/s.*' '^ *confirmed +([0-9.]+) tasks\/s.*')"
			fi
		fi
	fi
	if runs builder; then
		gflags=
		if $have_builder_baseline && [ -n "$geth" ]; then
			gflags="--baseline geth"
			$have_builder_geth_flag && gflags="$gflags --geth $geth"
		fi
		# shellcheck disable=SC2086
		if bench bgeth "$r" builder $builder $pool_limits $gflags; then
			f=$logs/bgeth-r$r.out
			put bl "$r" "$(first "$f" '^ *accepted: +[0-9]+ transactions in [^=]*= ([0-9.]+) tx\/s.*')"
			[ -n "$gflags" ] && put bl_ratio "$r" "$(ratio_in "$f")"
			put bundles "$r" "$(first "$f" '^ *finalized: +[0-9]+ bundles .*= ([0-9.]+) bundles\/s.*')"
			idle=$(first "$f" '^ *cores:.* ([0-9]+) of their ([0-9]+) core-windows used, ([0-9]+) idle.*')
			[ -n "$idle" ] && put idle "$r" "$(sed -nE 's/^ *cores:.* of their ([0-9]+) core-windows used, ([0-9]+) idle.*/\2\/\1/p' "$f" | head -1)"
		fi
		[ -n "$gflags" ] && commands[bgeth]=${commands[bgeth]//$geth/\$GETH}
		# The intake's rows alone in PostgreSQL, no ledgerq process.
		run_floor pfloor "$r" builder '.*ceiling ([0-9]+) tx\/s.*'
		if $have_builder_backlog; then
			# shellcheck disable=SC2086
			if bench bbacklog "$r" builder $builder $pool_limits --backlog-finished "$backlog"; then
				put bbacklog "$r" "$(first "$logs/bbacklog-r$r.out" '^ *accepted: +[0-9]+ transactions in [^=]*= ([0-9.]+) tx\/s.*')"
			fi
		fi
	fi
done

# ---- The table.

# vals_of KEY ROUND: KEY's value in ROUND, empty when it has none.
vals_of() { awk -v k="$1" -v r="$2" '$1 == k && $2 == r && $3 != "" { print $3; exit }' "$logs/values"; }
# vals KEY: the rounds' values of KEY, in round order, one a line ("-" for a
# round without one).
vals() {
	local r v
	for r in $(seq "$rounds"); do
		v=$(vals_of "$1" "$r")
		echo "${v:--}"
	done
}
# ratios A B: per round A/B (both present), one a line.
ratios() {
	paste <(vals "$1") <(vals "$2") | awk '{ if ($1 == "-" || $2 == "-" || $2 == 0) print "-"; else printf "%.2f\n", $1 / $2 }'
}
median() { { grep -v '^-$' || true; } | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
fmt() { # NUMBER DECIMALS
	[ -z "$1" ] && return
	LC_ALL=C printf "%.${2}f" "$1"
}
rounds_of() { paste -sd, | sed 's/,/, /g'; }
met() { # VALUE OP TARGET
	[ -z "$1" ] && { echo "—"; return; }
	awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN { ok = (op == ">=") ? (v >= t) : (v <= t); print ok ? "yes" : "no" }'
}
row() { # WHAT FIGURE ROUNDS TARGET MET
	echo "| $1 | $2 | $3 | $4 | $5 |"
}
# rate_row WHAT KEY UNIT TARGET: a throughput row.
rate_row() {
	local m
	m=$(vals "$2" | median)
	if [ -z "$m" ]; then
		row "$1" "n/a (no figure: the run failed or printed none; see the logs)" "" "≥ $4" "—"
		return
	fi
	row "$1" "$(fmt "$m" 0) $3" "$(vals "$2" | awk '$1 == "-" { print; next } { printf "%.0f\n", $1 }' | rounds_of)" "≥ $4" "$(met "$m" '>=' "$4")"
}
# ratio_row WHAT A B TARGET UNITS UNLESS MET: a row of the per-round
# ratios A/B, with the medians of A and B ("UNITS" names them: "committed/s
# / jobs/s"); UNLESS, when set, is printed instead. An empty TARGET prints
# "—" (no target); MET, when set, is printed instead of whether the target
# is met.
ratio_row() {
	local target="≥ $4 ×"
	[ -z "$4" ] && target="—"
	if [ -n "${6:-}" ]; then
		row "$1" "$6" "" "$target" "—"
		return
	fi
	local m ua ub ok="—"
	m=$(ratios "$2" "$3" | median)
	if [ -z "$m" ]; then
		row "$1" "n/a (no figure; see the logs)" "" "$target" "—"
		return
	fi
	ua=${5% / *} ub=${5#* / }
	[ -n "$4" ] && ok=$(met "$m" '>=' "$4")
	row "$1" "$(fmt "$m" 2) × ($(fmt "$(vals "$2" | median)" 0) $ua / $(fmt "$(vals "$3" | median)" 0) $ub)" "$(ratios "$2" "$3" | rounds_of)" "$target" "${7:-$ok}"
}
# printed_ratio_row WHAT KEY RATIO_KEY OTHER TARGET UNLESS: a ratio the
# bench printed itself (RATIO_KEY), with the lane's figure (KEY) and the
# other's derived from them.
printed_ratio_row() {
	if [ -n "${6:-}" ]; then
		row "$1" "$6" "" "≥ $5 ×" "—"
		return
	fi
	local m lane
	m=$(vals "$3" | median)
	lane=$(vals "$2" | median)
	if [ -z "$m" ]; then
		row "$1" "n/a (no ratio in the summary; see the logs)" "" "≥ $5 ×" "—"
		return
	fi
	local detail=
	if [ -n "$lane" ] && awk -v m="$m" 'BEGIN { exit !(m > 0) }'; then
		detail=" ($(fmt "$lane" 0) / $(fmt "$(awk -v l="$lane" -v m="$m" 'BEGIN { print l / m }')" 0) $4)"
	fi
	row "$1" "$(fmt "$m" 2) ×$detail" "$(vals "$3" | rounds_of)" "≥ $5 ×" "$(met "$m" '>=' "$5")"
}

unsupported="n/a (not supported by this binary)"
# alone KEY UNIT: "; the lane alone: MEDIAN UNIT", when KEY has values.
alone() {
	local m
	m=$(vals "$1" | median)
	[ -n "$m" ] && echo "; the lane alone: $(fmt "$m" 0) $2"
	true
}
nogeth="n/a (geth not installed)"
bl=$(echo "$backlog" | sed -E ':a; s/([0-9])([0-9]{3})($| )/\1 \2\3/; ta') # 1 000 000

cores=$(nproc)
mem=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
pgver=$(psql_admin -c 'show server_version' | head -1)
sb=$(psql_admin -c 'show shared_buffers' | head -1)
sc=$(psql_admin -c 'show synchronous_commit' | head -1)
size=full
$quick && size="--quick (smoke-check sizes: the figures mean nothing)"

echo "Performance of ledgerq $commit, $started: $rounds interleaved round(s), $size."
echo "Machine: $cores cores, $mem memory; PostgreSQL $pgver on $(echo "$admin" | sed -E 's|^[a-z]+://([^@]*@)?([^/?]*).*|\2|') (shared_buffers=$sb, synchronous_commit=$sc). Each ledgerq run on a fresh database."
echo
echo "| what | median | rounds | target | met |"
echo "|---|---|---|---|---|"
if runs batches; then
	if [ -n "$river" ]; then
		ratio_row "batch lane, preloaded backlog vs River: committed/s over River's jobs/s" preload river "1.25" "committed/s / jobs/s"
	else
		ratio_row "batch lane, preloaded backlog vs River: committed/s over River's jobs/s" preload river "1.25" "" "n/a (River not installed); ledgerq alone: $(fmt "$(vals preload | median)" 0) committed/s"
	fi
	ratio_row "batch lane, preloaded backlog over its floor (bench/floor.sh --lane batch: the lane's rows alone, from a backlog, no ledgerq process): committed/s over the floor's batches/s" preload bfloor "" "committed/s / batches/s"
	rate_row "batch lane end to end, committed/s" e2e committed/s 4000
	rate_row "batch lane HTTP intake, batches/s" http batches/s 6000
	ratio_row "batch lane with $bl finished batches vs empty (preloaded)" backlog preload "0.8" "committed/s / committed/s"
fi
if runs wallets; then
	u=; $have_wallet_baseline || u=$unsupported
	printed_ratio_row "wallet lane vs a direct sender, simulated chain: mined/s over direct mined/s" wsim wsim_ratio "mined/s" "0.8" "${u:+$u$(alone wsim tasks/s)}"
	cm=$(vals wsim_cpu | median)
	if [ -n "$cm" ]; then
		row "wallet lane, ledgerq's own CPU per task, simulated chain (the process, user+system over the run)" "$(fmt "$cm" 3) ms" "$(vals wsim_cpu | rounds_of)" "≤ 0.35 ms" "$(met "$cm" '<=' 0.35)"
	else
		row "wallet lane, ledgerq's own CPU per task, simulated chain" "n/a (not printed by this binary, or the run failed)" "" "≤ 0.35 ms" "—"
	fi
	g=$u; [ -z "$geth" ] && g=$nogeth
	printed_ratio_row "wallet lane vs a direct sender, geth --dev --dev.period 1" wgeth wgeth_ratio "mined/s" "0.95" "${g:+$g$(alone wgeth tasks/s)}"
	if $have_wallet_http; then rate_row "wallet lane HTTP intake, tasks/s" whttp tasks/s 2500; else row "wallet lane HTTP intake, tasks/s" "$unsupported" "" "≥ 2500" "—"; fi
	if $have_wallet_sql; then
		ratio_row "wallet lane SQL intake over its HTTP intake: ledgerq.send_tx in a transaction per task through client.EnqueueTx, the same sizes and workers" wsql whttp "1.0" "tasks/s / tasks/s"
	else
		ratio_row "wallet lane SQL intake over its HTTP intake" wsql whttp "1.0" "" "$unsupported"
	fi
	# Two of the simulated chain's 200 ms blocks and 200 ms.
	hm=$(vals whalf | median)
	if [ -n "$hm" ]; then
		row "wallet lane enqueue→mined p99 at half the capacity the HTTP run measured (offered tasks/s: $(vals whalf_rate | rounds_of))" "$(fmt "$hm" 0) ms" "$(vals whalf | rounds_of)" "≤ 600 ms" "$(met "$hm" '<=' 600)"
	elif $have_wallet_http; then
		row "wallet lane enqueue→mined p99 at half capacity" "n/a (no figure; see the logs)" "" "≤ 600 ms" "—"
	fi
	fm=$(vals floor | median)
	if [ -n "$fm" ]; then
		# The ceiling over the direct sender's mined/s of the same round.
		fr=$(for k in $(seq "$rounds"); do
			f=$(vals_of floor "$k") l=$(vals_of wsim "$k") q=$(vals_of wsim_ratio "$k")
			awk -v f="$f" -v l="$l" -v q="$q" 'BEGIN { if (f > 0 && l > 0 && q > 0) printf "%.2f\n", f / (l / q) }'
		done | median)
		vs=
		[ -n "$fr" ] && vs="; $fr × the direct sender's mined/s"
		row "wallet lane's rows alone in PostgreSQL (bench/floor.sh, no ledgerq process): the most tasks/s this machine can take in and finish at once$vs" "$(fmt "$fm" 0) tasks/s" "$(vals floor | rounds_of)" "— (a ceiling)" "—"
	else
		row "wallet lane's rows alone in PostgreSQL (bench/floor.sh)" "n/a (pgbench not found, or the run failed; see the logs)" "" "— (a ceiling)" "—"
	fi
	# The lane over its floor measured in the same round: what holds across
	# machines.
	ratio_row "wallet lane over its floor, simulated chain: mined/s over the ceiling of its rows alone (bench/floor.sh) in the same round" wsim floor "0.6" "tasks/s / tasks/s"
	if $have_wallet_backlog; then
		ratio_row "wallet lane with $bl finished tasks vs empty" wbacklog wsim "0.8" "tasks/s / tasks/s"
	else
		ratio_row "wallet lane with $bl finished tasks vs empty" wbacklog wsim "0.8" "" "$unsupported"
	fi
	chains_row
fi
if runs builder; then
	u=; $have_builder_baseline || u=$unsupported
	[ -z "$u" ] && [ -z "$geth" ] && u=$nogeth
	printed_ratio_row "builder lane /rpc intake vs geth --dev eth_sendRawTransaction: tx/s over geth's" bl bl_ratio "tx/s" "1.0" "${u:+$u$(alone bl tx/s)}"
	# geth's tx/s per round, from the lane's and the ratio it printed: the
	# target over the floor holds where the floor is below geth's.
	gm=$(for k in $(seq "$rounds"); do
		awk -v l="$(vals_of bl "$k")" -v q="$(vals_of bl_ratio "$k")" 'BEGIN { if (l > 0 && q > 0) printf "%.0f\n", l / q }'
	done | median)
	pm=$(vals pfloor | median)
	above=
	if [ -n "$gm" ] && [ -n "$pm" ] && awk -v p="$pm" -v g="$gm" 'BEGIN { exit !(p >= g) }'; then
		above="— (floor above geth's $(fmt "$gm" 0) tx/s)"
	fi
	ratio_row "builder lane /rpc intake over its floor (bench/floor.sh --lane builder: the intake's rows alone, no ledgerq process): accepted tx/s over the floor's ceiling; target where the floor is below geth's tx/s" bl pfloor "0.7" "tx/s / tx/s" "" "$above"
	bm=$(vals bundles | median)
	if [ -n "$bm" ]; then bm=$(fmt "$bm" 2); else bm="n/a"; fi
	row "builder lane, finalized bundles/s" "$bm" "$(vals bundles | rounds_of)" "—" "—"
	if [ -n "$(vals idle | grep -v '^-$' || true)" ]; then
		row "builder lane, idle core-windows (idle/all, windows with work waiting)" "see rounds" "$(vals idle | rounds_of)" "—" "—"
	else
		row "builder lane, idle core-windows" "n/a (not printed by this binary)" "" "—" "—"
	fi
	if $have_builder_backlog; then
		ratio_row "builder lane with $bl finished transactions vs empty: accepted tx/s" bbacklog bl "0.8" "tx/s / tx/s"
	else
		ratio_row "builder lane with $bl finished transactions vs empty" bbacklog bl "0.8" "" "$unsupported"
	fi
fi
echo
echo "The commands (U a fresh database's URL, created and migrated for the run and dropped after it; ledgerq bench adds --database-url \$U):"
echo
for k in river preload e2e http backlog bfloor wsim wgeth w3x2 whttp whalf wsql floor wbacklog bgeth pfloor bbacklog; do
	[ -n "${commands[$k]:-}" ] && echo "- \`${commands[$k]}\`"
done
true
