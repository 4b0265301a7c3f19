"""How every process logs: one JSON object a line (``LOG_FORMAT=json``), or plain text for a
developer's terminal (``LOG_FORMAT=plain``).

The JSON lines are python-json-logger's: ``time``, ``level``, ``logger``, ``message``, the
``request_id`` of the request (or of the request that sent the task) when there is one
(queueing/web/request_ids.py), and whatever the call gave in ``extra=``. Read without Django's
settings, so that gunicorn's master (gunicorn.conf.py) logs the same way as its workers.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from config.env import env_bool, env_choice, env_str
from queueing.web.request_ids import current_request_id

FORMATS = ("json", "plain")


class RequestIdFilter(logging.Filter):
    """Gives each record the request id of the context that logs it (None outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current_request_id.get()
        return True


class PlainLines(logging.Formatter):
    """Plain text, the request id in brackets (``-`` outside a request)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None) or "-"
        return f"{record.asctime} {record.levelname} {record.name} [{request_id}] {record.message}"


class JsonLines(JsonFormatter):
    """python-json-logger's formatter under the room's field names; ``request_id`` only when
    there is one (a beat's line has none: no ``null`` to filter out downstream)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            **kwargs,
        )

    def add_fields(
        self, log_record: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_record, record, message_dict)
        if log_record.get("request_id") is None:
            log_record.pop("request_id", None)

    # ISO 8601 in UTC with milliseconds: what log stores parse without a pattern.
    converter = time.gmtime
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """The ``LOGGING`` dictionary (logging.config.dictConfig) for ``log_format``."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": RequestIdFilter}},
        "formatters": {
            "json": {"()": JsonLines},
            "plain": {"()": PlainLines},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["request_id"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
            # gunicorn's and uvicorn's own lines go through the same handler, not theirs.
            "gunicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
            # No line per request: nginx's access log is the room's (a line per status poll
            # would cost the lean paths more than their answer). uvicorn's worker takes this
            # logger's handlers for its access log, and logs none when it has none.
            "gunicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }


def logging_from_env() -> dict[str, Any]:
    """``LOGGING`` as the environment asks (``LOG_FORMAT``, ``LOG_LEVEL``): JSON unless
    ``DJANGO_DEBUG`` is on, where a person reads the terminal. Read by the settings and by
    gunicorn's master (gunicorn.conf.py), which loads no Django."""
    debug = env_bool("DJANGO_DEBUG", True)
    return logging_config(
        log_format=env_choice("LOG_FORMAT", "plain" if debug else "json", FORMATS),
        level=env_str("LOG_LEVEL", "INFO"),
    )
