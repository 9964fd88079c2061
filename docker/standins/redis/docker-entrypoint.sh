#!/bin/bash
# Entrypoint of the redis:7 stand-in: the official docker-entrypoint.sh's
# behaviour, reduced to what Debian's redis-server needs.
set -euo pipefail

# `docker run redis:7 --appendonly yes` or `... my.conf`: the server is implied.
if [[ "${1:-}" == -* || "${1:-}" == *.conf ]]; then
    set -- redis-server "$@"
fi

# Started as root: give /data to redis (a fresh volume is root's) and re-exec
# as redis, so that the server ends up PID 1 without root.
if [[ "${1:-}" == redis-server && "$(id -u)" == 0 ]]; then
    find . \! -user redis -exec chown redis '{}' +
    exec setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
fi

# The official image builds Redis with protected mode off, so that containers
# on the network can connect without a password; Debian's build has it on.
# Insert `--protected-mode no` after the config file (which must come first)
# and before the user's args, so an explicit --protected-mode still wins.
if [[ "${1:-}" == redis-server ]]; then
    shift
    conf=()
    [[ -f "${1:-}" ]] && { conf=("$1"); shift; }
    if (( ${#conf[@]} )) && grep -q '^protected-mode' "${conf[0]}"; then
        set -- redis-server "${conf[@]}" "$@"    # the file's own setting wins
    else
        set -- redis-server "${conf[@]}" --protected-mode no "$@"
    fi
fi

# As the official image: files the server writes are private unless told.
[[ "$(umask)" == 0022 ]] && umask 0077

exec "$@"
