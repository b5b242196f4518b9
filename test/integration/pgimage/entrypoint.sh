#!/usr/bin/env bash
# Entrypoint of the local PostgreSQL test image (see README.md beside this file).
#
# A small re-implementation of the parts of the official postgres image's
# docker-entrypoint.sh that the tests (and testcontainers-go's postgres module)
# rely on:
#
#   * POSTGRES_USER (default "postgres"), POSTGRES_PASSWORD (required unless
#     POSTGRES_HOST_AUTH_METHOD=trust), POSTGRES_DB (default: POSTGRES_USER),
#     their *_FILE variants, POSTGRES_INITDB_ARGS, POSTGRES_HOST_AUTH_METHOD
#     (default scram-sha-256) and PGDATA;
#   * on first start: initdb as the unprivileged "postgres" user (with
#     --no-sync: a throwaway test database, and it saves seconds per
#     container), allow password connections from anywhere, start a temporary
#     server that only listens on the Unix socket, create the database, run
#     /docker-entrypoint-initdb.d/*.{sh,sql,sql.gz}, stop the temporary server,
#     then start the real one. So "database system is ready to accept
#     connections" is printed twice on first start, exactly like the official
#     image (testcontainers' postgres.BasicWaitStrategies waits for 2);
#   * "postgres ARGS..." (and "-c foo=bar ..." alone) passes ARGS to the
#     server; any other command is exec'd as is (e.g. "bash").
#
# The server runs in the foreground as a child of this script (PID 1), which
# forwards `docker stop`'s SIGTERM as SIGINT (fast shutdown). Everything is
# logged to stdout/stderr.
set -Eeuo pipefail

log() { printf '%s [entrypoint] %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" "$*"; }
die() { log "error: $*" >&2; exit 1; }

# file_env VAR [DEFAULT]: VAR may be given directly or as VAR_FILE (a path).
file_env() {
	local var="$1" def="${2:-}"
	local fvar="${var}_FILE"
	local val="$def"
	if [ -n "${!var:-}" ] && [ -n "${!fvar:-}" ]; then
		die "both $var and $fvar are set (they are exclusive)"
	fi
	if [ -n "${!var:-}" ]; then
		val="${!var}"
	elif [ -n "${!fvar:-}" ]; then
		val="$(< "${!fvar}")"
	fi
	export "$var"="$val"
	unset "$fvar"
}

# First argument starting with '-' means "postgres -c ...".
if [ "${1:-}" != "" ] && [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi
# No command at all: run the server.
if [ "$#" -eq 0 ]; then
	set -- postgres
fi

# Anything that isn't the server is run as is (e.g. `docker run -it IMAGE bash`).
if [ "$1" != 'postgres' ]; then
	exec "$@"
fi

export PGDATA="${PGDATA:-/var/lib/postgresql/data}"
SOCKET_DIR=/var/run/postgresql

# As root: prepare the directories, then re-exec this script as "postgres".
if [ "$(id -u)" = '0' ]; then
	mkdir -p "$PGDATA" "$SOCKET_DIR"
	chown postgres:postgres "$SOCKET_DIR"
	chmod 2775 "$SOCKET_DIR"
	# Only chown the data dir when it isn't ours yet (a big existing volume
	# would otherwise be walked at every start).
	if [ "$(stat -c %U "$PGDATA")" != 'postgres' ]; then
		chown -R postgres:postgres "$PGDATA"
	fi
	chmod 0700 "$PGDATA"
	export HOME=/var/lib/postgresql
	exec setpriv --reuid=postgres --regid=postgres --init-groups -- "${BASH_SOURCE[0]}" "$@"
fi

file_env POSTGRES_PASSWORD
file_env POSTGRES_USER postgres
file_env POSTGRES_DB "$POSTGRES_USER"
file_env POSTGRES_INITDB_ARGS
POSTGRES_HOST_AUTH_METHOD="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
PGPORT="${PGPORT:-5432}"

# psql for the init phase: Unix socket of the temporary server, local trust.
process_sql() {
	PGHOST="$SOCKET_DIR" PGPORT="$PGPORT" PGPASSWORD='' \
		psql -v ON_ERROR_STOP=1 --no-psqlrc --no-password \
		--username "$POSTGRES_USER" "$@"
}

init_cluster() {
	if [ -z "$POSTGRES_PASSWORD" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != 'trust' ]; then
		die "POSTGRES_PASSWORD is empty; set it (or POSTGRES_HOST_AUTH_METHOD=trust, which allows anyone to connect without a password)"
	fi

	log "initialising a new cluster in $PGDATA for user '$POSTGRES_USER'"
	local pwfile
	pwfile="$(mktemp)"
	printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a word list on purpose
	initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
		--encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=trust \
		--no-sync $POSTGRES_INITDB_ARGS
	rm -f "$pwfile"

	# Password connections from anywhere (initdb already trusts the socket and
	# loopback, as in the official image).
	# ("md5" also accepts the scram-sha-256 verifiers initdb stores.)
	printf '\n# added by docker-entrypoint.sh\nhost all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD" >> "$PGDATA/pg_hba.conf"
	printf "\n# added by docker-entrypoint.sh\nlisten_addresses = '*'\n" >> "$PGDATA/postgresql.conf"

	# Temporary server: Unix socket only, so nobody connects before we're
	# done; fsync off, like initdb --no-sync (its shutdown checkpoint would
	# otherwise spend ~0.5 s syncing the fresh cluster).
	log "starting a temporary server for initialisation"
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c fsync=off -p $PGPORT" -w start

	if [ "$POSTGRES_DB" != 'postgres' ]; then
		local exists
		# psql only interpolates :'db' in input read from stdin/files, not -c.
		exists="$(printf '%s\n' "SELECT 1 FROM pg_database WHERE datname = :'db';" |
			process_sql --dbname postgres --set db="$POSTGRES_DB" --tuples-only --no-align)"
		if [ -z "$exists" ]; then
			log "creating database '$POSTGRES_DB'"
			printf '%s\n' 'CREATE DATABASE :"db";' |
				process_sql --dbname postgres --set db="$POSTGRES_DB"
		fi
	fi

	local f
	for f in /docker-entrypoint-initdb.d/*; do
		[ -e "$f" ] || continue
		case "$f" in
		*.sh)
			if [ -x "$f" ]; then
				log "running $f"
				"$f"
			else
				log "sourcing $f"
				# shellcheck disable=SC1090
				. "$f"
			fi
			;;
		*.sql)
			log "running $f"
			process_sql --dbname "$POSTGRES_DB" -f "$f"
			;;
		*.sql.gz)
			log "running $f"
			gunzip -c "$f" | process_sql --dbname "$POSTGRES_DB"
			;;
		*) log "ignoring $f" ;;
		esac
	done

	log "stopping the temporary server"
	pg_ctl -D "$PGDATA" -m fast -w stop
	log "init process complete; ready for start up"
}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	# PID 1 ignores signals it has no handler for: without this, a
	# `docker stop` during initialisation would wait for its SIGKILL.
	trap 'log "signal received during initialisation; aborting"; pg_ctl -D "$PGDATA" -m immediate -w stop >/dev/null 2>&1 || true; exit 143' TERM INT QUIT
	init_cluster
	trap - TERM INT QUIT
else
	log "cluster in $PGDATA already initialised; skipping initialisation"
fi

shift # drop "postgres"
log "starting server: postgres $*"
# `docker import` can't set STOPSIGNAL, so `docker stop` sends SIGTERM, which
# postgres takes as a "smart" shutdown (wait for every client to disconnect).
# Stay in front of the server and turn SIGTERM into SIGINT ("fast" shutdown:
# end sessions, checkpoint, exit), as the official image's STOPSIGNAL does.
postgres "$@" &
pg_pid=$!
trap 'kill -INT "$pg_pid" 2>/dev/null || true' TERM INT
trap 'kill -QUIT "$pg_pid" 2>/dev/null || true' QUIT
trap 'kill -HUP "$pg_pid" 2>/dev/null || true' HUP
set +e
while :; do
	wait "$pg_pid"
	rc=$?
	kill -0 "$pg_pid" 2>/dev/null || break # gone: rc is its exit status
done
log "server exited with status $rc"
exit "$rc"
