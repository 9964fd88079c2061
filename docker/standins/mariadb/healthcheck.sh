#!/bin/bash
# healthcheck.sh of the mariadb:10.11 stand-in: the two tests of the official
# script that docker-compose.yml runs (`--connect --innodb_initialized`), in
# the order given; exit 0 only if every test passes. It logs in as the
# `healthcheck` user the entrypoint wrote to .my-healthcheck.cnf.
set -euo pipefail

cnf=/var/lib/mysql/.my-healthcheck.cnf
client=(mariadb --skip-column-names --batch)
if [ -f "$cnf" ]; then
	client=(mariadb --defaults-extra-file="$cnf" --skip-column-names --batch)
fi

# The server answers on TCP, so other containers can reach it (the official
# script may settle this over the socket; the temporary server during
# initialisation has no TCP, so this fails until the real server is up).
# Any answer counts, an access-denied one too (SQLSTATE 28000), as officially:
# this tests that the server listens, not the credentials.
connect() {
	local out
	if out=$("${client[@]}" --protocol=tcp -h 127.0.0.1 -e 'SELECT 1' 2>&1); then
		[ "$out" = 1 ]
	else
		[[ $out == *'(28000)'* ]]
	fi
}

# InnoDB has finished starting (crash recovery included): the official query.
innodb_initialized() {
	local out
	out=$("${client[@]}" --protocol=socket -e "SELECT 1 FROM information_schema.ENGINES
		WHERE engine='innodb' AND support IN ('YES', 'DEFAULT', 'ENABLED')") || return 1
	[ "$out" = 1 ]
}

if [ $# -eq 0 ]; then
	echo 'healthcheck.sh: at least one test required (--connect, --innodb_initialized)' >&2
	exit 1
fi
for arg; do
	case "$arg" in
	--connect) test=connect ;;
	--innodb_initialized) test=innodb_initialized ;;
	*)
		echo "healthcheck.sh: unknown or unsupported option $arg" >&2
		exit 1
		;;
	esac
	if ! "$test"; then
		echo "healthcheck $test failed" >&2
		exit 1
	fi
done
