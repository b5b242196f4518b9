#!/usr/bin/env bash
# Builds the local PostgreSQL 15 image used by the integration tests, without
# any container registry: debootstrap a minimal Debian bookworm root with
# postgresql-15 from the Debian mirror apt already uses, add entrypoint.sh,
# and `docker import` the tree.
#
# Usage: test/integration/pgimage/build.sh [--force] [TAG]
#   TAG      image tag (default: ledgerq/postgres:15-local)
#   --force  rebuild even if TAG already exists and was built from this very
#            recipe (a TAG built from another version of build.sh or
#            entrypoint.sh is always rebuilt)
#
# Environment:
#   DEBIAN_MIRROR   mirror for debootstrap (default: taken from apt's sources)
#   PGIMAGE_WORKDIR parent directory of the temporary root (default: /var/tmp)
#
# Needs: root, debootstrap, a running Docker engine.
set -Eeuo pipefail

DEFAULT_TAG='ledgerq/postgres:15-local'
SUITE='bookworm'
PG_MAJOR='15'

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

say() { printf '[pgimage] %s\n' "$*"; }
die() { printf '[pgimage] error: %s\n' "$*" >&2; exit 1; }

usage() { sed -n '2,17s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

force=0
tag=''
while [ "$#" -gt 0 ]; do
	case "$1" in
	--force | -f) force=1 ;;
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

[ "$(id -u)" = '0' ] || die "must run as root (debootstrap needs it)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
command -v docker >/dev/null || die "docker CLI is not installed (apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "cannot reach the Docker engine (is dockerd running?)"

# The image is labelled with a hash of this recipe, so an image built from an
# older build.sh/entrypoint.sh is rebuilt instead of silently reused.
recipe_label='org.ledgerq.pgimage.recipe'
recipe="$(cat "$here/build.sh" "$here/entrypoint.sh" | sha256sum | cut -c1-16)"

if [ "$force" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
	have="$(docker image inspect -f "{{ index .Config.Labels \"$recipe_label\" }}" "$tag" 2>/dev/null || true)"
	if [ "$have" = "$recipe" ]; then
		say "image $tag already exists (recipe $recipe); skipping build (use --force to rebuild)"
		exit 0
	fi
	say "image $tag exists but was built from another recipe (${have:-unlabelled}, now $recipe); rebuilding"
fi

# The Debian mirror apt is configured with: deb822 sources first, then the
# one-line format. Security/updates suites live elsewhere; we want the main
# archive, i.e. the entry whose suites include plain "$SUITE".
detect_mirror() {
	local f uri
	shopt -s nullglob
	for f in /etc/apt/sources.list.d/*.sources; do
		uri="$(awk -v suite="$SUITE" '
			function flush() {
				if (types ~ /(^|[ \t])deb([ \t]|$)/ && (" " suites " ") ~ (" " suite " ") && uris != "") {
					split(uris, u, /[ \t]+/); print u[1]; found = 1; exit
				}
				types = ""; suites = ""; uris = ""
			}
			/^[ \t]*$/ { flush(); next }
			/^[ \t]*#/ { next }
			tolower($1) == "types:"  { $1 = ""; types = $0 }
			tolower($1) == "suites:" { $1 = ""; suites = $0; gsub(/^[ \t]+|[ \t]+$/, "", suites); gsub(/[ \t]+/, " ", suites) }
			tolower($1) == "uris:"   { $1 = ""; uris = $0; gsub(/^[ \t]+/, "", uris) }
			END { if (!found) flush() }
		' "$f")"
		if [ -n "$uri" ]; then printf '%s\n' "$uri"; return 0; fi
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		# deb [options] URI SUITE COMPONENTS...
		uri="$(awk -v suite="$SUITE" '
			$1 == "deb" {
				i = 2; if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == suite) { print $i; exit }
			}' "$f")"
		if [ -n "$uri" ]; then printf '%s\n' "$uri"; return 0; fi
	done
	return 1
}

mirror="${DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
	mirror="$(detect_mirror || true)"
	[ -n "$mirror" ] || { mirror='http://deb.debian.org/debian'; say "no $SUITE entry found in apt's sources; falling back to $mirror"; }
fi

old_id="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"

workdir="$(mktemp -d "${PGIMAGE_WORKDIR:-/var/tmp}/ledgerq-pgimage.XXXXXX")"
root="$workdir/root"

cleanup() {
	local m
	# debootstrap mounts proc/sys inside the root while it works; if it was
	# interrupted, unmount anything left there before deleting the tree.
	if [ -d "$root" ]; then
		awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r |
			while read -r m; do umount -l "$m" 2>/dev/null || true; done
	fi
	rm -rf --one-file-system "$workdir"
}
trap cleanup EXIT

start=$SECONDS
say "building $tag from Debian $SUITE + postgresql-$PG_MAJOR"
say "mirror: $mirror"
say "root:   $root"

say "debootstrap --variant=minbase --include=postgresql-$PG_MAJOR (takes about a minute or two)..."
t=$SECONDS
if ! debootstrap --variant=minbase --include="postgresql-$PG_MAJOR" "$SUITE" "$root" "$mirror" >"$workdir/debootstrap.log" 2>&1; then
	tail -n 40 "$workdir/debootstrap.log" >&2 || true
	[ -f "$root/debootstrap/debootstrap.log" ] && tail -n 40 "$root/debootstrap/debootstrap.log" >&2
	die "debootstrap failed"
fi
say "debootstrap done in $((SECONDS - t))s"

[ -x "$root/usr/lib/postgresql/$PG_MAJOR/bin/postgres" ] || die "postgres binary missing from the root"
grep -q '^postgres:' "$root/etc/passwd" || die "postgres user missing from the root"

say "trimming the root and installing the entrypoint"
# The package's postinst created a "main" cluster the Debian way; the
# entrypoint makes its own in $PGDATA, so drop it (and caches, docs).
rm -rf "$root/etc/postgresql/$PG_MAJOR" "$root/var/lib/postgresql/$PG_MAJOR" "$root"/var/log/postgresql/*
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/*
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
rm -rf "$root"/usr/share/locale/* "$root"/usr/share/i18n/* # translations, locale sources (we use C.UTF-8)
rm -rf "$root"/var/cache/debconf/*-old "$root"/var/log/*.log "$root"/var/log/apt/*

install -m 0755 "$here/entrypoint.sh" "$root/usr/local/bin/docker-entrypoint.sh"
mkdir -p "$root/docker-entrypoint-initdb.d"
pg_ids="$(awk -F: '$1 == "postgres" { print $3 ":" $4 }' "$root/etc/passwd")"
install -d -m 0700 -o "${pg_ids%:*}" -g "${pg_ids#*:}" "$root/var/lib/postgresql/data"
install -d -m 2775 -o "${pg_ids%:*}" -g "${pg_ids#*:}" "$root/run/postgresql"
# Empty the machine identity files so every container looks fresh.
: > "$root/etc/hostname"
rm -f "$root/etc/machine-id"

say "importing into docker as $tag ($(du -sh --one-file-system "$root" | cut -f1) on disk)"
t=$SECONDS
tar --numeric-owner -C "$root" -c . |
	docker import \
		--message "ledgerq local postgres $PG_MAJOR (debootstrap $SUITE)" \
		--change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
		--change 'CMD ["postgres"]' \
		--change 'EXPOSE 5432' \
		--change "ENV PATH=/usr/lib/postgresql/$PG_MAJOR/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
		--change 'ENV PGDATA=/var/lib/postgresql/data' \
		--change 'ENV LANG=C.UTF-8' \
		--change 'WORKDIR /' \
		--change "LABEL $recipe_label=$recipe" \
		- "$tag" >/dev/null
say "import done in $((SECONDS - t))s"
if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{.Id}}' "$tag")" ]; then
	# The previous build is now untagged; drop it unless a container uses it.
	if docker image rm "$old_id" >/dev/null 2>&1; then
		say "removed the previous build ${old_id#sha256:}"
	fi
fi

say "checking the image"
docker run --rm --entrypoint postgres "$tag" --version
docker image ls "$tag"
say "built $tag in $((SECONDS - start))s"
