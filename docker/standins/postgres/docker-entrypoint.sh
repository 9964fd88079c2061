#!/bin/bash
# Entrypoint of the postgres:15 stand-in: the part of the official image's
# docker-entrypoint.sh that docker-compose.yml uses (see the Dockerfile).
set -euo pipefail

log() { printf '%s [stand-in entrypoint] %s\n' "$(date -u +%FT%TZ)" "$*" >&2; }

# As the official image: a command starting with an option is for postgres.
if [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi

# Anything but the server (psql, pg_isready, bash...) runs as given.
if [ "${1:-}" != 'postgres' ]; then
	exec "$@"
fi

# As root: give the volume and the socket directory to `postgres` (a fresh
# named volume or a bind mount may be root's), then come back as postgres.
# setpriv execs in place, so the server stays PID 1 and gets the signals.
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres "$PGDATA"
	chmod 700 "$PGDATA"
	chown postgres:postgres /var/run/postgresql
	chmod 3777 /var/run/postgresql
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

POSTGRES_USER=${POSTGRES_USER:-postgres}
POSTGRES_DB=${POSTGRES_DB:-$POSTGRES_USER}

# PG_VERSION marks an initialised cluster: later starts skip straight to exec.
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	if [ -z "${POSTGRES_PASSWORD:-}" ]; then
		log 'the database is uninitialised and POSTGRES_PASSWORD is not set'
		exit 1
	fi
	log "initialising $PGDATA (superuser $POSTGRES_USER)"
	# initdb's defaults as the official image keeps them: trust for the
	# socket and loopback; the password is stored as SCRAM (PG 15's default).
	initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
		--encoding=UTF8 --locale=C.UTF-8
	# Every other host must give the password.
	printf '\nhost all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"

	if [ "$POSTGRES_DB" != postgres ]; then
		# A temporary server with no TCP and its socket in a private
		# directory: no client, not even the healthcheck's pg_isready on
		# /var/run/postgresql, sees a server before the database exists.
		sock=$(mktemp -d)
		pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories='$sock'" -w start
		psql -v ON_ERROR_STOP=1 --no-psqlrc --host="$sock" --username="$POSTGRES_USER" \
			--no-password --dbname=postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
		pg_ctl -D "$PGDATA" -m fast -w stop
		rmdir "$sock"
	fi
	log 'initialisation done'
else
	log "found a cluster in $PGDATA: starting it, no initialisation"
fi

exec "$@"
