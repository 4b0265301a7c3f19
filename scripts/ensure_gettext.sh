#!/usr/bin/env bash
# GNU gettext: msgfmt compiles the catalogs (make test), xgettext and msgmerge find and merge
# new strings (make messages), and tests/test_translations.py runs both. Idempotent.
set -euo pipefail
if command -v msgfmt >/dev/null 2>&1 && command -v xgettext >/dev/null 2>&1 \
  && command -v msgmerge >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing gettext with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gettext >/dev/null
else
  echo "please install GNU gettext (Debian: apt-get install gettext)" >&2
  exit 1
fi
