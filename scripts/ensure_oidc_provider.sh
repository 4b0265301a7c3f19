#!/usr/bin/env bash
# The staff sign-in test (tests/dashboard/test_oidc_sign_in.py) signs in through a real
# OpenID Connect provider (integrations/oidc_test_provider/: npm's oidc-provider): its exact,
# locked dependencies from npm. Installed again only when package-lock.json changed since the
# last install. Node and npm come from Debian, as for scripts/ensure_node_shop.sh.
set -euo pipefail
provider="$(cd "$(dirname "$0")/.." && pwd)/integrations/oidc_test_provider"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if ! { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }; then
    echo "node and npm are not installed; the OIDC sign-in tests will be skipped (install Debian's nodejs and npm packages)" >&2
    exit 0
  fi
  echo "installing node and npm with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
stamp="$provider/node_modules/.installed-$(cksum "$provider/package-lock.json" | cut -d' ' -f1)"
if [ -e "$stamp" ]; then exit 0; fi
echo "installing the OIDC test provider's locked dependencies (npm ci)"
(cd "$provider" && npm ci --no-audit --no-fund --loglevel=error)
touch "$stamp"
