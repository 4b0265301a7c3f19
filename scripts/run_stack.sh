#!/usr/bin/env bash
# Web (gunicorn + uvicorn workers), Celery worker and beat; one Ctrl-C stops them all.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
mkdir -p .run
# Every gunicorn worker's request latencies reach /metrics through this directory.
export PROMETHEUS_MULTIPROC_DIR="$PWD/.run/prometheus"
rm -rf "$PROMETHEUS_MULTIPROC_DIR" && mkdir -p "$PROMETHEUS_MULTIPROC_DIR"

pids=()
stop() {
  trap - INT TERM EXIT
  echo "stopping..."
  kill -TERM "${pids[@]}" 2>/dev/null
  wait
}
trap stop INT TERM EXIT

"$BIN/gunicorn" config.asgi:application \
  -k config.workers.UvicornWorker -w "${WEB_CONCURRENCY:-4}" \
  -b "${BIND:-127.0.0.1:8000}" --graceful-timeout 5 --no-control-socket &
pids+=($!)
"$BIN/celery" -A config worker -l info -c "${WORKER_CONCURRENCY:-2}" --without-gossip &
pids+=($!)
"$BIN/celery" -A config beat -l info -s .run/celerybeat-schedule &
pids+=($!)

echo "waiting room on http://${BIND:-127.0.0.1:8000}/ (admin: admin / admin). Ctrl-C stops it."
# If any of the three dies, stop the others rather than run half a room.
wait -n
