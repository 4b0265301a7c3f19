"""gunicorn's settings file, read from the working directory (the repository's root, the
image's /app) by every gunicorn the room runs: the master's own lines and uvicorn's are logged
as the application's are (config/logs.py: JSON unless LOG_FORMAT says plain)."""

from config.logs import logging_from_env

logconfig_dict = logging_from_env()
