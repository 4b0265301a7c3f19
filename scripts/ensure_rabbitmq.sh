#!/usr/bin/env bash
# Make sure the RabbitMQ of an amqp:// broker URL answers. Idempotent.
#   scripts/ensure_rabbitmq.sh [URL]   (default: $WR_TEST_AMQP_URL, else the local guest one)
# A broker on this machine is started if it is installed and not running (installed with
# apt-get first if missing); a broker elsewhere is someone else's to run, and is left alone.
set -euo pipefail

URL=${1:-${WR_TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672//}}

# scheme://[user[:password]@]host[:port][/vhost]; the password is never printed.
if ! [[ $URL =~ ^(py)?amqps?://([^@/]*@)?(\[[^]]+\]|[^:/?]+)(:([0-9]+))? ]]; then
  echo "not an amqp:// URL: ${URL%%://*}://..." >&2
  exit 2
fi
HOST=${BASH_REMATCH[3]}
PORT=${BASH_REMATCH[5]:-5672}

answers() { timeout 2 bash -c "exec 3<>/dev/tcp/${HOST//[\[\]]/}/$PORT" 2>/dev/null; }

if answers; then exit 0; fi
case $HOST in
  127.*|localhost|\[::1\]) ;;
  *)
    echo "RabbitMQ at $HOST:$PORT does not answer; it is not on this machine, so not started here" >&2
    exit 0
    ;;
esac

if ! command -v rabbitmq-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing rabbitmq-server with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null
  else
    echo "please install rabbitmq-server (the broker at $HOST:$PORT)" >&2
    exit 1
  fi
fi

echo "starting RabbitMQ"
if command -v service >/dev/null 2>&1; then
  service rabbitmq-server start >/dev/null
else
  /etc/init.d/rabbitmq-server start >/dev/null
fi
# RabbitMQ opens its port only once it has booted: allow it half a minute.
for _ in $(seq 1 60); do
  if answers; then exit 0; fi
  sleep 0.5
done
echo "RabbitMQ did not come up on $HOST:$PORT" >&2
exit 1
