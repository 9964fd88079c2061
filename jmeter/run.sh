#!/usr/bin/env bash
# Runs JMeter in non-GUI mode with the arguments given, on whichever JMeter
# this machine has, and fails when the plan did not run.
#
#   jmeter/run.sh -t jmeter/seckill-compare.jmx -Jport=8080 -Jtoken=… -l results.jtl
#
# JMeter 5.x: runs `jmeter -n …` unchanged (you can also call it directly).
# Debian's JMeter 2.13: its XStream refuses to load any plan unless its
# allow-list is opened, so it runs through jmeter/debian/OpenXStream.java
# (compiled once into $SECKILL_JMETER_CACHE). 2.13 also exits 0 when a plan
# failed to load, so this script reads JMeter's log and fails on
# "Error in NonGUIDriver" (or any ERROR line from the plan's loading).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
log=${JMETER_LOG:-jmeter.log}
rm -f "$log"
# CSV results with a header line, the same on both versions.
common=(-n -j "$log"
  -Jjmeter.save.saveservice.output_format=csv
  -Jjmeter.save.saveservice.print_field_names=true)

version=$(dpkg-query -W -f='${Version}' jmeter 2>/dev/null || true)
if [[ $version == 2.13* ]]; then
  cache=${SECKILL_JMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seckill-jmeter}
  mkdir -p "$cache"
  if [[ ! -f $cache/OpenXStream.class || $here/debian/OpenXStream.java -nt $cache/OpenXStream.class ]]; then
    javac -d "$cache" "$here/debian/OpenXStream.java"
  fi
  java -Djmeter.home=/usr/share/jmeter \
    -cp "$cache:/usr/share/jmeter/bin/ApacheJMeter.jar" \
    OpenXStream "${common[@]}" "$@"
else
  command -v jmeter >/dev/null || { echo "jmeter not found: install JMeter 5.x (or Debian's jmeter)" >&2; exit 2; }
  jmeter "${common[@]}" "$@"
fi

if grep -E "Error in NonGUIDriver|ForbiddenClassException|Failed to load|ERROR - jmeter.save" "$log" >&2; then
  echo "JMeter did not run the plan; see $log" >&2
  exit 1
fi
