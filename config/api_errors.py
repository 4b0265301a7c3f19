"""One error type for the API and the handlers that render it as ``{"error", "detail"}``."""

from __future__ import annotations

import logging
from typing import Any

from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_default_handler

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """An expected failure with a stable error code from API.md."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "detail": self.detail, **self.extra}


def error_response(error: ApiError) -> JsonResponse:
    response = JsonResponse(error.body(), status=error.status)
    for name, value in error.headers.items():
        response[name] = value
    return response


_DRF_CODES: dict[type[Exception], str] = {
    drf_exceptions.NotAuthenticated: "unauthorized",
    drf_exceptions.AuthenticationFailed: "unauthorized",
    drf_exceptions.PermissionDenied: "forbidden",
    drf_exceptions.NotFound: "not_found",
    drf_exceptions.MethodNotAllowed: "method_not_allowed",
    drf_exceptions.NotAcceptable: "not_acceptable",
    drf_exceptions.UnsupportedMediaType: "unsupported_media_type",
    drf_exceptions.ParseError: "bad_request",
    drf_exceptions.Throttled: "rate_limited",
}


def _flatten(detail: Any) -> str:
    if isinstance(detail, list):
        return " ".join(_flatten(item) for item in detail)
    if isinstance(detail, dict):
        return " ".join(f"{key}: {_flatten(value)}" for key, value in detail.items())
    return str(detail)


def drf_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApiError):
        return Response(exc.body(), status=exc.status, headers=exc.headers)
    if isinstance(exc, Http404):
        return Response({"error": "not_found", "detail": "Not found."}, status=404)
    response = drf_default_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, drf_exceptions.ValidationError):
        response.data = {
            "error": "validation_error",
            "detail": "The request has invalid fields.",
            "fields": exc.detail,
        }
        return response
    code = next((c for kind, c in _DRF_CODES.items() if isinstance(exc, kind)), "error")
    detail = getattr(exc, "detail", str(exc))
    response.data = {"error": code, "detail": _flatten(detail)}
    return response
