"""The waiting page's ways to reach a fan elsewhere: "Continue on your phone" (a one-time link
and its QR code), opening such a link on the other device, and the address for the "it's your
turn" mail. All are forms of the page (POST with CSRF); opening a link never spends it, since
link previews, scanners and mail clients open links by themselves."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import segno
from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.utils.translation import get_language
from django.views.decorators.http import require_http_methods, require_POST

from events.models import Event
from queueing.line.place_links import device_link_new, place_link_check, place_link_claim
from queueing.line.turn_mail import TurnMailRefused, turn_mail_address_set
from queueing.records.entry_reads import PageFacts, entry_page_facts
from queueing.rules.errors import QueueError, RateLimited
from queueing.rules.place_links import LinkRefusal, PlaceLinkRefused
from queueing.rules.states import QUEUED
from queueing.rules.ticket_codec import ticket_read
from queueing.web.callers import address_digest
from queueing.web.middleware import kept_out_of_caches
from queueing.web.pages import (
    PageTicket,
    event_or_404,
    holds_place,
    page_base_context,
    page_cookie_read,
    page_cookie_write,
)

# Unknown links are "not found"; spent ones are "gone".
_STATUS = {LinkRefusal.UNKNOWN: 404}


@dataclass(frozen=True)
class _HeldPlace:
    entry_id: int
    facts: PageFacts


def _held_entry(request: HttpRequest, event: Event) -> _HeldPlace | None:
    """The place this browser shows for the on-sale (else None)."""
    page_ticket = page_cookie_read(request, event)
    if page_ticket is None:
        return None
    try:
        ref = ticket_read(page_ticket.ticket)
    except QueueError:
        return None
    facts = entry_page_facts(ref.entry_id)
    if facts is None or facts.event_id != event.pk or not holds_place(page_ticket, facts):
        return None
    return _HeldPlace(entry_id=ref.entry_id, facts=facts)


def _back_to_the_page(event: Event) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("waiting-page", args=[event.slug]))


@kept_out_of_caches
@require_http_methods(["GET", "HEAD", "POST"])
def place_link_new(request: HttpRequest, slug: str) -> HttpResponse:
    """A link (and QR code) that moves this browser's place to the device that opens it.
    A GET (the language switcher's way back, a reload) makes none: back to the place."""
    event = event_or_404(slug)
    held = _held_entry(request, event) if request.method == "POST" else None
    if held is None or held.facts.status not in QUEUED:
        return _back_to_the_page(event)  # nothing (any more) to move from here
    now = timezone.now()
    try:
        token, expires_at = device_link_new(entry_id=held.entry_id, event_id=event.pk, now=now)
    except RateLimited as refusal:
        return _render_too_many(request, event, refusal, now)
    url = request.build_absolute_uri(reverse("place-link", args=[event.slug, token]))
    # segno draws the code from the URL alone: an SVG of paths, nothing of anyone's input.
    qr = segno.make(url, error="m").svg_inline(scale=5, border=2, omitsize=True)
    context = {
        **page_base_context(event, now),
        "link_url": url,
        "qr_svg": mark_safe(qr),  # drawn here by segno from our own URL (above)
        "expires_at": expires_at,
        "minutes": settings.WR_PLACE_LINK_SECONDS // 60,
    }
    # The page holds a working link: kept_out_of_caches keeps it out of every cache.
    return render(request, "queueing/place_link.html", context)


def _render_too_many(
    request: HttpRequest, event: Event, refusal: RateLimited, now: datetime
) -> HttpResponse:
    """The page's 429: "Too many attempts from here", then back to the place by itself."""
    retry_after = refusal.retry_after or 1
    context = {
        **page_base_context(event, now),
        "error": refusal.code.value,
        "detail": refusal.detail,
        "retry_after": retry_after,
    }
    response = render(request, "queueing/refused.html", context, status=429)
    response["Retry-After"] = str(retry_after)
    return response


@kept_out_of_caches
@require_http_methods(["GET", "HEAD", "POST"])
def place_link_open(request: HttpRequest, slug: str, token: str) -> HttpResponse:
    """GET: "Continue your place here?"; POST: move it here."""
    event = event_or_404(slug)
    now = timezone.now()
    try:
        if request.method != "POST":
            place_link_check(token=token, event_id=event.pk, now=now)
            response = render(
                request, "queueing/place_link_open.html", page_base_context(event, now)
            )
            # The token is in this page's URL: it may go as Referer to the room itself only
            # (not "no-referrer", which makes browsers send the form's Origin as "null", which
            # the CSRF check refuses).
            response["Referrer-Policy"] = "same-origin"
            return response
        claimed = place_link_claim(token=token, event_id=event.pk, now=now)
    except PlaceLinkRefused as refusal:
        context = {**page_base_context(event, now), "refusal": refusal.reason.value}
        return render(
            request,
            "queueing/place_link_open.html",
            context,
            status=_STATUS.get(refusal.reason, 410),
        )
    response = _back_to_the_page(event)
    page_cookie_write(
        response,
        event,
        PageTicket(ticket=claimed.ticket, first_position=None, holder=claimed.holder_key),
    )
    return response


@kept_out_of_caches
@require_POST
def turn_mail_form(request: HttpRequest, slug: str) -> HttpResponse:
    """Leave (or take back) the address to be mailed at when it's this fan's turn."""
    event = event_or_404(slug)
    held = _held_entry(request, event)
    if held is None:
        return _back_to_the_page(event)
    address = "" if request.POST.get("clear") else request.POST.get("email", "")[:254]
    page = reverse("waiting-page", args=[event.slug])
    try:
        turn_mail_address_set(
            entry_id=held.entry_id,
            address=address,
            language=get_language() or settings.LANGUAGE_CODE,
            client=address_digest(request),
        )
    except ValidationError:
        return HttpResponseRedirect(f"{page}?mail=invalid#turn-mail")
    except TurnMailRefused as refusal:
        # The page says why (queueing/web/pages.py: mail_error).
        return HttpResponseRedirect(f"{page}?mail={refusal.reason.value}#turn-mail")
    return HttpResponseRedirect(page + "#turn-mail")
