#!/usr/bin/env bash
# The Queue-it tests (tests/test_queueit_*.py) run a small Node shop behind Queue-it's own
# connector (integrations/queueit_node_shop/): its exact, locked dependencies from npm.
# Installed again only when package-lock.json changed since the last install.
set -euo pipefail
shop="$(cd "$(dirname "$0")/.." && pwd)/integrations/queueit_node_shop"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if ! { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }; then
    echo "node and npm are not installed; the Queue-it connector tests will be skipped (install Debian's nodejs and npm packages)" >&2
    exit 0
  fi
  echo "installing node and npm with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
stamp="$shop/node_modules/.installed-$(cksum "$shop/package-lock.json" | cut -d' ' -f1)"
if [ -e "$stamp" ]; then exit 0; fi
echo "installing the Queue-it test shop's locked dependencies (npm ci)"
(cd "$shop" && npm ci --no-audit --no-fund --loglevel=error)
touch "$stamp"
