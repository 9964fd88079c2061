#!/usr/bin/env bash
# Installs what seckill needs on a Debian/Ubuntu machine, only what is
# missing: the servers the lab starts (redis-server, PostgreSQL, MariaDB,
# nginx, ZooKeeper with its Java runtime, etcd), JMeter with its HTTP sampler and a JDK
# (javac builds jmeter/debian/OpenXStream.java, which Debian's JMeter 2.13
# needs to load any plan), Chromium (the dashboard test), docker.io, mmdebstrap and Compose v2
# (the compose run, scripts/compose-run.sh; Compose also validates the file), and Schemathesis (tests/labs/openapi.rs; pinned, from PyPI,
# into a virtualenv under target/ by scripts/schemathesis.sh).
# Rust itself is expected from rustup (Debian's rustc is too old for sqlx).
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
have redis-server || need+=(redis-server)
have nginx || need+=(nginx)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -f /usr/share/java/zookeeper.jar ] && have java || need+=(zookeeper)
# MariaDB (the `mysql` store): the lab runs its own mariadbd, initialised
# by mariadb-install-db.
have mariadbd || need+=(mariadb-server)
# Prometheus and its nginx exporter (`seckill lab --observe`; promtool
# checks both Prometheus configurations in tests/labs/observe.rs).
have prometheus || need+=(prometheus)
have prometheus-nginx-exporter || need+=(prometheus-nginx-exporter)
# etcd (the `etcd` lease lock), started by the lab.
have etcd || need+=(etcd-server)
# protoc and its well-known types: etcd-client's build script compiles
# etcd's gRPC definitions.
have protoc || need+=(protobuf-compiler)
# fusermount3: the power-cut filesystem (src/lab/powercut/) mounts by
# itself as root and through fusermount3 otherwise.
have fusermount3 || need+=(fuse3)
[ -f /usr/include/google/protobuf/descriptor.proto ] || need+=(libprotobuf-dev)
if ! have jmeter; then
  need+=(jmeter jmeter-http)
elif [ -d /usr/share/jmeter ] && [ ! -f /usr/share/jmeter/lib/ext/ApacheJMeter_http.jar ]; then
  need+=(jmeter-http)
fi
have javac || need+=(default-jdk-headless)
# Headless Chromium: the dashboard test loads GET / and screenshots it.
have chromium || need+=(chromium)
# Node.js and npm: tests/labs/layout.rs measures pages with playwright-core,
# which scripts/playwright.sh installs from the npm registry.
have node || need+=(nodejs)
have npm || need+=(npm)
# wrk: the reference HTTP load generator `seckill bench` measures its own
# client against (its `(wrk)` figures).
have wrk || need+=(wrk)
# faketime: the clock-skew scenario runs an instance with its clock ahead.
have faketime || need+=(faketime)
# A Docker engine for the compose run (scripts/compose-run.sh starts one of
# its own): Debian's docker.io where there is no dockerd. mmdebstrap makes
# the base image where no registry is reachable (scripts/standins.sh).
have dockerd || need+=(docker.io)
have mmdebstrap || need+=(mmdebstrap)
# Python with venv and pip, for Schemathesis' virtualenv.
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)

if ((${#need[@]})); then
  echo "installing: ${need[*]}" >&2
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  # Try without refreshing the index first (fast when it is recent).
  if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${need[@]}" >/tmp/seckill-apt.log 2>&1; then
    "${sudo[@]}" apt-get update -q >>/tmp/seckill-apt.log 2>&1
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${need[@]}" >>/tmp/seckill-apt.log 2>&1 \
      || { tail -30 /tmp/seckill-apt.log >&2; exit 1; }
  fi
fi

bash "$(dirname "$0")/schemathesis.sh" --install
bash "$(dirname "$0")/playwright.sh" --install
# Compose v2, pinned, from PyPI (Debian 12 has only Compose 1.29, which
# knows neither `depends_on: restart` nor the profiles' `*`).
bash "$(dirname "$0")/compose-plugin.sh" --install >/dev/null

command -v cargo >/dev/null 2>&1 || {
  echo "cargo not found: install Rust with rustup (https://rustup.rs), 1.94 or newer" >&2
  exit 1
}
