"""Keep every answer under /api/ in the ``{"error", "detail"}`` shape (the mapping itself is
api_errors.py's), refuse a NUL in a page's query string or form, set the pages'
Content-Security-Policy, keep the fans' pages out of caches, and hand the lean paths the
security headers Django's middleware would have added."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable

from django.conf import settings
from django.core.exceptions import BadRequest, RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.test.signals import setting_changed
from django.utils.cache import patch_vary_headers

from queueing.web.api_errors import (
    GENERIC_ERRORS,
    ApiError,
    body_too_large,
    error_response,
    exception_response,
    unreadable_request,
)
from queueing.web.edge_figures import REFUSED_STATUSES, refusal_counted

logger = logging.getLogger(__name__)


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


View = Callable[..., HttpResponse]


def kept_out_of_caches(view: View) -> View:
    """For the views whose answers carry a ticket or a pass (a page showing a place, its
    cookie being set, the redirect to the shop with ``wr_pass``, a place link) or depend on
    the browser's cookies (the same URL shows one fan's place and another's join form):
    ``Cache-Control: private, no-store`` and ``Vary: Cookie``. A cache, shared or the
    browser's, that kept one could hand a place or a pass to someone else, or show it again
    after the fan left that browser."""

    @functools.wraps(view)
    def kept_out(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response["Cache-Control"] = "private, no-store"
        patch_vary_headers(response, ("Cookie",))
        return response

    return kept_out


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
            code, detail = GENERIC_ERRORS.get(
                response.status_code, ("error", "The request could not be served.")
            )
            replacement = JsonResponse(
                {"error": code, "detail": detail}, status=response.status_code
            )
            for header in ("Allow", "Retry-After", "WWW-Authenticate"):
                if header in response:
                    replacement[header] = response[header]
            response = replacement
        if response.status_code in REFUSED_STATUSES:
            refusal_counted(
                response.status_code,
                b"" if response.streaming else response.content,
                response.get("Content-Type", ""),
            )
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return exception_response(request, exception)


# A NUL as a query string spells it: "%00" decodes to it, and only it does ("+" is a space;
# a lone surrogate cannot come out of Django's UTF-8 decoding of a query or a form).
_NUL_ESCAPE = "%00"
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")
_JUDGED_BY_THEIR_VIEWS = ("/api/", "/gate/")


class NulInputMiddleware:
    """Refuse (400, Django's page) a request for a page whose query string or form fields
    hold a NUL character: PostgreSQL can neither store nor compare text with one (a search,
    a look-up, a value kept), and no browser sends one. Refused here once, before any view
    reads the query or the form, rather than in each view that might hand such a value to a
    query: the pages read their fields without Django forms, and a page added later is
    covered too.

    Not under /api/: there each view judges its input itself and says which field is wrong
    (the audit API's filters: ``validation_error``; the fans' string fields:
    ``api_errors.optional_str``, and a ``return`` link with one is dropped like any link that
    is not one), and a value one of them lets through is still ``400 bad_request`` as a
    DataError (``api_errors.exception_response``). Nor under /gate/: the gate reads no query,
    and a web server knows only its 204 and 401."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(_JUDGED_BY_THEIR_VIEWS) and _holds_nul(request):
            logger.warning("refused a NUL on %r", request.path)
            # Django's 400 page (config/error_views.py).
            raise BadRequest("The query string or a form field holds a NUL character.")
        return self.get_response(request)


def _holds_nul(request: HttpRequest) -> bool:
    query = request.META.get("QUERY_STRING", "")
    if _NUL_ESCAPE in query or "\x00" in query:
        return True
    if request.method != "POST" or request.content_type not in _FORMS:
        return False
    # Parsed as the view (or CSRF's check) would parse it; uploaded files are not text.
    return any(
        "\x00" in name or any("\x00" in value for value in values)
        for name, values in request.POST.lists()
    )


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
