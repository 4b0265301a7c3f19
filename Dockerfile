# One image for web, worker and beat (docker-compose.yml picks the command).
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 DJANGO_SETTINGS_MODULE=config.settings
WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY . .
RUN DJANGO_DEBUG=1 python manage.py collectstatic --noinput -v0
EXPOSE 8000
CMD ["gunicorn", "config.asgi:application", "-k", "config.workers.UvicornWorker", "-w", "4", "-b", "0.0.0.0:8000"]
