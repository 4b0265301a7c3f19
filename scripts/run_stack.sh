#!/usr/bin/env bash
# Web (gunicorn + uvicorn workers), Celery worker and two replicas of the room's scheduler (one
# leads, the other takes over within 3 s if it dies: queueing/scheduler.py); one Ctrl-C stops
# them all. `make run` runs it as the local demo. `--dry-run` prints the four command lines it
# would start and exits (tests read the bind from there).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin

# Loopback only unless told otherwise: with DEBUG on, any bad Host or unknown path gets
# Django's technical page (settings, URLconf), and the demo's staff login is admin/admin.
BIND="${BIND:-127.0.0.1:8000}"
# The same reading of DJANGO_DEBUG as config/settings.py (default on).
DEBUG=$("$BIN/python" -c 'from config.env import env_bool; print(int(env_bool("DJANGO_DEBUG", True)))') || exit 2
if [[ $DEBUG == 1 ]]; then
  if ! [[ $BIND =~ ^(127\.[0-9]+\.[0-9]+\.[0-9]+|localhost|\[::1\]):[0-9]+$ || $BIND == unix:* ]]; then
    echo "refusing BIND=$BIND with DEBUG on: the demo shows technical error pages and its" >&2
    echo "staff login is admin/admin. Bind to 127.0.0.1:<port>, or run the production" >&2
    echo "setup (README.md, Production) with DJANGO_DEBUG=0." >&2
    exit 2
  fi
  echo "DEMO MODE: DEBUG on, login admin/admin, do not expose"
fi

web=("$BIN/gunicorn" config.asgi:application
  -k config.workers.UvicornWorker -w "${WEB_CONCURRENCY:-4}"
  -b "$BIND" --graceful-timeout 5 --no-control-socket)
worker=("$BIN/celery" -A config --quiet worker -l info -c "${WORKER_CONCURRENCY:-2}" --without-gossip
  --without-mingle)
# Per bind address: a second room from this checkout (README, "A second room on one machine")
# keeps its own scheduler heartbeats and metrics files.
RUN_DIR=".run/${BIND//[^A-Za-z0-9._-]/_}"
scheduler_1=("$BIN/python" manage.py room_scheduler --heartbeat-file "$RUN_DIR/scheduler-1.heartbeat")
scheduler_2=("$BIN/python" manage.py room_scheduler --heartbeat-file "$RUN_DIR/scheduler-2.heartbeat")

if [[ ${1:-} == --dry-run ]]; then
  for command in web worker scheduler_1 scheduler_2; do
    declare -n line=$command
    printf '%q ' "${line[@]}"
    echo
  done
  exit 0
fi

mkdir -p "$RUN_DIR"
# Every gunicorn worker's request latencies reach /metrics through this directory.
export PROMETHEUS_MULTIPROC_DIR="$PWD/$RUN_DIR/prometheus"
rm -rf "$PROMETHEUS_MULTIPROC_DIR" && mkdir -p "$PROMETHEUS_MULTIPROC_DIR"

pids=()
stop() {
  trap - INT TERM EXIT
  echo "stopping..."
  kill -TERM "${pids[@]}" 2>/dev/null
  wait
}
trap stop INT TERM EXIT

"${web[@]}" &
pids+=($!)
"${worker[@]}" &
pids+=($!)
essential=("${pids[@]}")
"${scheduler_1[@]}" &
pids+=($!)
"${scheduler_2[@]}" &
pids+=($!)

if [[ $DEBUG == 1 ]]; then
  echo "waiting room demo on http://$BIND/ (staff: admin / admin). Ctrl-C stops it."
else
  echo "waiting room on http://$BIND/. Ctrl-C stops it."
fi
# If the web or the worker dies, stop the others rather than run half a room; a scheduler
# may die (the other one leads on).
wait -n "${essential[@]}"
