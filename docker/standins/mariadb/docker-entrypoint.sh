#!/bin/bash
# Entrypoint of the mariadb:10.11 stand-in: the part of the official image's
# docker-entrypoint.sh that docker-compose.yml uses (see the Dockerfile).
set -euo pipefail

DATADIR=/var/lib/mysql
SOCKET=/run/mysqld/mysqld.sock # Debian's default, as the official image's
PORT=3306

log() { printf '%s [stand-in entrypoint] %s\n' "$(date -u +%FT%TZ)" "$*" >&2; }
# A random password of 32 URL-safe characters: nothing to escape in SQL.
random_password() { head -c 24 /dev/urandom | base64 -w0 | tr '+/' '-_'; }
# A string for a '...' SQL literal: backslashes and quotes escaped.
sql_string() { local s=${1//\\/\\\\}; printf '%s' "${s//\'/\\\'}"; }

# As the official image: a command starting with an option is for mariadbd.
if [ "${1:0:1}" = '-' ]; then
	set -- mariadbd "$@"
fi

# Anything but the server (mariadb, bash...) runs as given.
if [ "$1" != mariadbd ] && [ "$1" != mysqld ]; then
	exec "$@"
fi

# As root: give the volume and the socket directory to `mysql` (a fresh
# named volume or a bind mount may be root's), then come back as mysql.
# setpriv execs in place, so the server stays PID 1 and gets the signals.
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$DATADIR" "${SOCKET%/*}"
	find "$DATADIR" "${SOCKET%/*}" -maxdepth 0 ! -user mysql -exec chown mysql:mysql '{}' +
	exec setpriv --reuid=mysql --regid=mysql --init-groups "$0" "$@"
fi

# The `mysql` system database marks an initialised datadir: later starts skip
# straight to exec.
if [ -d "$DATADIR/mysql" ]; then
	log "found a database in $DATADIR: starting it, no initialisation"
	exec "$@"
fi

root_password=${MARIADB_ROOT_PASSWORD:-}
if [ -n "${MARIADB_RANDOM_ROOT_PASSWORD:-}" ]; then
	root_password=$(random_password)
	log "GENERATED ROOT PASSWORD: $root_password"
elif [ -z "$root_password" ]; then
	log 'the database is uninitialised: set MARIADB_RANDOM_ROOT_PASSWORD or MARIADB_ROOT_PASSWORD'
	exit 1
fi

log "initialising $DATADIR"
# The official image's options: root by password (not unix_socket), no test
# database, no binary log. "${@:2}" are the server's own options.
mariadb-install-db --datadir="$DATADIR" --rpm --auth-root-authentication-method=normal \
	--skip-test-db --skip-log-bin --expire-logs-days=0 \
	--loose-innodb_buffer_pool_load_at_startup=0 \
	--loose-innodb_buffer_pool_dump_at_shutdown=0 "${@:2}"

# A temporary server without TCP, its socket elsewhere than the usual one:
# neither clients nor the healthcheck see a server before the users exist.
init_socket=/run/mysqld/init.sock
"$@" --skip-networking --socket="$init_socket" --skip-log-bin \
	--loose-innodb_buffer_pool_load_at_startup=0 &
pid=$!
sql() { mariadb --protocol=socket --socket="$init_socket" -uroot --binary-mode "$@"; }
for _ in $(seq 60); do
	if sql -e 'SELECT 1' >/dev/null 2>&1; then break; fi
	kill -0 "$pid" 2>/dev/null || { log 'the temporary server died'; exit 1; }
	sleep 0.5
done
sql -e 'SELECT 1' >/dev/null

# The healthcheck users, as the official image makes them (USAGE only), and
# their client file; healthcheck.sh reads it.
hc_password=$(random_password)
umask 077
printf '[mariadb-client]\nport=%s\nsocket=%s\nuser=healthcheck\npassword=%s\nprotocol=tcp\n' \
	"$PORT" "$SOCKET" "$hc_password" >"$DATADIR/.my-healthcheck.cnf"
umask 022

hc_users=
for host in 127.0.0.1 ::1 localhost; do
	hc_users+="CREATE USER healthcheck@'$host' IDENTIFIED BY '$hc_password';"
	hc_users+="GRANT USAGE ON *.* TO healthcheck@'$host';"
done
create_db=
if [ -n "${MARIADB_DATABASE:-}" ]; then
	create_db="CREATE DATABASE IF NOT EXISTS \`$MARIADB_DATABASE\`;"
fi
app_user=
if [ -n "${MARIADB_USER:-}" ] && [ -n "${MARIADB_PASSWORD:-}" ]; then
	app_user="CREATE USER '$MARIADB_USER'@'%' IDENTIFIED BY '$(sql_string "$MARIADB_PASSWORD")';"
	if [ -n "${MARIADB_DATABASE:-}" ]; then
		# `_` is a wildcard in a GRANT's database name: escaped, as the official image does.
		app_user+="GRANT ALL ON \`${MARIADB_DATABASE//_/\\_}\`.* TO '$MARIADB_USER'@'%';"
	fi
fi
root_escaped=$(sql_string "$root_password")

log 'creating users and database'
sql --database=mysql <<-EOSQL
	SET @@SESSION.SQL_LOG_BIN=0;
	SET @@SESSION.SQL_MODE=REPLACE(@@SESSION.SQL_MODE, 'NO_BACKSLASH_ESCAPES', '');
	DROP USER IF EXISTS root@'127.0.0.1', root@'::1';
	EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\'', @@hostname, '\'');
	SET PASSWORD FOR 'root'@'localhost' = PASSWORD('$root_escaped');
	CREATE USER 'root'@'%' IDENTIFIED BY '$root_escaped';
	GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;
	GRANT PROXY ON ''@'%' TO 'root'@'%' WITH GRANT OPTION;
	$hc_users
	$create_db
	$app_user
EOSQL

# SIGTERM is a clean shutdown; wait returns the server's exit status.
kill "$pid"
wait "$pid"
log 'initialisation done'

exec "$@"
