#!/usr/bin/env bash
# Builds ledgerq's container image without any container registry: compile a
# static ledgerq (and the healthcheck probe) on this machine, lay out a small
# build context beside them (a CA bundle, /etc/passwd and /etc/group with the
# user ledgerq, uid 65532), and `docker build` the repository's Dockerfile,
# which starts FROM scratch, with that context.
#
# Usage: deploy/build-image.sh [TAG]
#   TAG  image tag (default: ledgerq:local)
#
# Environment:
#   LEDGERQ_VERSION  version baked into the binary (default: `git describe
#                    --tags --always --dirty`, else "devel")
#   GOARCH           target architecture (default: this machine's)
#   CA_BUNDLE        CA certificates to install (default:
#                    /etc/ssl/certs/ca-certificates.crt, from Debian's
#                    ca-certificates package)
#
# Needs: go, a running Docker engine.
set -Eeuo pipefail

DEFAULT_TAG='ledgerq:local'
APP_UID=65532

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

say() { printf '[image] %s\n' "$*"; }
die() { printf '[image] error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,19s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

tag=''
while [ "$#" -gt 0 ]; do
	case "$1" in
	-h | --help) usage; exit 0 ;;
	-*) usage >&2; die "unknown option: $1" ;;
	*)
		[ -z "$tag" ] || die "only one TAG may be given"
		tag="$1"
		;;
	esac
	shift
done
tag="${tag:-$DEFAULT_TAG}"

command -v go >/dev/null || die "go is not on PATH"
command -v docker >/dev/null || die "docker CLI is not installed (apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "cannot reach the Docker engine (is dockerd running?)"
ca_bundle="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
[ -s "$ca_bundle" ] || die "no CA bundle at $ca_bundle (apt-get install ca-certificates, or set CA_BUNDLE)"

version="${LEDGERQ_VERSION:-$(git -C "$repo" describe --tags --always --dirty 2>/dev/null || true)}"
version="${version:-devel}"
revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"

ctx="$(mktemp -d "${TMPDIR:-/tmp}/ledgerq-image.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT

start=$SECONDS
say "building $tag, ledgerq $version"
t=$SECONDS
# -trimpath and a fixed -ldflags make the binary depend on the sources and
# the Go version only; -s -w drop the symbol table and DWARF (panics still
# print their stack traces).
(
	cd "$repo"
	export CGO_ENABLED=0
	go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$ctx/ledgerq" ./cmd/ledgerq
	go build -trimpath -ldflags "-s -w" -o "$ctx/healthcheck" ./deploy/healthcheck
)
say "go build done in $((SECONDS - t))s"

install -D -m 0644 "$ca_bundle" "$ctx/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nledgerq:x:%s:%s:ledgerq:/nonexistent:/sbin/nologin\n' "$APP_UID" "$APP_UID" > "$ctx/etc/passwd"
printf 'root:x:0:\nledgerq:x:%s:\n' "$APP_UID" > "$ctx/etc/group"
chmod 0644 "$ctx/etc/passwd" "$ctx/etc/group"
cp "$repo/Dockerfile" "$ctx/Dockerfile"

old_id="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
t=$SECONDS
# Debian's docker.io has no buildx; the legacy builder is all this file
# needs, and saying so keeps a newer CLI from asking for buildx.
if ! docker buildx version >/dev/null 2>&1; then
	export DOCKER_BUILDKIT=0
fi
docker build --quiet \
	--label "org.opencontainers.image.title=ledgerq" \
	--label "org.opencontainers.image.version=$version" \
	--label "org.opencontainers.image.revision=$revision" \
	--tag "$tag" "$ctx" >/dev/null
say "docker build done in $((SECONDS - t))s"
if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{.Id}}' "$tag")" ]; then
	# The previous build is now untagged; drop it unless a container uses it.
	if docker image rm "$old_id" >/dev/null 2>&1; then
		say "removed the previous build ${old_id#sha256:}"
	fi
fi

say "checking the image"
# A binary that needed a C library would not even start on an empty base.
docker run --rm "$tag" version
docker image ls "$tag"
say "built $tag ($(docker image inspect -f '{{.Size}}' "$tag") bytes) in $((SECONDS - start))s"
