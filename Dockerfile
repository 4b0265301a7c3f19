# One image for every process of the room (docker-compose.yml picks the command): web, worker,
# beat, migrate, and nginx in front. Bookworm's nginx is the one the tests run
# (tests/test_edge_nginx.py), and it serves the static files collected here.
FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 DJANGO_SETTINGS_MODULE=config.settings
RUN apt-get update \
    && apt-get install -y --no-install-recommends nginx \
    && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/default
WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY . .
RUN DJANGO_DEBUG=1 python manage.py collectstatic --noinput -v0
EXPOSE 8000
CMD ["gunicorn", "config.asgi:application", "-k", "config.workers.UvicornWorker", "-w", "4", "-b", "0.0.0.0:8000", "--graceful-timeout", "10", "--no-control-socket"]
