#!/bin/bash
# justb4/jmeter's entrypoint runs `jmeter "$@"` on JMeter 5.5. Here JMeter
# is Debian's 2.13, run by the project's jmeter/run.sh (XStream fix, CSV
# results, fails when the plan did not load); this script only translates
# the 5.x options that 2.13 lacks before handing over:
#   -f         delete the -l file and the -o folder first (done here);
#   -e -o DIR  the HTML dashboard, from JMeter 3.0: dropped, said so;
#   -j FILE    passed as JMETER_LOG (run.sh sets -j, and greps that log);
#   -n         run.sh passes it.
# It also fails on a missing -t plan: 2.13 then says "Could not open" on
# stdout only (nothing run.sh's log check sees) and exits 0; 5.x fails.
set -euo pipefail

args=() force=false dashboard=false jtl='' out='' plan=''
while (($#)); do
  case $1 in
    -n | --nongui) ;;
    -f | --forceDeleteResultFile) force=true ;;
    -e | --reportatendofloadtests) dashboard=true ;;
    -o | --reportoutputfolder) dashboard=true out=${2:?-o needs a folder}; shift ;;
    -j | --jmeterlogfile) export JMETER_LOG=${2:?-j needs a file}; shift ;;
    -l | --logfile) jtl=${2:?-l needs a file}; args+=("$1" "$2"); shift ;;
    -t | --testfile) plan=${2:?-t needs a plan}; args+=("$1" "$2"); shift ;;
    *) args+=("$1") ;;
  esac
  shift
done

if [[ -n $plan && ! -r $plan ]]; then
  echo "jmeter stand-in: cannot read the plan $plan" >&2
  exit 1
fi
if $force; then
  rm -rf -- ${jtl:+"$jtl"} ${out:+"$out"}
fi
if $dashboard; then
  echo "jmeter stand-in: JMeter 2.13 here; the HTML dashboard (-e -o) needs JMeter >= 3.0: not written" >&2
fi
exec /opt/seckill/jmeter/run.sh "${args[@]}"
