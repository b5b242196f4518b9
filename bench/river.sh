#!/usr/bin/env bash
# River's own benchmark on a given database, for comparing ledgerq's batch lane
# with it on the same PostgreSQL server (issue 7). It migrates River's tables in
# (river migrate-up is idempotent), runs `river bench --num-total-jobs N`, which
# inserts N jobs, then starts a client and works them until none is left, and
# prints River's overall jobs/s on the last line.
#
# River's bench TRUNCATES river_job: give it a database of its own.
#
#   usage: bench/river.sh DATABASE_URL [JOBS]     (JOBS default 200000)
#   env:   RIVER  the River CLI (default: river on PATH). `go install
#                 github.com/riverqueue/river/cmd/river@latest` may fail on a
#                 module proxy without a version list for cmd/river; then build
#                 it from a throwaway module that requires
#                 github.com/riverqueue/river/cmd/river v0.26.0:
#                   go build -o river github.com/riverqueue/river/cmd/river
#
# Example, interleaved with ledgerq on the same server:
#   psql "$ADMIN_URL" -c 'create database river_bench'
#   bench/river.sh postgres://postgres@127.0.0.1:55432/river_bench
#   ledgerq bench batches --mode preload --database-url .../lq_fresh \
#       --services 1000 --batches-per-service 10 --batch-sim-commit-delay 0 --batch-sim-verify=false
set -euo pipefail

url=${1:?usage: bench/river.sh DATABASE_URL [JOBS]}
jobs=${2:-200000}
river=${RIVER:-river}

"$river" migrate-up --database-url "$url" >/dev/null
# River prints a progress line a second, then
#   bench: total jobs worked [ N ], total jobs inserted [ N ], overall job/sec [ R ], running D
out=$("$river" bench --database-url "$url" --num-total-jobs "$jobs" 2>&1 | tee /dev/stderr)
last=$(printf '%s\n' "$out" | grep 'overall job/sec' | tail -1)
rate=$(printf '%s\n' "$last" | sed -n 's/.*overall job\/sec \[ *\([0-9.]*\) *\].*/\1/p')
worked=$(printf '%s\n' "$last" | sed -n 's/.*total jobs worked \[ *\([0-9]*\) *\].*/\1/p')
took=$(printf '%s\n' "$last" | sed -n 's/.*running \(.*\)$/\1/p')
if [ -z "$rate" ]; then
	echo "bench/river.sh: no 'overall job/sec' in river bench's output" >&2
	exit 1
fi
if [ "$worked" != "$jobs" ]; then
	echo "bench/river.sh: river worked $worked of $jobs jobs" >&2
	exit 1
fi
echo "river bench: $rate jobs/s ($worked jobs in $took, $("$river" version | head -1))"
