#!/usr/bin/env bash
# Rehearse a restore (docs/operations.md, "Backups and restores"): restore a pg_dump -Fc file
# into a new, empty database, do to it what the runbook does before the room starts
# (restore_skip_ids), check it (migrate --check, restore_check), and drop it again.
#
#   scripts/restore_drill.sh DUMP_FILE SCRATCH_DATABASE_URL [--keep]
#
# SCRATCH_DATABASE_URL names a database that must not exist yet, on a server where its user
# may create databases (postgres://user:password@host:5432/wr_drill); its query string
# (?sslmode=require) is kept. --keep leaves the restored database in place (to start a room on
# it, as tests/test_backup_restore.py does); otherwise it is dropped, whatever happened.
# The room's own settings (DJANGO_SECRET_KEY, the pass-key encryption key, ...) come from the
# environment, as for the room itself: a drill without them fails the key check, as the real
# restore would. Exit status: 0 the restore is fit to serve, 1 not, 2 bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 2 || $# -gt 3 || ( $# -eq 3 && $3 != --keep ) ]]; then
  echo "usage: scripts/restore_drill.sh DUMP_FILE SCRATCH_DATABASE_URL [--keep]" >&2
  exit 2
fi
dump=$1 url=$2 keep=${3:-}
[[ -r $dump ]] || { echo "cannot read $dump" >&2; exit 2; }
PYTHON=${PYTHON:-$([[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python3)}

tail=${url##*/}
name=${tail%%\?*}
query=${tail#"$name"}
admin="${url%/*}/postgres$query"
[[ $name =~ ^[A-Za-z0-9_]+$ ]] || { echo "a plain database name, please: $name" >&2; exit 2; }

drop() {
  psql "$admin" -q -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)"
}
psql "$admin" -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$name\""
[[ $keep == --keep ]] || trap drop EXIT

started=$SECONDS
# Owners and grants are the source server's; a drill may run where those roles do not exist.
pg_restore --no-owner --no-privileges --exit-on-error --dbname "$url" "$dump"
echo "restored $dump into $name in $((SECONDS - started)) s"

export DATABASE_URL=$url
# No system checks: they would judge this environment's Redis prefix, which belongs to the
# room the dump came from, not to the scratch database (queueing.E002).
if ! "$PYTHON" manage.py migrate --check --skip-checks >/dev/null; then
  echo "the dump's schema is not this release's: run manage.py migrate before the room" >&2
  exit 1
fi
"$PYTHON" manage.py restore_skip_ids --skip-checks
"$PYTHON" manage.py restore_check --skip-checks || exit 1
