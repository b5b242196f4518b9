#!/usr/bin/env bash
# `ledgerq bench churn` on a fresh database: creates it on the server of
# ADMIN_URL, runs the churn (serve with every lane on, the simulated ledgers as
# processes of their own, a steady load through serve's HTTP API; serve's RSS
# and the lanes' finished work every --interval, the verdict at the end), then
# drops it. Flags after ADMIN_URL go to `ledgerq bench churn`.
#
#   usage: bench/churn.sh [ADMIN_URL] [--duration 30m] [--interval 1m] [flags…]
#   env:   LEDGERQ  the ledgerq binary (default: built from this checkout)
#          LEDGERQ_ADMIN_URL  the default ADMIN_URL
#                   (postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
admin=${LEDGERQ_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
if [ $# -gt 0 ] && [[ $1 != -* ]]; then
	admin=$1
	shift
fi
lq=${LEDGERQ:-}
if [ -z "$lq" ]; then
	lq=$(mktemp -d "${TMPDIR:-/tmp}/ledgerq-churn-bin.XXXXXX")/ledgerq
	echo "churn.sh: building ledgerq into $lq" >&2
	(cd "$here/.." && go build -o "$lq" ./cmd/ledgerq)
fi
db=churn_$$
base=${admin%%\?*} query=
[ "$base" != "$admin" ] && query="?${admin#*\?}"
url="${base%/*}/$db$query"
psql "$admin" -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db"
trap 'psql "$admin" -X -q -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
"$lq" bench churn --database-url "$url" "$@"
