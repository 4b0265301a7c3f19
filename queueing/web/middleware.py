"""Keep every answer under /api/ in the ``{"error", "detail"}`` shape."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db import DataError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.test.signals import setting_changed

from queueing.rules.errors import QueueError
from queueing.web.api_errors import (
    ApiError,
    body_too_large,
    error_response,
    suspicious_request_error,
    unreadable_request,
)

logger = logging.getLogger(__name__)


_GENERIC_ERRORS: dict[int, tuple[str, str]] = {
    400: ("bad_request", "Bad request."),
    401: ("unauthorized", "Authentication required."),
    403: ("forbidden", "Forbidden."),
    404: ("not_found", "No such resource."),
    405: ("method_not_allowed", "Method not allowed."),
    500: ("internal_error", "An unexpected error occurred."),
}


class ContentSecurityPolicyMiddleware:
    """CSP on our own HTML pages (the admin keeps Django's defaults)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html") and not request.path.startswith(
            "/admin/"
        ):
            response.setdefault("Content-Security-Policy", settings.WR_CONTENT_SECURITY_POLICY)
        return response


def content_security_policy(*, form_targets: Iterable[str] = ()) -> str:
    """WR_CONTENT_SECURITY_POLICY, its ``form-action`` also allowing ``form_targets`` (source
    expressions): where a page's forms may end up, redirects included."""
    policy = settings.WR_CONTENT_SECURITY_POLICY
    extra = " ".join(form_targets)
    if not extra:
        return policy
    directives = [directive.strip() for directive in policy.split(";")]
    return "; ".join(
        f"{directive} {extra}" if directive.split(" ", 1)[0] == "form-action" else directive
        for directive in directives
    )


class ApiErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/") and (refusal := _unreadable(request)) is not None:
            # Before any view (or DRF, which reads the query and body lazily) touches it.
            logger.warning("refused to read %r: %s", request.path, refusal.detail)
            return error_response(refusal)
        response = self.get_response(request)
        if (
            response.status_code >= 400
            and request.path.startswith("/api/")
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            # Django's own error pages (unknown URL, DEBUG's technical 404, bad Host) are HTML.
            code, detail = _GENERIC_ERRORS.get(
                response.status_code, ("error", "The request could not be served.")
            )
            replacement = JsonResponse(
                {"error": code, "detail": detail}, status=response.status_code
            )
            for header in ("Allow", "Retry-After", "WWW-Authenticate"):
                if header in response:
                    replacement[header] = response[header]
            return replacement
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
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
        # A bug, but integrators still get JSON rather than an HTML page.
        logger.exception("unhandled error on %s", request.path)
        return internal_error_response()


def _unreadable(request: HttpRequest) -> ApiError | None:
    """Why the room will not read this request under /api/ (queueing/web/api_errors.py), or None.

    A body sent without a length (chunked) has been received whole by Django's ASGI handler
    by now, cut at the limit in front of it (queueing/web/request_limits.py). It is measured here
    and its length recorded, because DRF reads only bodies that declare one: otherwise a
    staff PATCH sent chunked would be taken for an empty one."""
    refusal = unreadable_request(
        query_string=request.META.get("QUERY_STRING", ""),
        content_length=request.META.get("CONTENT_LENGTH"),
    )
    if refusal is not None or request.META.get("CONTENT_LENGTH"):
        return refusal
    try:
        body = request.body
    except RequestDataTooBig:
        return body_too_large()
    if body:
        request.META["CONTENT_LENGTH"] = str(len(body))
    return None


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
    code, detail = _GENERIC_ERRORS[500]
    return JsonResponse({"error": code, "detail": detail}, status=500)


def api_exception_response(request: HttpRequest, exception: Exception) -> HttpResponse:
    """What the API answers for an exception raised while serving ``request`` (under /api/),
    for code that serves requests outside the middleware (the lean join path's batches)."""
    response = ApiErrorMiddleware(_unused_get_response).process_exception(request, exception)
    assert response is not None, "every exception under /api/ has an answer"
    return response


class _BareRequest(HttpRequest):
    def __init__(self, *, secure: bool) -> None:
        super().__init__()
        self._secure = secure

    def is_secure(self) -> bool:
        return self._secure


def _unused_get_response(request: HttpRequest) -> HttpResponse:
    raise AssertionError("only the middleware's process_response is asked")


@functools.cache
def hot_path_headers(*, secure: bool) -> tuple[tuple[bytes, bytes], ...]:
    """The headers Django's security middleware adds to a JSON answer, for the lean ASGI
    paths that answer without passing through the middleware (queueing/web/hot_paths.py).

    Asked of the middleware itself (once per process), so the two cannot drift apart. The
    locale middleware's ``Content-Language`` is left out: these answers are not translated.
    """
    response = HttpResponse(content_type="application/json")
    request = _BareRequest(secure=secure)
    for middleware in (SecurityMiddleware, XFrameOptionsMiddleware):
        response = middleware(_unused_get_response).process_response(request, response)
    return tuple(
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in response.items()
        if name.lower() != "content-type"
    )


def _forget_hot_path_headers(**kwargs: object) -> None:
    hot_path_headers.cache_clear()


setting_changed.connect(_forget_hot_path_headers)
