"""The Queue-it surface (docs/queueit.md; docs/api.md, "Queue-it connectors"): the URLs a
shop's unmodified Queue-it connector sends fans to, served at the room's root and again
under ``/queueit/``.

- ``GET /?c=&e=&t=…``: the queue URL. The fan is placed in the on-sale the pair (c, e)
  names, exactly as the waiting page's join places them, and shown the waiting page; once
  admitted they are sent to ``t`` (if the on-sale allows its host) with a ``queueittoken``
  the connector accepts, instead of a ``wr_pass``.
- ``GET /error/<code>/…``: the connector refused a token. ``timestamp``, ``ip`` and
  ``connector/sessionstate`` are the queue URL again (an admitted fan gets a fresh token);
  any other code (``hash``, ``eventid``…) means the shop's key or event id differs from the
  room's, so a page says so and no token is minted (one would loop the fan forever).
- ``GET /cancel/multiple/<c>?wrl=<e>~<q>…&r=`` and ``GET /cancel/<c>/<e>[/<q>]?…&r=``: the
  connector's cancel action ends those sessions as completed, then sends the fan to ``r``.
- ``GET /status/integrationconfig/[secure/]<c>`` with the secret key as ``api-key``: the
  integration config of the customer's on-sales (queueing/rules/queueit_config.py).

The page a Queue-it fan sees is the waiting page itself; it sends an admitted fan back
here (``handoverUrl`` in its config; without JavaScript its refresh reloads this URL), and
this URL answers the redirect with the token.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlencode

from django.conf import settings
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    JsonResponse,
    QueryDict,
)
from django.shortcuts import render
from django.urls import URLPattern, path, re_path
from django.utils import timezone, translation
from django.views.decorators.http import require_safe

from events.models import Event
from events.traffic_rules import parse_traffic_rules
from queueing.line.queueit import (
    entry_public_id,
    handover_token,
    queueit_customer_on_sales,
    queueit_event,
    session_cancel,
)
from queueing.rules.errors import QueueError
from queueing.rules.gate import admitted_destination, destination_sources, return_url_clean
from queueing.rules.queueit_config import QueueitOnSale, integration_config
from queueing.rules.queueit_token import CancelPair, cancel_pair, cancel_pairs, with_token
from queueing.rules.states import EntryStatus
from queueing.rules.ticket_codec import ticket_read
from queueing.web.middleware import content_security_policy, kept_out_of_caches
from queueing.web.pages import (
    PlaceMovedAway,
    join_needs_form,
    moved_page,
    page_base_context,
    page_cookie_read,
    page_join,
    page_view,
    ticket_page,
)

logger = logging.getLogger(__name__)

# Error codes after which the fan is simply queued again (their place kept, a fresh token
# if admitted): the token was late, or bound to another address.
REISSUED_ERRORS = frozenset({"timestamp", "ip", "connector/sessionstate"})
# The queue URL's parameters the room keeps in the URL that shows the place; the rest
# (ver, cver, man, kupver, l, icr, enqueuetoken, the error URL's token and ts) are ignored.
KEPT_PARAMETERS = ("c", "e", "t", "cid")
# Ended places a queue URL does not show again: the fan queues anew (a new ticket, so a
# new ``q_``), as Queue-it does after a cancel. A revoked place stays shown as ended.
QUEUE_AGAIN = (
    EntryStatus.COMPLETED,
    EntryStatus.LEFT,
    EntryStatus.EXPIRED,
    EntryStatus.ABANDONED,
)


def _named_event(query: QueryDict) -> Event:
    event = queueit_event(query.get("c", ""), query.get("e", ""))
    if event is None:
        raise Http404("No on-sale has this Queue-it customer id and event id")
    return event


def _base(request: HttpRequest) -> str:
    """Where this surface sits: the root, or ``/queueit/`` for shops whose queue domain
    carries that path (or whose connector sets ``queuePathPrefix``)."""
    return "/queueit/" if request.path.startswith("/queueit") else "/"


def _place_url(request: HttpRequest) -> str:
    """The queue URL that shows this fan's place and hands over their token."""
    kept = [(name, request.GET[name]) for name in KEPT_PARAMETERS if request.GET.get(name)]
    return f"{_base(request)}?{urlencode(kept)}"


def _return_url(request: HttpRequest, event: Event) -> str:
    """``t`` where the on-sale allows its host (as for any return URL), else its target
    URL: never an open redirect."""
    return admitted_destination(
        return_url=return_url_clean(request.GET.get("t")),
        target_url=event.target_url,
        allowed_hosts=event.allowed_return_hosts,
    )


def _language(request: HttpRequest) -> str | None:
    """``cid`` (the shop's culture, "de-DE") picks the page's language, unless the fan
    chose one in the room (its language cookie)."""
    if request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME):
        return None
    culture = request.GET.get("cid", "")[:16].replace("_", "-").lower()
    if not culture:
        return None
    try:
        return translation.get_supported_language_variant(culture)
    except LookupError:
        return None


def _with_security_headers(response: HttpResponse, event: Event) -> HttpResponse:
    # As the waiting page: its forms may end on the shop after redirects.
    response["Content-Security-Policy"] = content_security_policy(
        form_targets=destination_sources(
            target_url=event.target_url, allowed_hosts=event.allowed_return_hosts
        )
    )
    return response


@kept_out_of_caches
@require_safe
def enqueue(request: HttpRequest) -> HttpResponse:
    event = _named_event(request.GET)
    return _with_security_headers(_in_language(request, lambda: _queue_page(request, event)), event)


def _in_language(request: HttpRequest, page: Callable[[], HttpResponse]) -> HttpResponse:
    """``page`` in the shop's culture (``cid``) unless the fan chose a language."""
    language = _language(request)
    if language is None:
        return page()
    with translation.override(language):
        response = page()
        response["Content-Language"] = language
    return response


def _queue_page(request: HttpRequest, event: Event) -> HttpResponse:
    now = timezone.now()
    return_url = _return_url(request, event)
    place_url = _place_url(request)
    try:
        page_ticket, view, facts = page_view(request, event, now)
    except PlaceMovedAway:
        return moved_page(request, event, now)
    if view is None or page_ticket is None or view.status in QUEUE_AGAIN:
        if request.method == "HEAD":
            return HttpResponse()  # link checkers and previews take no place
        if join_needs_form(event):
            # A code field or a puzzle: the waiting page's form, which keeps the return
            # URL; the fan it admits arrives with wr_pass, the connector sends them back
            # here, and the place this browser holds hands over the token.
            return HttpResponseRedirect(
                f"/e/{event.slug}/?" + urlencode({"return": return_url}, safe="")
            )
        # Each load of the queue URL answers with the place (the join is the browser's
        # identity's, so a repeated GET never makes a second place).
        return page_join(request, event, now=now, return_url=return_url, page_url=place_url)
    if view.status == EntryStatus.ADMITTED:
        token = _token_for(event, view.ticket, now)
        if token is not None:
            return HttpResponseRedirect(with_token(return_url, token))
    return ticket_page(request, event, page_ticket, view, now, facts=facts, handover_url=place_url)


def _token_for(event: Event, ticket: str, now: datetime) -> str | None:
    try:
        entry_id = ticket_read(ticket).entry_id
    except QueueError:
        return None
    return handover_token(event=event, entry_id=entry_id, now=now)


@kept_out_of_caches
@require_safe
def error(request: HttpRequest, code: str) -> HttpResponse:
    event = _named_event(request.GET)
    if code in REISSUED_ERRORS:
        return enqueue(request)
    # The shop's connector computed another hash or expects another event id: its secret
    # key or event id is not the room's. Say so, and hand over nothing.
    logger.warning(
        "queueit connector refused the room's token",
        extra={"event": event.slug, "code": code[:32]},
    )

    def page() -> HttpResponse:
        context = {**page_base_context(event, timezone.now()), "code": code[:32]}
        return render(request, "queueing/queueit_refused.html", context, status=403)

    return _with_security_headers(_in_language(request, page), event)


@kept_out_of_caches
@require_safe
def cancel_multiple(request: HttpRequest, customer: str) -> HttpResponse:
    return _cancel(request, customer, cancel_pairs(request.GET.get("wrl", "")))


@kept_out_of_caches
@require_safe
def cancel_one(
    request: HttpRequest, customer: str, event_id: str, queue_id: str | None = None
) -> HttpResponse:
    pair = cancel_pair(event_id, queue_id or "")
    return _cancel(request, customer, [pair] if pair is not None else [])


def _cancel(request: HttpRequest, customer: str, pairs: list[CancelPair]) -> HttpResponse:
    now = timezone.now()
    events: list[Event] = []
    for pair in pairs:
        event = queueit_event(customer, pair.event_id)
        if event is None:
            continue
        events.append(event)
        queue_id = pair.queue_id or _browser_queue_id(request, event)
        if queue_id is not None:
            session_cancel(event=event, queue_id=queue_id, now=now)
    if not events:
        raise Http404("No on-sale has this Queue-it customer id and event id")
    wanted = return_url_clean(request.GET.get("r"))
    for event in events:
        if wanted and _return_allowed(wanted, event):
            return HttpResponseRedirect(wanted)
    return HttpResponseRedirect(events[0].target_url)


def _return_allowed(url: str, event: Event) -> bool:
    return (
        admitted_destination(
            return_url=url, target_url=event.target_url, allowed_hosts=event.allowed_return_hosts
        )
        == url
    )


def _browser_queue_id(request: HttpRequest, event: Event) -> uuid.UUID | None:
    """A v3 cancel URL without a queue id: the place this browser holds for the on-sale."""
    page_ticket = page_cookie_read(request, event)
    if page_ticket is None:
        return None
    try:
        entry_id = ticket_read(page_ticket.ticket).entry_id
    except QueueError:
        return None
    return entry_public_id(entry_id, event)


@kept_out_of_caches
@require_safe
def integration_config_view(request: HttpRequest, customer: str) -> HttpResponse:
    """The customer's integration config (docs/queueit.md), for connectors that pull it:
    the ``api-key`` header must be the on-sales' Queue-it secret key (the config shows their
    traffic rules, bypass cookies included)."""
    on_sales = queueit_customer_on_sales(customer, request.headers.get("api-key", ""))
    if not on_sales:
        return JsonResponse(
            {
                "error": "unauthorized",
                "detail": "Send the on-sales' Queue-it secret key as the api-key header.",
            },
            status=401,
        )
    config = integration_config(
        [
            QueueitOnSale(
                event_id=event.queueit_event_id_effective,
                name=event.name,
                cookie_validity_minutes=math.ceil(event.session_seconds / 60),
                rules=parse_traffic_rules(event.traffic_rules),
            )
            for event in on_sales
        ],
        customer_id=customer,
        queue_domain=request.get_host() + _base(request).rstrip("/"),
        version=int(max(event.updated_at for event in on_sales).timestamp()),
    )
    return JsonResponse(config)


def _routes() -> list[URLPattern]:
    return [
        path("", enqueue),
        path("status/integrationconfig/<str:customer>", integration_config_view),
        path("status/integrationconfig/secure/<str:customer>", integration_config_view),
        path("error/<path:code>/", error),
        # v4/v5 connectors; before the v3 shape, which would read "multiple" as a customer.
        path("cancel/multiple/<str:customer>", cancel_multiple),
        re_path(
            r"^cancel/(?P<customer>[^/]+)/(?P<event_id>[^/]+)(?:/(?P<queue_id>[^/]+))?/?$",
            cancel_one,
        ),
    ]


# config/urls.py serves them at the root and under /queueit/ (and /queueit itself).
ROUTES = _routes()
