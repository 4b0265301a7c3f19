"""The edge's errors: the one place where the queue's refusals (``queueing/rules/errors.py``)
become the contract's status codes, and the handlers that render every error as
``{"error", "detail"}`` (Django views, DRF, and the lean ASGI paths through
``api_exception_response``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.exceptions import (
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.db import DataError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf_exceptions
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_default_handler

from events.validation import is_storable_text
from queueing.rules.errors import ErrorCode, QueueError

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """An expected failure with a stable error code from docs/api.md."""

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


# The contract's status for each of the queue's refusals (docs/api.md).
STATUS_FOR_CODE: dict[ErrorCode, int] = {
    ErrorCode.BAD_REQUEST: 400,
    ErrorCode.INVALID_ACCESS_CODE: 400,
    ErrorCode.INVALID_TICKET: 400,
    ErrorCode.POW_INVALID: 400,
    ErrorCode.POW_REQUIRED: 400,
    ErrorCode.QUEUE_ORDER_FIXED: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.EVENT_NOT_FOUND: 404,
    ErrorCode.TICKET_NOT_FOUND: 404,
    ErrorCode.REGISTRATION_NOT_FOUND: 404,
    ErrorCode.PLACE_MOVED: 410,
    ErrorCode.EVENT_ARCHIVED: 410,
    ErrorCode.CONFLICT: 409,
    ErrorCode.EVENT_CLOSED: 409,
    ErrorCode.EVENT_MAINTENANCE: 409,
    ErrorCode.EVENT_NOT_OPEN: 409,
    ErrorCode.EVENT_SOLD_OUT: 409,
    ErrorCode.LANES_FIXED: 409,
    ErrorCode.REENTRY_NOT_ALLOWED: 409,
    ErrorCode.QUEUE_FULL: 429,
    ErrorCode.RATE_LIMITED: 429,
}


def api_error(error: QueueError | ApiError) -> ApiError:
    """The API's answer to a refusal of the queue (an ApiError stays as it is)."""
    if isinstance(error, ApiError):
        return error
    headers = {} if error.retry_after is None else {"Retry-After": str(error.retry_after)}
    return ApiError(STATUS_FOR_CODE[error.code], error.code.value, error.detail, headers=headers)


def error_response(error: QueueError | ApiError) -> JsonResponse:
    error = api_error(error)
    response = JsonResponse(error.body(), status=error.status)
    for name, value in error.headers.items():
        response[name] = value
    return response


def body_too_large() -> ApiError:
    return ApiError(400, "bad_request", "The request body is too large.")


def query_too_many_fields() -> ApiError:
    return ApiError(400, "bad_request", "The query string has too many fields.")


def body_limit(path: str) -> int | None:
    """The most body the room reads for a request to ``path``: ``DATA_UPLOAD_MAX_MEMORY_SIZE``,
    and under /admin/ room for a logo upload besides (``WR_ADMIN_UPLOAD_BYTES``)."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if limit is not None and path.startswith("/admin/"):
        return limit + settings.WR_ADMIN_UPLOAD_BYTES
    return limit


def unreadable_request(
    *, query_string: str | bytes, content_length: str | bytes | None, path: str = "/api/"
) -> ApiError | None:
    """Why the room will not read a request, judged before anything reads it, or None
    (docs/api.md, "Conventions"); callers pass the query string for paths under /api/ only.
    Django would refuse the same request later, with a SuspiciousOperation raised wherever a
    view or DRF first touches ``request.GET`` or the body.

    The fields are counted as Django's QueryDict counts them (``&``-separated, empty ones
    too), against ``DATA_UPLOAD_MAX_NUMBER_FIELDS``; the declared length is compared with
    ``body_limit(path)``. A body sent without a length is measured as it arrives
    (queueing/web/request_limits.py)."""
    if isinstance(query_string, bytes):
        query_string = query_string.decode("latin-1")
    max_fields = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    if max_fields is not None and query_string and query_string.count("&") + 1 > max_fields:
        return query_too_many_fields()
    if isinstance(content_length, bytes):
        content_length = content_length.decode("latin-1")
    if content_length:
        text = content_length.strip()
        if not (text.isascii() and text.isdigit()):
            return ApiError(400, "bad_request", "The Content-Length header is not a length.")
        limit = body_limit(path)
        if limit is not None and int(text) > limit:
            return body_too_large()
    return None


def suspicious_request_error(exc: SuspiciousOperation) -> ApiError:
    """A request Django refused to read (too many fields, too large, ...): Django answers it
    400 on its pages; under /api/ it is ``400 bad_request``, never a 500."""
    if isinstance(exc, RequestDataTooBig):
        return body_too_large()
    if isinstance(exc, TooManyFieldsSent):
        return ApiError(400, "bad_request", "The request has too many fields.")
    if isinstance(exc, TooManyFilesSent):
        return ApiError(400, "bad_request", "The request has too many files.")
    return ApiError(400, "bad_request", "The request cannot be read.")


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
    if isinstance(exc, (ApiError, QueueError)):
        error = api_error(exc)
        return Response(error.body(), status=error.status, headers=error.headers)
    if isinstance(exc, Http404):
        return Response({"error": "not_found", "detail": "Not found."}, status=404)
    if isinstance(exc, SuspiciousOperation):
        # DRF reads query_params and the body lazily, inside the view: what Django refuses
        # to read surfaces here.
        logger.warning("unreadable request: %s", exc)
        error = suspicious_request_error(exc)
        return Response(error.body(), status=error.status)
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


class ErrorSerializer(serializers.Serializer):
    """The error shape, for the DRF views' schema annotations (documentation only)."""

    error = serializers.CharField()
    detail = serializers.CharField()
    fields = serializers.DictField(required=False)


def errors(*statuses: int) -> dict[int, type[ErrorSerializer]]:
    return dict.fromkeys(statuses, ErrorSerializer)


# -------------------------------------------------------- an exception's answer

# What Django and the room say for a status with nothing more precise to say.
GENERIC_ERRORS: dict[int, tuple[str, str]] = {
    400: ("bad_request", "Bad request."),
    401: ("unauthorized", "Authentication required."),
    403: ("forbidden", "Forbidden."),
    404: ("not_found", "No such resource."),
    405: ("method_not_allowed", "Method not allowed."),
    500: ("internal_error", "An unexpected error occurred."),
}


def exception_response(request: HttpRequest, exception: Exception) -> HttpResponse | None:
    """What the API answers for ``exception`` raised while serving ``request``: the contract's
    answer for a refusal anywhere, and under /api/ a JSON answer for anything else (None
    outside /api/: Django's own pages then)."""
    if isinstance(exception, (ApiError, QueueError)):
        return error_response(exception)
    if not request.path.startswith("/api/"):
        return None
    if isinstance(exception, SuspiciousOperation):
        # What Django refuses to read (too many fields, too large): 400 on its pages too.
        logger.warning("unreadable request on %r: %s", request.path, exception)
        return error_response(suspicious_request_error(exception))
    if isinstance(exception, DataError):
        # A value the database cannot hold (out of range, NUL...): the input, not us.
        logger.warning("unusable input on %s: %s", request.path, exception)
        return JsonResponse(
            {"error": "bad_request", "detail": "A value in the request is out of range."},
            status=400,
        )
    if isinstance(exception, (OperationalError, InterfaceError)):
        # PostgreSQL unreachable or the pool exhausted: nothing was acknowledged.
        logger.warning("database unavailable on %s: %s", request.path, exception)
        return unavailable_response()
    # A bug, but integrators still get JSON rather than an HTML page. The traceback is the
    # exception's own: a batch's joins are answered after their exceptions were caught.
    logger.error("unhandled error on %s", request.path, exc_info=exception)
    return internal_error_response()


def api_exception_response(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``exception_response`` for code that serves requests under /api/ outside the
    middleware (the lean join path's batches): every exception there has an answer."""
    response = exception_response(request, exception)
    assert response is not None, "every exception under /api/ has an answer"
    return response


def unavailable_response() -> JsonResponse:
    """``503 unavailable`` with ``Retry-After``: nothing was acknowledged, the client retries.
    For PostgreSQL unreachable or its pool exhausted, and for the lean join path's queue when
    it is full or a join waited in it past its deadline (queueing/web/hot_paths.py)."""
    response = JsonResponse(
        {"error": "unavailable", "detail": "The waiting room is briefly unavailable."},
        status=503,
    )
    response["Retry-After"] = str(settings.WR_UNAVAILABLE_RETRY_AFTER)
    return response


def internal_error_response() -> JsonResponse:
    """``500 internal_error``: a bug, told as JSON (never an HTML or plain-text page) and
    without its details; whoever catches it logs the traceback."""
    code, detail = GENERIC_ERRORS[500]
    return JsonResponse({"error": code, "detail": detail}, status=500)


# --------------------------------------- the plain-Django JSON endpoints (no DRF)

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
    """A string field of a JSON body, or None; refused when it is something else, too long,
    or text PostgreSQL cannot hold (NUL, a lone surrogate): such a value, stored or only
    looked up, would fail the query, a 500 where the input is to blame."""
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, "bad_request", f"{name} must be a string.")
    if len(value) > max_length or not is_storable_text(value):
        raise ApiError(400, "bad_request", f"{name} is too long or has invalid characters.")
    return value
