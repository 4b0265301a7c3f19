"""Helpers shared by the plain-Django JSON endpoints (the hot paths skip DRF)."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from queueing.rules.errors import QueueError
from queueing.web.api_errors import ApiError, body_too_large, error_response

View = Callable[..., HttpResponse]


def json_api(*methods: str) -> Callable[[View], View]:
    """Allow only ``methods`` and render ApiError as ``{"error", "detail"}``."""

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in methods:
                response = error_response(
                    ApiError(405, "method_not_allowed", f"Use {' or '.join(methods)}.")
                )
                response["Allow"] = ", ".join(methods)
                return response
            try:
                return view(request, *args, **kwargs)
            except (ApiError, QueueError) as error:
                return error_response(error)

        return csrf_exempt(wrapper)

    return decorate


def json_body(request: HttpRequest) -> dict[str, Any]:
    try:
        raw = request.body
    except RequestDataTooBig as exc:
        raise body_too_large() from exc
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ApiError(400, "bad_request", "The request body is not valid JSON.") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "bad_request", "The request body must be a JSON object.")
    return body


def optional_str(body: dict[str, Any], name: str, *, max_length: int) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, "bad_request", f"{name} must be a string.")
    if len(value) > max_length or "\x00" in value:
        raise ApiError(400, "bad_request", f"{name} is too long or has invalid characters.")
    return value
