"""The fans' pages of a draw (docs/api.md, "Registration and the draw"): ``/e/<slug>/register/``
(the form, by address or with the shop's signed identity), the mailed link's page
``/e/<slug>/register/<token>/`` (confirmed on a button press, then the registration as it
stands: registered, and after the draw won, waitlisted or not drawn), and the invitation's
button into the line. Every change is a POST: link previews and mail scanners open links by
themselves, and must neither register, confirm nor take a place."""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import get_language
from django.views.decorators.http import require_http_methods, require_POST

from events.models import Event
from queueing.line.draw import draw_window
from queueing.line.invitations import invitation_redeem
from queueing.line.registration import (
    Registered,
    registration_confirm,
    registration_create,
    registration_of_link,
)
from queueing.models import RegistrationWindow
from queueing.rules.errors import EventNotFound, InvalidInput, QueueError
from queueing.rules.gate import destination_sources
from queueing.rules.registrations import EMAIL_MAX_LENGTH
from queueing.web.abuse import join_rate_check, pow_check
from queueing.web.api_errors import ApiError, api_error
from queueing.web.api_registration import registration_rate_identity
from queueing.web.middleware import content_security_policy, kept_out_of_caches
from queueing.web.pages import PageTicket, event_or_404, page_base_context, page_cookie_write

SHOP_TOKEN_MAX_LENGTH = 4096  # as the API's field


def _phase(window: RegistrationWindow, now: datetime) -> str:
    """Where the window stands: "before" it opens, "open", "closed" (not drawn yet) or
    "drawn"."""
    if window.drawn_at is not None:
        return "drawn"
    if now < window.opens_at:
        return "before"
    return "open" if now < window.closes_at else "closed"


def _window_or_404(event: Event) -> RegistrationWindow:
    try:
        return draw_window(event)
    except EventNotFound:
        raise Http404("This on-sale takes no registrations.") from None


def _context(event: Event, window: RegistrationWindow, now: datetime) -> dict[str, Any]:
    return {
        **page_base_context(event, now),
        "window": window,
        "phase": _phase(window, now),
        # The public draw (api_draw.py) and how to check it: linked from every page of it.
        "draw_url": reverse("api-draw", args=[event.slug]),
        # Before and just after the window the page looks again by itself, jittered so that
        # a crowd waiting for it does not come back in step.
        "refresh_seconds": random.randint(20, 40),
    }


def _render_form(
    request: HttpRequest,
    event: Event,
    window: RegistrationWindow,
    now: datetime,
    *,
    shop_token: str = "",
    email: str = "",
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {
        **_context(event, window, now),
        "shop_token": shop_token,
        "email": email,
        "has_codes": event.access_codes.exists(),
        "error": error,
        "email_max_length": EMAIL_MAX_LENGTH,
    }
    return render(request, "queueing/register.html", context, status=status)


def _render_registration(
    request: HttpRequest,
    event: Event,
    registered: Registered,
    now: datetime,
    *,
    token: str = "",
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    window = event.registration_window
    registration = registered.registration
    invitation = registered.invitation
    context = {
        **_context(event, window, now),
        "registered": registered,
        "registration": registration,
        "token": token,
        "invitation": invitation,
        # An invitation still to be used, or used for a place that may still be shown (the
        # redemption answers the same ticket while it is live).
        "can_join": invitation is not None and invitation.status in ("sent", "used"),
        # 1-based: the first ``winners`` of the tier's draw order won, the waitlist follows.
        "waitlist_place": (registration.draw_rank or 0) - window.winners,
        "proof_url": reverse("api-registration-proof", args=[registration.id]),
        "error": error,
    }
    return render(request, "queueing/registration.html", context, status=status)


@kept_out_of_caches
@require_http_methods(["GET", "HEAD", "POST"])
def registration_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The form while the window is open; before and after, when it opens or that it closed.
    ``?shop_token=<jwt>``: the shop's signed identity, sent by the page's own script at once
    (a button without JavaScript), through the same proof of work and limits as an address."""
    event = event_or_404(slug)
    window = _window_or_404(event)
    now = timezone.now()
    if request.method != "POST":
        token = request.GET.get("shop_token", "")[:SHOP_TOKEN_MAX_LENGTH]
        return _render_form(request, event, window, now, shop_token=token)
    email = request.POST.get("email", "").strip()
    shop_token = request.POST.get("shop_token", "").strip()
    code = request.POST.get("access_code", "").strip()[:64] or None
    try:
        if len(email) > EMAIL_MAX_LENGTH or len(shop_token) > SHOP_TOKEN_MAX_LENGTH:
            raise InvalidInput("That is not an e-mail address.")
        join_rate_check(request=request, identity=registration_rate_identity(email or shop_token))
        challenge = request.POST.get("pow_challenge", "")
        proof = {"challenge": challenge, "nonce": request.POST.get("pow_nonce", "")}
        pow_check(event=event, proof=proof if challenge else None)
        registered = registration_create(
            event=event,
            now=now,
            email=email or None,
            shop_token=shop_token or None,
            access_code=code,
            # The language this page is in: the fan's mails speak it too.
            language=get_language() or settings.LANGUAGE_CODE,
        )
    except (QueueError, ApiError) as refusal:
        error = api_error(refusal)
        response = _render_form(
            request,
            event,
            window,
            now,
            shop_token=shop_token,
            email=email,
            error=error.code,
            status=error.status,
        )
        if "Retry-After" in error.headers:
            response["Retry-After"] = error.headers["Retry-After"]
        return response
    if registered.registration.route == "email":
        # The same words whether the address is new or had registered: the page tells
        # nobody who else registered.
        context = {**_context(event, window, now), "email": email}
        return render(request, "queueing/register_mailed.html", context)
    return _with_form_targets(event, _render_registration(request, event, registered, now))


@kept_out_of_caches
@require_http_methods(["GET", "HEAD", "POST"])
def registration_status(request: HttpRequest, slug: str, token: str) -> HttpResponse:
    """The mailed link: GET shows the registration (a pending one with the button that
    confirms it), POST confirms (again: the same answer)."""
    event = event_or_404(slug)
    now = timezone.now()
    try:
        registered = registration_of_link(token=token)
        # Checked before anything is confirmed: a link is only good on its own on-sale's page.
        if registered.registration.event_id != event.pk:
            raise Http404("No such registration")
        if request.method == "POST":
            registered = registration_confirm(token=token, now=now)
    except (QueueError, ApiError) as refusal:
        error = api_error(refusal)
        if error.code == "event_closed":  # a pending one confirmed too late: as it stands
            return _with_form_targets(
                event,
                _render_registration(
                    request, event, registered, now, token=token, error=error.code, status=409
                ),
            )
        context = {**page_base_context(event, now), "error": error.code}
        return render(request, "queueing/registration_link.html", context, status=error.status)
    return _with_form_targets(
        event, _render_registration(request, event, registered, now, token=token)
    )


def _with_form_targets(event: Event, response: HttpResponse) -> HttpResponse:
    """The invitation's button may end on the shop (a join let in at once redirects there,
    through the waiting page), and the browser holds that whole chain to the page's
    form-action, as on the waiting page."""
    response["Content-Security-Policy"] = content_security_policy(
        form_targets=destination_sources(
            target_url=event.target_url, allowed_hosts=event.allowed_return_hosts
        )
    )
    return response


@kept_out_of_caches
@require_POST
def registration_join(request: HttpRequest, slug: str) -> HttpResponse:
    """The invitation's button: joins the line with the code, as ``invitations/join`` does,
    and the waiting page shows the place."""
    event = event_or_404(slug)
    now = timezone.now()
    try:
        redeemed = invitation_redeem(
            event=event, code=request.POST.get("code", "").strip()[:64], now=now
        )
    except (QueueError, ApiError) as refusal:
        error = api_error(refusal)
        context = {**page_base_context(event, now), "error": error.code}
        return render(request, "queueing/registration_link.html", context, status=error.status)
    response = HttpResponseRedirect(reverse("waiting-page", args=[event.slug]))
    answer = redeemed.result.answer
    page_cookie_write(
        response, event, PageTicket(ticket=answer.ticket, first_position=answer.position)
    )
    return response
