# One image for every process of the room (docker-compose.yml picks the command): web, worker,
# beat, migrate, and nginx in front. It holds the production packages only
# (requirements/prod.txt, every version and hash locked) and the room's code without its tests,
# benchmarks or rehearsal (.dockerignore), and runs as an unprivileged user, nginx included.
# tests/test_deploy.py holds it to that. Bookworm's nginx is the one the tests run
# (tests/test_edge_nginx.py), and it serves the static files collected here.

# The packages, each checked against its locked hash, into a virtualenv of their own; only
# that virtualenv goes on to the image (no pip cache, no build tools). Wheels only: nothing
# is compiled from source at build time.
FROM python:3.11.14-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
COPY requirements/prod.txt /tmp/prod.txt
RUN /opt/venv/bin/pip install --require-hashes --only-binary=:all: --no-deps -r /tmp/prod.txt

FROM python:3.11.14-slim-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends nginx \
    && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/default
# A fixed uid and gid, so that volumes, TLS keys and Kubernetes' runAsUser can name them.
RUN groupadd --system --gid 10001 room \
    && useradd --system --uid 10001 --gid room --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin room
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=config.settings
COPY --from=builder /opt/venv /opt/venv
WORKDIR /app
# Owned by root and read-only to the room: a process of the room cannot rewrite its own code.
COPY . .
# Production's static files: each also under its content's hash, with the manifest the pages
# name them by (DEBUG off). The keys only let the settings load; they are not kept (the
# encryption key is 32 zero bytes). And the code compiled now, since the room may not write
# beside it: no process compiles it at each start. The archives' directory belongs to the
# room's user, so that a volume mounted there starts writable (docker-compose.yml).
RUN DJANGO_DEBUG=0 DJANGO_SECRET_KEY=collectstatic-only-not-a-secret-0123456789abcdefghij \
    WR_PASS_KEY_ENCRYPTION_KEY=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= \
    python manage.py collectstatic --noinput -v0 \
    && python -m compileall -q config dashboard events queueing staff \
    && mkdir -p /var/lib/waitingroom/archives && chown 10001:10001 /var/lib/waitingroom/archives
USER 10001:10001
# web (gunicorn), nginx's plain HTTP and TLS: unprivileged ports, published as 80 and 443.
EXPOSE 8000 8080 8443
CMD ["gunicorn", "config.asgi:application", "-k", "config.workers.UvicornWorker", "-w", "4", "-b", "0.0.0.0:8000", "--graceful-timeout", "10", "--no-control-socket"]
