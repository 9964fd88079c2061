#!/usr/bin/env bash
# Makes every image the compose run needs exist in the engine at DOCKER_HOST:
# each one the compose file names (every profile) and each FROM of the
# Dockerfile. An image already there is used; one that can be pulled is
# pulled; otherwise a stand-in is built under exactly its name from
# Debian's package of the same version (docker/standins/<dir>/, each
# Dockerfile saying what of the official image it emulates and what not;
# docs/running.md#images-without-a-registry lists them). On a machine that
# reaches the registries the real images are pulled and nothing is built.
# Usage: standins.sh [IMAGE...] (only those images; every one by default).
set -euo pipefail
cd "$(dirname "$0")/.."

# The official name → its stand-in's directory under docker/standins/.
declare -A standin=(
  [debian:bookworm-slim]=debian
  [rust:1.95-bookworm]=rust
  [redis:7]=redis
  [postgres:15]=postgres
  [mariadb:10.11]=mariadb
  [zookeeper:3.8]=zookeeper
  [quay.io/coreos/etcd:v3.4.23]=etcd
  [nginx:1.27]=nginx
  [prom/prometheus:v2.42.0]=prometheus
  [nginx/nginx-prometheus-exporter:0.11.0]=nginx-exporter
  [justb4/jmeter:5.5]=jmeter
)
# Grafana has no Debian package: the compose run leaves it out.
skip=grafana/grafana

# The images named as arguments, or else every one; the base first: every
# other stand-in is built FROM it.
images=$(
  if (($#)); then
    printf '%s\n' "$@"
  else
    grep -E '^FROM ' Dockerfile | awk '{print $2}'
    SECKILL_ADMIN_TOKEN=images-only docker compose -f docker-compose.yml \
      --profile cluster --profile jmeter --profile observe config --images
  fi | grep -v '^seckill:' | sort -u |
    awk '$0 == "debian:bookworm-slim" {print; next} {rest = rest $0 "\n"} END {printf "%s", rest}'
)

# The base image: a Debian 12 minbase root filesystem from Debian's
# archive (docs, manuals and translations left out, as the official slim
# image leaves them out).
build_debian() {
  mmdebstrap --quiet --variant=minbase \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm - | docker import --change 'CMD ["bash"]' - "$1" >/dev/null
}

# The machine's own Rust toolchain (the one that builds this project,
# without its documentation) and CA bundle as the build context.
build_rust() {
  local sysroot version
  sysroot=$(rustc --print sysroot)
  version=$(rustc --version | awk '{print $2}')
  [[ $version == 1.95.* ]] || { echo "$1 needs Rust 1.95; this machine has $version" >&2; return 1; }
  tar -c -h -C "$sysroot" --transform 's,^\.,toolchain,' --exclude=./share . \
    -C /etc/ssl/certs ca-certificates.crt \
    -C "$PWD/docker/standins/rust" Dockerfile |
    quietly docker build --quiet -t "$1" -
}

# The classic builder (the stand-ins need nothing of BuildKit, and the
# daemon's BuildKit would want a buildx plugin in the client); its output,
# with its deprecation notice, is shown only when a build fails.
quietly() {
  local log
  log=$(mktemp)
  if ! DOCKER_BUILDKIT=0 "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

# One image: present, pulled, or built as its stand-in.
provide() {
  local image=$1 dir start
  case $image in "$skip"*) echo "$image: no Debian package, left out of the run" >&2; return 0 ;; esac
  if docker image inspect "$image" >/dev/null 2>&1; then
    echo "$image: present" >&2
    return 0
  fi
  if docker pull --quiet "$image" >/dev/null 2>&1; then
    echo "$image: pulled" >&2
    return 0
  fi
  dir=${standin[$image]:-}
  [ -n "$dir" ] || { echo "$image: cannot be pulled and has no stand-in in docker/standins/" >&2; return 1; }
  start=$SECONDS
  case $dir in
    debian) build_debian "$image" ;;
    rust) build_rust "$image" ;;
    *) quietly docker build --quiet -t "$image" -f "docker/standins/$dir/Dockerfile" . ;;
  esac
  echo "$image: stand-in built from docker/standins/$dir in $((SECONDS - start)) s ($(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=si))" >&2
}

# The base first, then the rest side by side: their builds wait mostly on
# downloads and dpkg, not on the CPU.
base=${images%%$'\n'*}
provide "$base"
pids=()
for image in ${images#"$base"}; do
  provide "$image" &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=$((failed + 1))
done
((failed == 0)) || { echo "$failed image(s) could not be provided" >&2; exit 1; }
