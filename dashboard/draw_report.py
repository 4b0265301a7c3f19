"""The report's "Registration and draw" (docs/api.md, "The draw"): the list's commitment, the
draw's seed once revealed beside the hash published at the on-sale's creation, each tier's
winners and waitlist as the draw's own record holds them, what became of the invitations, and
the commands anyone can run to check it all with ``scripts/verify_draw.py``.

Three reads: the window, the ``drawn`` record (one, by its index), and the registrations'
counts (one grouped query, dashboard/registration_panel.py). No list of registrations.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.urls import reverse

from dashboard.registration_panel import TierCounts, counts_total, registration_counts
from events.models import Event
from queueing.line.draw import draw_tiers
from queueing.models import RegistrationWindow


@dataclass(frozen=True)
class DrawnTier:
    name: str
    registrations: int  # in the frozen list
    winners: int
    waitlist: int
    counts: TierCounts  # now: invitations sent, used, lapsed, promoted


@dataclass(frozen=True)
class DrawReport:
    opens_at: datetime
    closes_at: datetime
    winners: int
    waitlist: int
    invitation_hours: int
    drawn_at: datetime | None
    list_root: str
    list_count: int | None
    draw_seed: str | None  # revealed with the draw, never before
    draw_seed_sha256: str
    tiers: list[DrawnTier]
    registrations: list[TierCounts]  # each tier's registrations now, drawn or not
    total: TierCounts
    registered: int  # before the draw: registrations so far, confirmed or not
    verify_commands: str

    @property
    def drawn(self) -> bool:
        return self.drawn_at is not None


def verify_commands(event: Event) -> str:
    """The shell lines docs/api.md gives, for this on-sale and this room's address."""
    base = settings.WR_PUBLIC_URL.rstrip("/")
    draw = base + reverse("api-draw", kwargs={"slug": event.slug})
    listed = base + reverse("api-draw-list", kwargs={"slug": event.slug})
    event_url = base + reverse("api-event", kwargs={"slug": event.slug})
    return "\n".join(
        [
            f"curl -s {draw} > draw.json",
            f"url={listed}",
            'while [ -n "$url" ]; do',
            '  curl -s "$url" | tee -a draw.json | python3 -c '
            '\'import json,sys; print(json.load(sys.stdin)["next"] or "")\' > next.txt',
            "  url=$(cat next.txt)",
            "done",
            f"curl -s {event_url} >> draw.json",
            "python3 verify_draw.py draw.json",
        ]
    )


def draw_report(event: Event) -> DrawReport | None:
    """None for an on-sale sold first come (no registration window)."""
    window = RegistrationWindow.objects.filter(event=event).first()
    if window is None:
        return None
    registrations = registration_counts(event)
    counts = {tier.name: tier for tier in registrations}
    drawn = draw_tiers(event.pk) if window.drawn_at is not None else {}
    tiers = [
        DrawnTier(
            name=name,
            registrations=figures["registrations"],
            winners=figures["winners"],
            waitlist=figures["waitlist"],
            counts=counts.get(name, TierCounts(name)),
        )
        for name, figures in sorted(drawn.items())
    ]
    total = counts_total(registrations)
    return DrawReport(
        opens_at=window.opens_at,
        closes_at=window.closes_at,
        winners=window.winners,
        waitlist=window.waitlist,
        invitation_hours=window.invitation_hours,
        drawn_at=window.drawn_at,
        list_root=window.list_root,
        list_count=window.list_count,
        draw_seed=event.draw_seed if window.drawn_at is not None else None,
        draw_seed_sha256=event.draw_seed_sha256,
        tiers=tiers,
        registrations=registrations,
        total=total,
        registered=total.registered,
        verify_commands=verify_commands(event),
    )
