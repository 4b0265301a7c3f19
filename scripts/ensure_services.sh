#!/usr/bin/env bash
# Make sure PostgreSQL and Redis run locally and the database exists, and RabbitMQ when
# CELERY_BROKER_URL is amqp://. Idempotent.
set -euo pipefail

# The database the room will use: DATABASE_URL's when it is set, read by the same parser as
# config/settings.py (config/env.py; the Makefile makes .venv first), so a second room with
# its own DATABASE_URL gets its own database here, not the first's, and a bad URL stops here.
if [ -n "${DATABASE_URL:-}" ]; then
  ROOT="$(cd "$(dirname "$0")/.." && pwd)"
  # Assigned first: a failure inside "eval $(...)" would go unnoticed.
  database=$(PYTHONPATH="$ROOT" "$ROOT/.venv/bin/python" - <<'PY'
import os, shlex
from config.env import database_from_url
db = database_from_url(os.environ["DATABASE_URL"])
for name, key in (("PGHOST", "HOST"), ("PGPORT", "PORT"), ("PGUSER", "USER"),
                  ("PGPASSWORD", "PASSWORD"), ("DB_NAME", "NAME")):
    if db[key]:
        print(f"export {name}={shlex.quote(str(db[key]))}")
PY
)
  eval "$database"
fi
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
DB_NAME=${DB_NAME:-waitingroom}
REDIS_HOST=${REDIS_HOST:-127.0.0.1}
REDIS_PORT=${REDIS_PORT:-6379}

need() { command -v "$1" >/dev/null 2>&1; }

install_packages() {
  if [ "$(id -u)" = 0 ] && need apt-get; then
    echo "installing $* with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    echo "please install: $*" >&2
    exit 1
  fi
}

wait_for() {  # wait_for <what> <command...>
  local what=$1; shift
  for _ in $(seq 1 50); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "$what did not come up" >&2
  exit 1
}

# PostgreSQL
need pg_isready || install_packages postgresql postgresql-client
if ! pg_isready -q -h "$PGHOST" -p "$PGPORT"; then
  echo "starting PostgreSQL"
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
  wait_for PostgreSQL pg_isready -q -h "$PGHOST" -p "$PGPORT"
fi
if ! psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'" | grep -q 1; then
  echo "creating database $DB_NAME"
  createdb -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" "$DB_NAME"
fi

# Redis (no eviction: losing a fan's place silently is worse than refusing a write)
need redis-server || install_packages redis-server
if ! redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" \
    --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log \
    --maxmemory-policy noeviction
  wait_for Redis redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping
fi
policy=$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" config get maxmemory-policy | tail -n 1)
if [ "$policy" != "noeviction" ]; then
  echo "setting Redis maxmemory-policy to noeviction (was $policy)"
  redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" config set maxmemory-policy noeviction >/dev/null
fi

# The Celery broker, when it is RabbitMQ (production's); otherwise it is the Redis above.
case ${CELERY_BROKER_URL:-} in
  amqp://*|amqps://*|pyamqp://*) "$(dirname "$0")/ensure_rabbitmq.sh" "$CELERY_BROKER_URL" ;;
esac
