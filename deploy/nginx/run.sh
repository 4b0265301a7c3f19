#!/bin/sh
# nginx in front of the room, in the foreground: the configuration rendered from the template
# and the environment (deploy/nginx/nginx.conf.template names the variables), then nginx.
# docker-compose.yml's nginx service runs this; so does tests/edge.py. NGINX_TEMPLATE names
# another template (gate.conf.template: a shop behind the room's gate, tests/test_gate_nginx.py).
set -eu
here=$(dirname "$0")
mkdir -p "$NGINX_RUN_DIR"
"${PYTHON:-python3}" "$here/render.py" "${NGINX_TEMPLATE:-$here/nginx.conf.template}" "$NGINX_RUN_DIR/nginx.conf"
# -e: nginx's own messages from before it reads the configuration go to stderr as well.
exec "${NGINX:-nginx}" -e stderr -p "$NGINX_RUN_DIR" -c "$NGINX_RUN_DIR/nginx.conf" -g 'daemon off;'
