"""The log lines' two shapes: one JSON object a line, or plain text, each with the request
id when there is one."""

from __future__ import annotations

import io
import json
import logging
import logging.config

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.logs import logging_config, logging_from_env
from queueing.web.request_ids import current_request_id


def _logged(log_format: str, *, request_id: str | None, **extra: object) -> str:
    config = logging_config(log_format=log_format, level="INFO")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        logging.config.DictConfigurator(config).configure_custom(
            dict(config["formatters"][log_format])
        )
    )
    handler.addFilter(
        logging.config.DictConfigurator(config).configure_custom(
            dict(config["filters"]["request_id"])
        )
    )
    logger = logging.getLogger("tests.logs")
    logger.addHandler(handler)
    logger.propagate = False
    token = current_request_id.set(request_id)
    try:
        logger.warning("login_lockout %s", "ann", extra=extra)
    finally:
        current_request_id.reset(token)
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_json_line_has_the_fields_the_extras_and_the_request_id() -> None:
    line = json.loads(_logged("json", request_id="abcdef0123456789", scope="account", failures=5))
    assert line["level"] == "WARNING" and line["logger"] == "tests.logs"
    assert line["message"] == "login_lockout ann"
    assert line["request_id"] == "abcdef0123456789"
    assert (line["scope"], line["failures"]) == ("account", 5)
    assert line["time"].endswith("Z") and "T" in line["time"]


def test_a_json_line_outside_a_request_has_no_request_id() -> None:
    assert "request_id" not in json.loads(_logged("json", request_id=None))


def test_a_value_that_would_break_the_line_is_escaped() -> None:
    text = _logged("json", request_id=None, username='ann"\n{"forged": 1}')
    assert text.count("\n") == 1
    assert json.loads(text)["username"] == 'ann"\n{"forged": 1}'


def test_a_plain_line_shows_the_request_id_or_a_dash() -> None:
    assert "WARNING tests.logs [abcdef0123456789] login_lockout ann" in _logged(
        "plain", request_id="abcdef0123456789"
    )
    assert "WARNING tests.logs [-] login_lockout ann" in _logged("plain", request_id=None)


def test_json_unless_debug_and_a_wrong_format_is_refused(monkeypatch) -> None:
    monkeypatch.delenv("LOG_FORMAT", raising=False)
    monkeypatch.setenv("DJANGO_DEBUG", "0")
    assert logging_from_env()["handlers"]["console"]["formatter"] == "json"
    monkeypatch.setenv("DJANGO_DEBUG", "1")
    assert logging_from_env()["handlers"]["console"]["formatter"] == "plain"
    monkeypatch.setenv("LOG_FORMAT", "JSON")
    assert logging_from_env()["handlers"]["console"]["formatter"] == "json"
    monkeypatch.setenv("LOG_FORMAT", "xml")
    with pytest.raises(ImproperlyConfigured, match="LOG_FORMAT"):
        logging_from_env()
