#!/usr/bin/env bash
# The browser tests drive Debian's Chromium (Playwright cannot download browsers here), and
# take screenshots in Japanese too, which needs a Japanese font (Arabic's comes with DejaVu).
set -euo pipefail
if [ -x /usr/bin/chromium ] && { ! command -v fc-list >/dev/null 2>&1 || [ -n "$(fc-list :lang=ja)" ]; }; then
  exit 0
fi
if [ -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing a Japanese font with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-ipafont-gothic >/dev/null
  exit 0
fi
if [ -x /usr/bin/chromium ]; then
  echo "no Japanese font: Japanese screenshots will show boxes (Debian: fonts-ipafont-gothic)" >&2
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing chromium with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
    fonts-ipafont-gothic >/dev/null
else
  echo "please install Debian's chromium package (the browser tests need /usr/bin/chromium)" >&2
  exit 1
fi
