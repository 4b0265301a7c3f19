#!/usr/bin/env bash
# The observability tests run Prometheus's promtool on deploy/prometheus/ (the alert rules and
# their unit tests), and scripts/render_dashboards.py runs Prometheus itself: Debian's
# `prometheus` package has both. Its service would start scraping on port 9090: it is
# installed with service starts refused (policy-rc.d) and left disabled.
set -euo pipefail
if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then exit 0; fi
if ! { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }; then
  echo "prometheus is not installed; the tests that need promtool will be skipped (install Debian's prometheus package)" >&2
  exit 0
fi

echo "installing prometheus (promtool) with apt-get (its service is not started)"
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus prometheus-node-exporter >/dev/null 2>&1 || true
fi
