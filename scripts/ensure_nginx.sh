#!/usr/bin/env bash
# The edge tests run nginx on loopback ports of their own (deploy/nginx/); they need the binary,
# and njs for the gate's "open" policy when the room cannot be asked (libnginx-mod-http-js).
# Debian's package would start the system nginx on port 80: it is installed with service
# starts refused (policy-rc.d) and left disabled.
set -euo pipefail
NJS=/usr/lib/nginx/modules/ngx_http_js_module.so
if { command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; } && [ -e "$NJS" ]; then exit 0; fi
if ! { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }; then
  echo "nginx or njs is not installed; the edge tests that need them will be skipped (install Debian's nginx and libnginx-mod-http-js packages)" >&2
  exit 0
fi

echo "installing nginx and njs with apt-get (its service is not started)"
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx libnginx-mod-http-js >/dev/null
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now nginx >/dev/null 2>&1 || true
fi
