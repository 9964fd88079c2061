#!/bin/bash
# The official nginx image's entrypoint, cut down to the step compose uses
# (20-envsubst-on-templates.sh): render the templates, then exec the command
# so nginx is PID 1 and gets docker stop's SIGQUIT itself.
set -euo pipefail

if [[ ${1:-} == nginx ]]; then
  # Only variables set in the environment are substituted (envsubst gets
  # their list, as in the official script), so nginx's $host etc. stay.
  defined=$(printf '${%s} ' $(compgen -e))
  shopt -s nullglob
  for template in /etc/nginx/templates/*.template; do
    out=/etc/nginx/conf.d/$(basename "$template" .template)
    echo "$0: Running envsubst on $template to $out"
    envsubst "$defined" <"$template" >"$out"
  done
fi
exec "$@"
