#!/usr/bin/env bash
# Smoke test of ledgerq's container image: on a Docker network of its own,
# start PostgreSQL, run `ledgerq migrate up` from the image, start `serve`
# (the image's default command) as the image's non-root user with a read-only
# root filesystem, no capabilities and no privilege escalation, then check
# that /healthz and /readyz answer 200 on the published port and through the
# image's healthcheck probe, and that `docker stop` shuts it down cleanly.
#
# Usage: deploy/smoke-test.sh [IMAGE]
#   IMAGE  the ledgerq image (default: ledgerq:local, from deploy/build-image.sh)
#
# Environment:
#   LEDGERQ_SMOKE_PG_IMAGE  PostgreSQL image that takes the official image's
#                           POSTGRES_* variables (default:
#                           ledgerq/postgres:15-local, from
#                           test/integration/pgimage/build.sh)
#   LEDGERQ_SMOKE_TIMEOUT   seconds to wait for each of PostgreSQL and the API
#                           (default: 60)
#
# Needs: a running Docker engine, curl. Removes its containers and network on
# exit; they carry the label org.ledgerq.smoke=true.
set -Eeuo pipefail

image="${1:-ledgerq:local}"
pg_image="${LEDGERQ_SMOKE_PG_IMAGE:-ledgerq/postgres:15-local}"
wait_secs="${LEDGERQ_SMOKE_TIMEOUT:-60}"
label='org.ledgerq.smoke=true'
name="ledgerq-smoke-$$"
net="$name"
pg="$name-pg"
app="$name-serve"
db_url="postgres://ledgerq:smoke@$pg:5432/ledgerq?sslmode=disable"

say() { printf '[smoke] %s\n' "$*"; }
die() { printf '[smoke] FAIL: %s\n' "$*" >&2; exit 1; }

command -v curl >/dev/null || die "curl is not installed"
docker info >/dev/null 2>&1 || die "cannot reach the Docker engine (is dockerd running?)"
docker image inspect "$image" >/dev/null 2>&1 || die "no image $image (build it with deploy/build-image.sh)"
docker image inspect "$pg_image" >/dev/null 2>&1 || die "no image $pg_image (build it with test/integration/pgimage/build.sh)"

cleanup() {
	local rc=$?
	set +e
	if [ "$rc" != 0 ]; then
		for c in "$app" "$pg"; do
			docker container inspect "$c" >/dev/null 2>&1 || continue
			printf '\n--- last lines of %s ---\n' "$c"
			docker logs --tail 30 "$c" 2>&1
		done
	fi
	docker rm -f -v "$app" "$pg" >/dev/null 2>&1
	docker network rm "$net" >/dev/null 2>&1
	exit "$rc"
}
trap cleanup EXIT

# The hardening a Kubernetes securityContext or compose file asks for: if the
# image needed a writable root, a capability or root, this test would fail.
hardened=(--read-only --cap-drop ALL --security-opt no-new-privileges)

start=$SECONDS
say "image $image ($(docker image inspect -f '{{.Size}}' "$image") bytes, user $(docker image inspect -f '{{.Config.User}}' "$image")), PostgreSQL $pg_image"
[ "$(docker image inspect -f '{{.Config.User}}' "$image")" = '65532:65532' ] || die "the image does not run as 65532:65532"

docker network create --label "$label" "$net" >/dev/null
docker run -d --name "$pg" --network "$net" --label "$label" \
	-e POSTGRES_USER=ledgerq -e POSTGRES_PASSWORD=smoke -e POSTGRES_DB=ledgerq \
	"$pg_image" >/dev/null

# Over TCP: the official image (and ours) first runs a socket-only server to
# initialise the cluster.
say "waiting for PostgreSQL"
deadline=$((SECONDS + wait_secs))
until docker exec "$pg" pg_isready -q -h 127.0.0.1 -U ledgerq -d ledgerq 2>/dev/null; do
	[ "$SECONDS" -lt "$deadline" ] || die "PostgreSQL did not accept connections within ${wait_secs}s"
	sleep 0.5
done
say "PostgreSQL is ready after $((SECONDS - start))s"

say "docker run $image migrate up"
out="$(docker run --rm --network "$net" --label "$label" "${hardened[@]}" \
	-e DATABASE_URL="$db_url" "$image" migrate up)" || die "migrate up failed: $out"
printf '%s\n' "$out"
grep -q '^applied [0-9]* migration(s); schema version [0-9]*$' <<<"$out" || die "migrate up printed no summary"

say "docker run $image (serve, migrations left to the step above)"
docker run -d --name "$app" --network "$net" --label "$label" "${hardened[@]}" \
	-p 127.0.0.1::8080 -e DATABASE_URL="$db_url" -e LEDGERQ_DATABASE_MIGRATE=false \
	"$image" >/dev/null
port="$(docker port "$app" 8080/tcp | sed -n 's/^127\.0\.0\.1:\([0-9]*\)$/\1/p' | head -n 1)"
[ -n "$port" ] || die "no published port for 8080/tcp: $(docker port "$app")"
base="http://127.0.0.1:$port"

# get PATH: the HTTP status code of GET PATH on the published port.
get() { curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$base$1" || true; }

say "waiting for $base/readyz"
deadline=$((SECONDS + wait_secs))
until [ "$(get /readyz)" = 200 ]; do
	[ "$(docker inspect -f '{{.State.Running}}' "$app")" = true ] || die "serve exited: $(docker inspect -f '{{.State.ExitCode}}' "$app")"
	[ "$SECONDS" -lt "$deadline" ] || die "/readyz did not answer 200 within ${wait_secs}s (last: $(get /readyz))"
	sleep 0.5
done
for path in /healthz /readyz; do
	code="$(get "$path")"
	say "GET $path -> $code"
	[ "$code" = 200 ] || die "GET $path answered $code"
done
say "GET /readyz body: $(curl -s --max-time 3 "$base/readyz")"
for path in /healthz /readyz; do
	docker exec "$app" /healthcheck "$path" || die "the image's healthcheck $path failed"
	say "docker exec /healthcheck $path -> ok"
done
uid="$(docker top "$app" -o pid,uid | awk 'NR == 2 { print $2 }')"
say "serve runs as uid $uid"
[ "$uid" = 65532 ] || die "serve runs as uid $uid, not 65532"

say "docker stop (SIGTERM; --shutdown-timeout is 30s)"
t=$SECONDS
docker stop -t 40 "$app" >/dev/null
code="$(docker inspect -f '{{.State.ExitCode}}' "$app")"
say "serve exited with $code after $((SECONDS - t))s"
[ "$code" = 0 ] || die "serve exited with $code on SIGTERM"
docker logs "$app" 2>&1 | grep -q '"msg":"ledgerq: stopped"' || die "serve did not log that it stopped"

say "ok in $((SECONDS - start))s"
