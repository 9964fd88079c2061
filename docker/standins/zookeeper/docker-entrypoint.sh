#!/bin/bash
# Entrypoint of the zookeeper:3.8 stand-in: the official docker-entrypoint.sh's
# zoo.cfg, then Debian's ZooKeeper exec'd in the foreground (PID 1, so that
# `docker stop` reaches the JVM directly).
set -euo pipefail

# Started as root: give the data dirs (fresh volumes are root's) to zookeeper
# and re-exec as that user, as the official image does with gosu.
if [[ "${1:-}" == zkServer.sh && "$(id -u)" == 0 ]]; then
    chown -R zookeeper "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" "$ZOO_LOG_DIR"
    exec setpriv --reuid=zookeeper --regid=zookeeper --init-groups "$0" "$@"
fi

# The official image's zoo.cfg, written only when none was mounted. The
# single server line is where standalone mode takes its clientPort (2181).
if [[ ! -f "$ZOO_CONF_DIR/zoo.cfg" ]]; then
    cat > "$ZOO_CONF_DIR/zoo.cfg" <<CFG
dataDir=$ZOO_DATA_DIR
dataLogDir=$ZOO_DATA_LOG_DIR
tickTime=$ZOO_TICK_TIME
initLimit=$ZOO_INIT_LIMIT
syncLimit=$ZOO_SYNC_LIMIT
autopurge.snapRetainCount=$ZOO_AUTOPURGE_SNAPRETAINCOUNT
autopurge.purgeInterval=$ZOO_AUTOPURGE_PURGEINTERVAL
maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS
standaloneEnabled=$ZOO_STANDALONE_ENABLED
admin.enableServer=$ZOO_ADMINSERVER_ENABLED
server.1=localhost:2888:3888;2181
CFG
    if [[ -n "${ZOO_4LW_COMMANDS_WHITELIST:-}" ]]; then
        echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST" >> "$ZOO_CONF_DIR/zoo.cfg"
    fi
fi
# server.1 above: the config parser looks its own id up in dataDir/myid.
[[ -f "$ZOO_DATA_DIR/myid" ]] || echo 1 > "$ZOO_DATA_DIR/myid"

# There is no upstream zkServer.sh here: run what its start-foreground runs
# (QuorumPeerMain, which falls back to standalone for a single server), on
# Debian's jars (servlet-api for the AdminServer on :8080, which Debian's
# zookeeper.jar manifest leaves out); slf4j-simple gives the log a binding.
if [[ "$*" == "zkServer.sh start-foreground" ]]; then
    set -- java "-Dzookeeper.log.dir=$ZOO_LOG_DIR" -Xmx1000m \
        -cp "$ZOO_CONF_DIR:/usr/share/java/zookeeper.jar:/usr/share/java/servlet-api.jar:/usr/share/java/slf4j-simple.jar" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZOO_CONF_DIR/zoo.cfg"
fi
exec "$@"
