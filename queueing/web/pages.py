"""The fans' waiting page ``/e/<slug>/``: server-rendered, live over WebSockets when it can,
polling when it cannot, refreshing itself without JavaScript.

Over 350 lines on purpose: every state the page shows (join, scheduled, pre-queue, waiting,
your turn, ended, moved) comes from one view and one set of page cookies."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from events.models import Event, EventMode, EventState
from queueing.line.answers import TicketAnswer, ticket_poll
from queueing.line.joining import JoinRequest, JoinResult, entry_join_many
from queueing.line.reads import event_layout
from queueing.line.reentry import entry_reenter
from queueing.live.ticks import event_limits
from queueing.records.entry_reads import PageFacts, entry_page_facts, entry_return_url
from queueing.rules.errors import EventSoldOut, PlaceMoved, QueueError, ReentryNotAllowed
from queueing.rules.eta import wait_bound
from queueing.rules.gate import destination_sources, return_url_clean
from queueing.rules.layout import service_groups
from queueing.rules.states import REENTERABLE, EntryStatus
from queueing.rules.ticket_codec import TicketRef, ticket_issue, ticket_read
from queueing.rules.wording import (
    js_strings,
    others_waiting_text,
    status_kind,
    status_text,
    wait_kind,
    wait_text,
    your_turn_strings,
)
from queueing.web.abuse import join_rate_check, pow_check, wrong_code_gate
from queueing.web.api_errors import ApiError, api_error
from queueing.web.branding import event_branding
from queueing.web.callers import (
    address_digest,
    handheld_request,
    identity_from_request,
    identity_remember,
)
from queueing.web.middleware import content_security_policy, kept_out_of_caches
from queueing.web.request_ids import request_id_of

_COOKIE_SALT = "waitingroom.page-ticket.v1"


@dataclass(frozen=True)
class PageTicket:
    ticket: str
    first_position: int | None  # where the fan stood when first placed (for the progress bar)
    # The entry's holder key this browser was given when the place moved here ("" for the
    # browser that joined): a place shows only where the key matches (line/place_links.py).
    holder: str = ""


def _cookie_name(event: Event) -> str:
    return f"wr_ticket_{event.pk}"


def page_cookie_read(request: HttpRequest, event: Event) -> PageTicket | None:
    raw = request.get_signed_cookie(_cookie_name(event), default=None, salt=_COOKIE_SALT)
    if not raw:
        return None
    ticket, _, rest = raw.partition("|")
    first, _, holder = rest.partition("|")
    return PageTicket(
        ticket=ticket, first_position=int(first) if first.isdigit() else None, holder=holder
    )


def page_cookie_write(response: HttpResponse, event: Event, page_ticket: PageTicket) -> None:
    first = "" if page_ticket.first_position is None else str(page_ticket.first_position)
    response.set_signed_cookie(
        _cookie_name(event),
        f"{page_ticket.ticket}|{first}|{page_ticket.holder}",
        salt=_COOKIE_SALT,
        max_age=settings.WR_IDENTITY_COOKIE_MAX_AGE,
        httponly=True,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )


def event_or_404(slug: str) -> Event:
    event = Event.objects.filter(slug=slug).first()
    if event is None:
        raise Http404("No such on-sale")
    return event


def _needs_join_form(event: Event) -> bool:
    """A form instead of joining on arrival: when some tiers are for code holders (a code
    field), or when joining takes a proof of work (solved by the page's script)."""
    return bool(event.pow_difficulty) or event.access_codes.exists()


def page_base_context(event: Event, now: datetime) -> dict[str, Any]:
    return {
        "event": event,
        "state": event.state_at(now).value,
        "now": now,
        # The maintenance notice (templates/queueing/maintenance_notice.html): staff's
        # message, and the start when it is still to come.
        "maintenance": event.mode == EventMode.MAINTENANCE,
        "opens_at": event.starts_at if event.starts_at and event.starts_at > now else None,
        # The on-sale's own look (templates/queueing/branding_*.html): logo, colour, texts.
        "branding": event_branding(event),
    }


def _render_join_refused(
    request: HttpRequest,
    event: Event,
    refusal: QueueError | ApiError,
    now: datetime,
    return_url: str,
) -> HttpResponse:
    error = api_error(refusal)
    context = {
        **page_base_context(event, now),
        "error": error.code,
        "detail": error.detail,
        "return_url": return_url,
    }
    # Jittered like the join page's, so a crowd sent away does not come back in step.
    context["refresh_seconds"] = random.randint(20, 40)
    retry = error.headers.get("Retry-After")
    context["retry_after"] = int(retry) if retry else None
    if error.code == "invalid_access_code":
        context["code_error"] = True
        return render(request, "queueing/join.html", context, status=400)
    response = render(request, "queueing/refused.html", context, status=error.status)
    if retry:
        response["Retry-After"] = retry
    return response


def _join(
    request: HttpRequest,
    event: Event,
    access_code: str | None,
    now: datetime,
    return_url: str,
    page_url: str | None = None,
) -> HttpResponse:
    identity = identity_from_request(request, lanes=event.lanes, event_id=event.id)
    try:
        join_rate_check(request=request, identity=identity.digest)
        if request.method == "POST":
            proof = {
                "challenge": request.POST.get("pow_challenge", ""),
                "nonce": request.POST.get("pow_nonce", ""),
            }
            pow_check(event=event, proof=proof if proof["challenge"] else None)
        join = JoinRequest(
            event=event,
            identity=identity.digest,
            access_code=access_code,
            now=now,
            address=address_digest(request),
            return_url=return_url,
            request_id=request_id_of(request),
        )
        (refusal,) = wrong_code_gate([join])
        if refusal is not None:
            raise refusal
        (result,) = entry_join_many([join])
        if not isinstance(result, JoinResult):
            raise result
    except (QueueError, ApiError) as error:
        return _render_join_refused(request, event, error, now, return_url)
    # ``page_url``: the page that shows the place (a Queue-it queue URL), else the waiting page.
    response = HttpResponseRedirect(page_url or reverse("waiting-page", args=[event.slug]))
    page_cookie_write(
        response,
        event,
        PageTicket(ticket=result.answer.ticket, first_position=result.answer.position),
    )
    identity_remember(response, identity)
    return response


# The places a sale that sold out ends: those in line, and those its close sent home.
SOLD_OUT_SHOWN = (EntryStatus.PREQUEUE, EntryStatus.WAITING, EntryStatus.REVOKED)
# Ended places from which "Join again" leads back into the line.
REJOINABLE = (EntryStatus.LEFT, EntryStatus.EXPIRED, EntryStatus.ABANDONED)


def _progress(first: int | None, position: int | None) -> int:
    if not first or not position:
        return 0
    return max(0, min(100, math.floor(100 * (first - position) / first)))


def _render_ticket(
    request: HttpRequest,
    event: Event,
    page_ticket: PageTicket,
    view: TicketAnswer,
    now: datetime,
    *,
    facts: PageFacts | None = None,
    reentry_refused: str | None = None,
    handover_url: str | None = None,
) -> HttpResponse:
    first = page_ticket.first_position or view.position
    words = fan_words(event, view, now)
    context = {
        **page_base_context(event, now),
        **words,
        "view": view,
        "status": view.status.value,
        # The shop session ended without completing: say so, and offer the way back in
        # line while the on-sale allows it (view.reentry_until).
        "session_cut_short": view.was_admitted and view.status in REENTERABLE,
        # An ended place whose fan may join again (not once they bought, nor once the sale
        # ended): the page offers it, or, during maintenance, says it will once it is over.
        "rejoinable": view.status in REJOINABLE and event.state_at(now) != EventState.CLOSED,
        "reentry_refused": reentry_refused,
        # Sold out: a fan in line (or sent home by it) is told so, not "ended" or a place.
        "sold_out": event.sold_out_at is not None and view.status in SOLD_OUT_SHOWN,
        # The address left for the "it's your turn" mail (queueing/web/place_pages.py).
        "notify_email": facts.notify_email if facts is not None else "",
        # Why the address was not kept: "invalid", "taken" or "limited" (place_pages.py).
        "mail_error": request.GET.get("mail", "")[:16],
        # A phone or tablet is the other device already (callers.py, handheld_request).
        "offer_phone": not handheld_request(request),
        # How long the page may be closed with the place kept (line/away.py), in whole minutes
        # (rounded down: the page promises no more than is kept); 0 says nothing.
        "away_minutes": event.away_seconds // 60,
        "progress": _progress(first, view.position),
        "refresh_seconds": max(5, math.ceil(view.poll_after_seconds)),
        "config": {
            "ticket": view.ticket,
            "status": view.status.value,
            "state": event.state_at(now).value,
            "mode": event.mode,
            # What bounds a wait still being measured (rules/eta.py wait_bound), and whether
            # the bound holds for this fan: see fan_words.
            "limits": event_limits(event),
            "boundApplies": words["bound_applies"],
            "position": view.position,
            "queueLength": view.queue_length,
            "eta": view.eta.as_dict() if view.eta else None,
            "firstPosition": first,
            "pollAfter": view.poll_after_seconds,
            "startsAt": event.starts_at.timestamp() if event.starts_at else None,
            # The countdown runs on the server's clock: a fan's own may be minutes off.
            "serverNow": now.timestamp(),
            "wsPath": f"/ws/events/{event.slug}/",
            "ticketApi": reverse("api-ticket", args=[view.ticket]),
            "strings": {**js_strings(), **your_turn_strings()},
            "eventName": event.name,
            "eventSlug": event.slug,
            # Where the script sends an admitted fan instead of the pass's redirect_url: the
            # room URL that hands over a Queue-it token (queueing/web/queueit.py); else null.
            "handoverUrl": handover_url,
        },
    }
    response = render(
        request, "queueing/waiting.html", context, status=409 if reentry_refused else 200
    )
    if first != page_ticket.first_position:
        page_cookie_write(
            response,
            event,
            PageTicket(ticket=view.ticket, first_position=first, holder=page_ticket.holder),
        )
    return response


def fan_words(event: Event, view: TicketAnswer, now: datetime) -> dict[str, Any]:
    """What the waiting page says of the fan's place (its first line, the wait, the company in
    the pre-queue), chosen by the rules its script follows too (rules/wording.py)."""
    state = event.state_at(now).value
    status = view.status.value
    # "At most" holds only for a fan nobody can pass: in the tier served first, alone in its
    # group (a later fan of a tier served before theirs, or sharing with theirs, would go
    # ahead of them).
    layout = event_layout(event.pk)
    groups = service_groups(layout.tiers) if layout is not None else []
    bound_applies = bool(groups) and [t.id for t in groups[0]] == [view.tier_id]
    bound = None
    if bound_applies and view.position is not None:
        bound = wait_bound(
            view.position,
            rate_per_minute=event.rate_per_minute,
            capacity=event.capacity,
            session_seconds=event.session_seconds,
        )
    # Paused: nobody knows when staff resume (the answer has no estimate then either).
    eta = None if state == "paused" else view.eta
    kind = wait_kind(status=status, state=state, mode=event.mode, eta=eta, bound_seconds=bound)
    return {
        "status_text": status_text(
            status_kind(status=status, state=state, mode=event.mode, position=view.position)
        ),
        "wait_text": wait_text(kind, eta=eta, bound_seconds=bound),
        "wait_kind": kind.value,
        "others_text": others_waiting_text(view.queue_length),
        "bound_applies": bound_applies,
    }


def _render_join_form(request: HttpRequest, event: Event, now: datetime) -> HttpResponse:
    """Joining is always a POST: link previews, mail scanners and HEAD requests must not take
    places in line. Where no code or puzzle is needed, the page's script sends the form at
    once, so a fan still just arrives; without JavaScript there is a button. The page asked
    for with ``?return=<url>`` hands that URL on with the form. Sold out, there is nothing to
    join: the page says so at once (as a join would be answered, 409)."""
    if event.sold_out_at is not None:
        return _render_join_refused(request, event, EventSoldOut(), now, "")
    context = {
        **page_base_context(event, now),
        "return_url": return_url_clean(request.GET.get("return")),
        "has_codes": event.access_codes.exists(),
        "autojoin": not _needs_join_form(event) and event.mode != EventMode.MAINTENANCE,
        # Jittered, so a crowd waiting for the doors does not refresh in step.
        "refresh_seconds": random.randint(20, 40),
    }
    # Where the room mostly lets fans straight on, its join page is only a hop: no call to
    # join a line, just a moment while the form sends itself.
    context["straight_through"] = context["autojoin"] and event.mode in (
        EventMode.SAFETY_NET,
        EventMode.PASSTHROUGH,
    )
    return render(request, "queueing/join.html", context)


@kept_out_of_caches
@require_http_methods(["GET", "HEAD", "POST"])
def waiting_page(request: HttpRequest, slug: str) -> HttpResponse:
    event = event_or_404(slug)
    response = _waiting_page(request, event)
    # The page's forms (join, join again, go back in line) may end on the shop: a join
    # admitted at once answers with redirects to it, and the browser holds that whole chain
    # to the page's form-action.
    response["Content-Security-Policy"] = content_security_policy(
        form_targets=destination_sources(
            target_url=event.target_url, allowed_hosts=event.allowed_return_hosts
        )
    )
    return response


def _waiting_page(request: HttpRequest, event: Event) -> HttpResponse:
    now = timezone.now()
    if request.method == "POST":
        if request.POST.get("reenter"):
            return _reenter(request, event, now)
        return_url = _join_return_url(request, event)
        if request.POST.get("rejoin") and _needs_join_form(event):
            # Back through the form (code field, puzzle), with the old ticket forgotten but
            # the page it first asked for kept.
            page = reverse("waiting-page", args=[event.slug])
            if return_url:
                page += "?" + urlencode({"return": return_url})
            response = HttpResponseRedirect(page)
            response.delete_cookie(_cookie_name(event))
            return response
        code = request.POST.get("access_code", "").strip()[:64] or None
        return _join(request, event, code, now, return_url)
    try:
        page_ticket, view, facts = _page_view(request, event, now)
    except PlaceMovedAway:
        return _render_moved(request, event, now)
    if view is None or page_ticket is None:
        return _render_join_form(request, event, now)
    if view.status == EntryStatus.ADMITTED and view.issued_pass is not None:
        return HttpResponseRedirect(view.issued_pass.redirect_url)
    return _render_ticket(request, event, page_ticket, view, now, facts=facts)


def _page_view(
    request: HttpRequest, event: Event, now: datetime
) -> tuple[PageTicket | None, TicketAnswer | None, PageFacts | None]:
    """The ticket this browser holds for the on-sale, what the fan is told about it, and
    what only the page needs of it."""
    page_ticket = page_cookie_read(request, event)
    if page_ticket is None:
        return None, None, None
    try:
        ref = _held_ref(page_ticket, ticket_read(page_ticket.ticket))
        # Before anything is told or handed over (a pass, to an admitted fan): is the place
        # still shown in this browser, or did it move to another?
        facts = entry_page_facts(ref.entry_id)
        if not holds_place(page_ticket, facts):
            raise PlaceMovedAway
        view = ticket_poll(ref=ref, ticket=ticket_issue(ref), now=now)
    except PlaceMoved:
        raise PlaceMovedAway from None  # moved between the two reads
    except (QueueError, ApiError):
        return None, None, None  # a ticket from an old database: start afresh
    return page_ticket, view, facts


def _held_ref(page_ticket: PageTicket, ref: TicketRef) -> TicketRef:
    """The ticket the page shows, naming the holder key its cookie carries: a cookie set
    before tickets named it (a place moved then) still holds its place, and the page's
    script is handed the ticket that names it."""
    return replace(ref, holder=page_ticket.holder) if page_ticket.holder else ref


class PlaceMovedAway(Exception):
    """The place this browser showed was moved to another device."""


def holds_place(page_ticket: PageTicket, facts: PageFacts | None) -> bool:
    """Places never moved have no holder key, so every browser with the ticket shows them."""
    return facts is None or not facts.holder_key or facts.holder_key == page_ticket.holder


def _render_moved(request: HttpRequest, event: Event, now: datetime) -> HttpResponse:
    return render(request, "queueing/moved.html", page_base_context(event, now))


def _join_return_url(request: HttpRequest, event: Event) -> str:
    """The return URL a join from the page keeps: the form's (the page's ``?return=``), else
    the one the browser's last ticket for this on-sale came with ("Join again" keeps it)."""
    given = return_url_clean(request.POST.get("return") or request.GET.get("return"))
    if given:
        return given
    page_ticket = page_cookie_read(request, event)
    if page_ticket is None:
        return ""
    try:
        ref = ticket_read(page_ticket.ticket)
    except QueueError:
        return ""
    return entry_return_url(entry_id=ref.entry_id, event_id=event.pk)


def _reenter(request: HttpRequest, event: Event, now: datetime) -> HttpResponse:
    """The "Go back in line" button: the same re-entry as ``POST .../reenter``; then the page
    is a waiting page again (live updates and all)."""
    page = HttpResponseRedirect(reverse("waiting-page", args=[event.slug]))
    page_ticket = page_cookie_read(request, event)
    if page_ticket is None:
        return page
    try:
        ref = _held_ref(page_ticket, ticket_read(page_ticket.ticket))
        if not holds_place(page_ticket, entry_page_facts(ref.entry_id)):
            return _render_moved(request, event, now)
        entry_reenter(ref=ref, now=now)
    except ReentryNotAllowed as refusal:
        try:
            page_ticket, view, facts = _page_view(request, event, now)
        except PlaceMovedAway:
            return _render_moved(request, event, now)
        if view is None or page_ticket is None:
            return page
        return _render_ticket(
            request, event, page_ticket, view, now, facts=facts, reentry_refused=refusal.detail
        )
    except QueueError:
        return page  # a ticket from an old database: the page starts afresh
    return page


# ------------------------------------------- for the Queue-it surface (web/queueit.py)


def page_join(
    request: HttpRequest, event: Event, *, now: datetime, return_url: str, page_url: str
) -> HttpResponse:
    """A join as the page's form makes it, answered with a redirect to ``page_url``."""
    return _join(request, event, None, now, return_url, page_url=page_url)


def page_view(
    request: HttpRequest, event: Event, now: datetime
) -> tuple[PageTicket | None, TicketAnswer | None, PageFacts | None]:
    """The place this browser shows (raises PlaceMovedAway), as the waiting page reads it."""
    return _page_view(request, event, now)


def ticket_page(
    request: HttpRequest,
    event: Event,
    page_ticket: PageTicket,
    view: TicketAnswer,
    now: datetime,
    *,
    facts: PageFacts | None,
    handover_url: str,
) -> HttpResponse:
    return _render_ticket(
        request, event, page_ticket, view, now, facts=facts, handover_url=handover_url
    )


def moved_page(request: HttpRequest, event: Event, now: datetime) -> HttpResponse:
    return _render_moved(request, event, now)


def join_needs_form(event: Event) -> bool:
    return _needs_join_form(event)
