#!/usr/bin/env bash
# Runs deploy/compose.yaml for real: `config` validates it, `up` starts
# PostgreSQL, the one-shot migrate, the api and monitor processes and the
# simulated ledger; then the test waits for both serve containers to be
# healthy, checks /healthz and /readyz on the published port, posts a signed
# batch and waits for it to be committed (which takes both processes: the
# api's submitter sends it, the monitor's status checks commit it), stops the
# stack within its grace periods and removes it with its volume.
#
# Usage: deploy/compose-test.sh [IMAGE]
#   IMAGE  the ledgerq image (default: ledgerq:local, from deploy/build-image.sh)
#
# Environment:
#   LEDGERQ_SMOKE_PG_IMAGE  PostgreSQL image for the postgres service
#                           (default: ledgerq/postgres:15-local)
#   LEDGERQ_SMOKE_TIMEOUT   seconds to wait for the stack, and then for the
#                           batch (default: 90)
#
# Needs: a running Docker engine, `docker compose` or docker-compose (1.29+,
# Debian's docker-compose package), curl.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
compose_file="$here/compose.yaml"
export LEDGERQ_IMAGE="${1:-ledgerq:local}"
export LEDGERQ_POSTGRES_IMAGE="${LEDGERQ_SMOKE_PG_IMAGE:-ledgerq/postgres:15-local}"
export POSTGRES_PASSWORD="smoke-$$"
wait_secs="${LEDGERQ_SMOKE_TIMEOUT:-90}"
project="ledgerq-compose-$$"

say() { printf '[compose] %s\n' "$*"; }
die() { printf '[compose] FAIL: %s\n' "$*" >&2; exit 1; }

if docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
elif command -v docker-compose >/dev/null; then
	compose=(docker-compose)
else
	die "neither 'docker compose' nor docker-compose is installed (apt-get install docker-compose)"
fi
compose+=(--project-name "$project" --file "$compose_file")
command -v curl >/dev/null || die "curl is not installed"
docker info >/dev/null 2>&1 || die "cannot reach the Docker engine (is dockerd running?)"
for image in "$LEDGERQ_IMAGE" "$LEDGERQ_POSTGRES_IMAGE"; do
	docker image inspect "$image" >/dev/null 2>&1 || die "no image $image"
done

# A free loopback port for the api, so the test runs beside anything on 8080.
LEDGERQ_API_PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export LEDGERQ_API_PORT
base="http://127.0.0.1:$LEDGERQ_API_PORT"

cleanup() {
	local rc=$?
	set +e
	if [ "$rc" != 0 ]; then
		printf '\n--- %s ps ---\n' "${compose[0]}"
		"${compose[@]}" ps
		printf '\n--- last lines of the logs ---\n'
		"${compose[@]}" logs --no-color --tail 20
	fi
	"${compose[@]}" down --volumes --remove-orphans --timeout 10 >/dev/null 2>&1
	exit "$rc"
}
trap cleanup EXIT

# id SERVICE: the container of SERVICE.
id() { "${compose[@]}" ps -q "$1"; }

start=$SECONDS
say "$("${compose[@]}" version 2>/dev/null | head -n 1)"
say "config"
"${compose[@]}" config --quiet
say "services: $("${compose[@]}" config --services | tr '\n' ' ')"

say "up (ledgerq $LEDGERQ_IMAGE, PostgreSQL $LEDGERQ_POSTGRES_IMAGE, API on $base)"
"${compose[@]}" up --detach --quiet-pull 2>&1 | sed 's/^/  /'

migrate_id="$(id migrate)"
[ "$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$migrate_id")" = 'exited 0' ] ||
	die "migrate did not exit 0: $(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$migrate_id")"
say "migrate: $(docker logs "$migrate_id" 2>/dev/null | tail -n 1)"

deadline=$((SECONDS + wait_secs))
for svc in api monitor; do
	until [ "$(docker inspect -f '{{.State.Health.Status}}' "$(id "$svc")")" = healthy ]; do
		[ "$SECONDS" -lt "$deadline" ] || die "$svc was not healthy within ${wait_secs}s"
		sleep 1
	done
	say "$svc: healthy ($(docker inspect -f '{{json .Config.Cmd}}' "$(id "$svc")"))"
done

for path in /healthz /readyz; do
	code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$base$path" || true)"
	say "GET $path -> $code"
	[ "$code" = 200 ] || die "GET $path answered $code"
done

say "GET /v1/batches without an API key -> 401"
code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$base/v1/batches" || true)"
[ "$code" = 401 ] || die "GET /v1/batches without a key answered $code"

say "keys create (in the api service's container): a key for the service compose-test"
key="$("${compose[@]}" exec -T api /ledgerq keys create --name compose-test --scope service:compose-test 2>/dev/null | tr -d '\r')"
[ -n "$key" ] || die "keys create printed no key"

say "POST /v1/batches (a signed sample batch) and wait until it is committed"
body="$(docker run --rm --network none "$LEDGERQ_IMAGE" sawtooth sample --service compose-test)"
answer="$(curl -sS --max-time 10 -X POST -H 'Content-Type: application/json' -H "Authorization: Bearer $key" --data-binary "$body" "$base/v1/batches")"
batch="$(sed -nE 's/.*"id":"([0-9a-f]+)".*/\1/p' <<<"$answer")"
[ -n "$batch" ] || die "POST /v1/batches answered: $answer"
deadline=$((SECONDS + wait_secs))
state=''
until grep -q '"status":"committed"' <<<"$state"; do
	[ "$SECONDS" -lt "$deadline" ] || die "batch ${batch:0:16}… not committed within ${wait_secs}s: $state"
	sleep 0.5
	state="$(curl -sS --max-time 3 -H "Authorization: Bearer $key" "$base/v1/batches/$batch" || true)"
done
say "batch ${batch:0:16}… committed"

say "stop"
t=$SECONDS
"${compose[@]}" stop 2>&1 | sed 's/^/  /'
for svc in api monitor; do
	code="$(docker inspect -f '{{.State.ExitCode}}' "$(id "$svc")")"
	[ "$code" = 0 ] || die "$svc exited with $code on stop"
done
say "api and monitor exited 0 within $((SECONDS - t))s"
say "ok in $((SECONDS - start))s"
