"""An on-sale's registration and draw on its dashboard page (docs/api.md, "Registration and
the draw"): the window, the registrations counted by tier, status and outcome, and after the
draw its commitment and what became of the invitations; with the form that sets the window
through the staff API's own service (``line/registration.registration_window_set``).

The figures are counts from one grouped query over the on-sale's registrations (each joined
to its invitation), read when the page is drawn and never refreshed by the page's script: a
page costs one query however many registered, and nothing is paid per second. No list of
registrations is shown here; the admin's is paged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.utils import timezone

from events.models import Event
from queueing.line.registration import registration_window_set
from queueing.models import (
    InvitationStatus,
    Registration,
    RegistrationStatus,
    RegistrationWindow,
)
from queueing.rules.errors import QueueError

# As the staff API's window (staff/registration_api.py).
WINNERS_MAX = 10_000_000
INVITATION_HOURS_MAX = 24 * 30
SHOP_KEY_MIN, SHOP_KEY_MAX = 32, 256
_MINUTES = "%Y-%m-%dT%H:%M"


@dataclass
class TierCounts:
    """One tier's registrations (or all tiers', for the total row)."""

    name: str
    registered: int = 0
    by_email: int = 0  # registered by an address (confirmed or not)
    by_shop: int = 0  # registered by the shop's signed identity
    confirmed: int = 0
    won: int = 0
    waitlisted: int = 0
    lost: int = 0
    winners_invited: int = 0
    waitlist_invited: int = 0  # promoted from the waitlist as invitations lapsed
    used: int = 0
    lapsed: int = 0
    unused: int = 0  # sent, neither used nor lapsed yet

    def add(self, *, route: str, status: str, outcome: str, invitation: str | None, n: int) -> None:
        self.registered += n
        if route == "shop":
            self.by_shop += n
        else:
            self.by_email += n
        if status == RegistrationStatus.CONFIRMED:
            self.confirmed += n
        if outcome == "won":
            self.won += n
        elif outcome == "waitlisted":
            self.waitlisted += n
        elif outcome == "lost":
            self.lost += n
        if invitation is None:
            return
        if outcome == "won":
            self.winners_invited += n
        else:
            self.waitlist_invited += n
        if invitation == InvitationStatus.USED:
            self.used += n
        elif invitation == InvitationStatus.LAPSED:
            self.lapsed += n
        else:
            self.unused += n


@dataclass(frozen=True)
class RegistrationSummary:
    window: RegistrationWindow
    state: str  # "not open yet", "open", "closed, to be drawn", "drawn"
    tiers: list[TierCounts]
    total: TierCounts
    draw_seed: str | None  # revealed with the draw, never before
    draw_seed_sha256: str
    invited: int = 0

    @property
    def drawn(self) -> bool:
        return self.window.drawn_at is not None


def _state(window: RegistrationWindow, now: datetime) -> str:
    if window.drawn_at is not None:
        return "drawn"
    if now < window.opens_at:
        return "not open yet"
    if now < window.closes_at:
        return "open"
    return "closed, to be drawn"


def registration_counts(event: Event) -> list[TierCounts]:
    """Each tier's counts, from one grouped query (a registration and its invitation)."""
    rows = (
        Registration.objects.filter(event=event)
        .values_list("tier__name", "route", "status", "outcome", "invitation__status")
        .annotate(n=Count("id"))
        .order_by()
    )
    tiers: dict[str, TierCounts] = {}
    for tier, route, status, outcome, invitation, n in rows:
        counts = tiers.setdefault(tier, TierCounts(tier))
        counts.add(route=route, status=status, outcome=outcome, invitation=invitation, n=n)
    return sorted(tiers.values(), key=lambda t: t.name)


def counts_total(tiers: list[TierCounts]) -> TierCounts:
    total = TierCounts("All tiers")
    for counts in tiers:
        for name in vars(total):
            if name != "name":
                setattr(total, name, getattr(total, name) + getattr(counts, name))
    return total


def registration_summary(event: Event, *, now: datetime) -> RegistrationSummary | None:
    """None when the on-sale has no registration window."""
    window = RegistrationWindow.objects.filter(event=event).first()
    if window is None:
        return None
    tiers = registration_counts(event)
    total = counts_total(tiers)
    return RegistrationSummary(
        window=window,
        state=_state(window, now),
        tiers=tiers,
        total=total,
        draw_seed=event.draw_seed if window.drawn_at is not None else None,
        draw_seed_sha256=event.draw_seed_sha256,
        invited=total.winners_invited + total.waitlist_invited,
    )


class WindowForm(forms.Form):
    """The staff API's ``PUT .../registration``, as a form."""

    opens_at = forms.DateTimeField(
        label="Opens",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=_MINUTES),
    )
    closes_at = forms.DateTimeField(
        label="Closes (the draw follows at once)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=_MINUTES),
    )
    winners = forms.IntegerField(min_value=0, max_value=WINNERS_MAX, label="Winners per tier")
    waitlist = forms.IntegerField(
        min_value=0, max_value=WINNERS_MAX, label="Waitlist per tier", initial=0
    )
    invitation_hours = forms.IntegerField(
        min_value=1,
        max_value=INVITATION_HOURS_MAX,
        label="An invitation lasts (hours)",
        initial=48,
    )
    shop_key = forms.CharField(
        required=False,
        min_length=SHOP_KEY_MIN,
        max_length=SHOP_KEY_MAX,
        strip=False,
        label="Shop key",
        help_text=f"{SHOP_KEY_MIN} to {SHOP_KEY_MAX} characters; empty keeps the key there is. "
        "Never shown again.",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )
    shop_key_off = forms.BooleanField(
        required=False, label="Turn the shop's route off (no shop key)"
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        opens, closes = data.get("opens_at"), data.get("closes_at")
        if opens is not None and closes is not None and closes <= opens:
            self.add_error("closes_at", "The window must close after it opens.")
        if data.get("shop_key") and data.get("shop_key_off"):
            self.add_error("shop_key", "Give a key, or turn the route off: not both.")
        return data

    def service_fields(self) -> dict[str, Any]:
        data = self.cleaned_data
        fields = {
            name: data[name]
            for name in ("opens_at", "closes_at", "winners", "waitlist", "invitation_hours")
        }
        if data["shop_key_off"]:
            fields["shop_key"] = ""
        elif data["shop_key"]:
            fields["shop_key"] = data["shop_key"]
        return fields


def window_form(window: RegistrationWindow | None, *, now: datetime) -> WindowForm:
    """Unbound, showing the window there is (or a day's window from the next hour)."""
    if window is None:
        start = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        initial: dict[str, Any] = {"opens_at": start, "closes_at": start + timedelta(days=1)}
    else:
        initial = {
            "opens_at": window.opens_at,
            "closes_at": window.closes_at,
            "winners": window.winners,
            "waitlist": window.waitlist,
            "invitation_hours": window.invitation_hours,
        }
    local = {
        name: timezone.localtime(value) if isinstance(value, datetime) else value
        for name, value in initial.items()
    }
    return WindowForm(initial=local)


class WindowRefused(Exception):
    """The window could not be set as asked; the form carries the reasons."""


def window_set_from_form(*, event: Event, form: WindowForm, actor: str, now: datetime) -> str:
    """Set the window (audited by the service); what was done, for staff to read. Refusals
    land on the form as errors and raise ``WindowRefused``."""
    if not form.is_valid():
        raise WindowRefused()
    try:
        window = registration_window_set(
            event=event, actor=actor, now=now, fields=form.service_fields()
        )
    except QueueError as refusal:  # drawn already
        form.add_error(None, refusal.detail)
        raise WindowRefused() from refusal
    except ValidationError as refusal:
        for name, messages in refusal.message_dict.items():
            form.add_error(name if name in form.fields else None, messages)
        raise WindowRefused() from refusal
    return (
        f"{event.name}: registration from {timezone.localtime(window.opens_at):%d %b %Y %H:%M} "
        f"to {timezone.localtime(window.closes_at):%d %b %Y %H:%M}, "
        f"{window.winners:,} winners and {window.waitlist:,} waitlisted per tier."
    )
