"""A hand-built history of one on-sale for the report's tests: joins, admissions, leaves and a
re-entry at controlled times.

The entries are created directly (``QueueEntry.objects.create``) and the admissions written
to the audit trail with ``audit_append_many``: the services read the clock themselves and
cannot place a join ten minutes in the past. Every status and time obeys the model's
constraints, as the services would leave them.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from events.models import Event, Tier
from queueing.models import AuditAction, QueueEntry
from queueing.records.audit import AuditItem, audit_append_many
from queueing.rules.states import EntryStatus as S
from staff.services import TierSpec, event_close

# On a whole minute, so that the report's 10 s buckets start exactly here.
T = datetime(2026, 3, 14, 18, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Fan:
    name: str
    tier: str
    joined: int  # seconds after T
    status: S
    admitted: int | None = None  # the entry's admitted_at (the second admission after a re-entry)
    ended: int | None = None
    quote: tuple[float, float, float] | None = None
    first_admitted: int | None = None  # only for a fan who went back in line
    reentered: int | None = None


# Waits (join to first admission): g1 60, g3 80, g2 120, g6 155, m1 20, m2 30.
FANS = [
    Fan("g1", "General", 0, S.COMPLETED, 60, 100, (30, 60, 90)),
    Fan("m1", "Members", 5, S.COMPLETED, 25, 70, (10, 20, 30)),
    Fan("g2", "General", 10, S.EXPIRED, 130, 400, (100, 150, 200)),
    Fan("m2", "Members", 15, S.ABANDONED, 45, 90, (5, 10, 15)),
    Fan("g3", "General", 20, S.COMPLETED, 100, 150, (10, 20, 30)),
    Fan("g4", "General", 30, S.LEFT, None, 50),
    Fan("g5", "General", 40, S.EXPIRED, None, 300),
    # Let in at 200, abandoned, back in line at 260, let in again at 280, completed.
    Fan("g6", "General", 45, S.COMPLETED, 280, 320, (150, 160, 170), 200, 260),
    Fan("g7", "General", 500, S.REVOKED, None, 600),  # sent home when the sale closed
]


def at(seconds: int | None) -> datetime | None:
    return None if seconds is None else T + timedelta(seconds=seconds)


def in_line(t: float) -> int:
    """Fans in line at ``t`` seconds after T, by the definition: joined before, and not yet
    let in or gone; a fan back in line counts again until let in again."""
    count = 0
    for fan in FANS:
        first = fan.first_admitted if fan.reentered is not None else fan.admitted
        out = first if first is not None else fan.ended
        if fan.joined < t and (out is None or out >= t):
            count += 1
        if fan.reentered is not None and fan.reentered < t and fan.admitted >= t:
            count += 1
    return count


def build_history(make_event, *, slug: str = "arena", close: bool = True) -> Event:
    event = make_event(
        slug=slug,
        tiers=[TierSpec("General"), TierSpec("Members", priority=10, access_codes=["VIP-2026"])],
    )
    tiers = dict(Tier.objects.filter(event=event).values_list("name", "id"))
    entries = {}
    with transaction.atomic():
        for fan in FANS:  # in join order: the order keys follow it
            p10, p50, p90 = fan.quote or (None, None, None)
            entries[fan.name] = QueueEntry.objects.create(
                event=event,
                tier_id=tiers[fan.tier],
                identity=hashlib.sha256(fan.name.encode()).hexdigest(),
                status=fan.status,
                joined_at=at(fan.joined),
                status_changed_at=at(fan.ended or fan.joined),
                admitted_at=at(fan.admitted),
                ended_at=at(fan.ended),
                quoted_p10=p10,
                quoted_p50=p50,
                quoted_p90=p90,
                reentered_at=at(fan.reentered),
            )
        admissions = sorted(
            [(f.first_admitted or f.admitted, f.name) for f in FANS if f.admitted is not None]
            + [(f.admitted, f.name) for f in FANS if f.reentered is not None]
        )
        audit_append_many(
            event_id=event.id,
            actor="test",
            at=T,
            items=[
                AuditItem(AuditAction.ADMITTED, entries[name].public_id, at=at(seconds))
                for seconds, name in admissions
            ],
        )
    if close:
        event_close(event=event, actor="test", now=at(600))
    event.refresh_from_db()
    return event


def realistic_history(make_event, *, fans: int = 3000, slug: str = "summer-tour") -> Event:
    """A closed sale as it might have gone: a burst at the start and a tail of arrivals over
    45 minutes, three tiers let in by priority at 48 a minute with a little disorder, fans
    giving up as they wait, passes running out, some going back in line; quotes near the
    truth. Entries and the trail's admissions are written directly, at their times (see the
    module's docstring), in a few bulk queries."""
    rng = random.Random(16)
    event = make_event(
        slug=slug,
        tiers=[
            TierSpec("General"),
            TierSpec("Members", priority=10, access_codes=["MEMBERS"]),
            TierSpec("Press", priority=5, access_codes=["PRESS"]),
        ],
    )
    Event.objects.filter(pk=event.pk).update(name="Summer Tour 2027 · presale")
    tiers = dict(Tier.objects.filter(event=event).values_list("name", "id"))
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=2)
    people = []
    for i in range(fans):
        burst = i < fans * 0.4
        joined = rng.uniform(0, 120) if burst else 120 + rng.expovariate(1 / 420)
        tier = rng.choices(["General", "Members", "Press"], weights=[85, 13, 2])[0]
        patience = rng.expovariate(1 / 2400)
        people.append({"joined": joined, "tier": tier, "patience": patience, "i": i})
    people.sort(key=lambda p: p["joined"])
    priority = {"Press": 0, "Members": 1, "General": 2}
    waiting: list[dict] = []
    t, pending = 0.0, list(people)
    while pending or waiting:
        t += 10
        while pending and pending[0]["joined"] <= t:
            waiting.append(pending.pop(0))
        for fan in list(waiting):
            if fan["joined"] + fan["patience"] < t:
                waiting.remove(fan)
                fan["ended"] = fan["joined"] + fan["patience"]
                fan["status"] = S.LEFT if rng.random() < 0.8 else S.EXPIRED
        waiting.sort(key=lambda f: (priority[f["tier"]], f["joined"] + rng.uniform(0, 4)))
        for fan in waiting[:8]:  # 48 a minute
            fan["admitted"] = max(fan["joined"] + 1, t - rng.uniform(0, 9))
        waiting = waiting[8:]
        if t > 3 * 3600:
            break
    entries = []
    for fan in people:
        admitted = fan.get("admitted")
        wait = (admitted or t) - fan["joined"]
        # Quoted at join: near the truth, more often a little short.
        p50 = max(5.0, wait * rng.lognormvariate(0, 0.25))
        fan["quote"] = (p50 * 0.7, p50, p50 * 1.35)
        if admitted is not None:
            roll = rng.random()
            fan["status"] = (
                S.COMPLETED if roll < 0.85 else S.ABANDONED if roll < 0.93 else S.EXPIRED
            )
            fan["ended"] = admitted + rng.uniform(60, 600)
            if fan["status"] != S.COMPLETED and rng.random() < 0.3:
                fan["first_admitted"] = admitted
                fan["reentered"] = fan["ended"] + rng.uniform(10, 120)
                fan["admitted"] = fan["reentered"] + rng.uniform(5, 60)
                fan["status"] = S.COMPLETED
                fan["ended"] = fan["admitted"] + rng.uniform(60, 300)

        def when(seconds: float | None) -> datetime | None:
            return None if seconds is None else start + timedelta(seconds=seconds)

        entries.append(
            QueueEntry(
                event=event,
                tier_id=tiers[fan["tier"]],
                identity=hashlib.sha256(f"{slug}-{fan['i']}".encode()).hexdigest(),
                status=fan["status"],
                joined_at=when(fan["joined"]),
                status_changed_at=when(fan["ended"]),
                admitted_at=when(fan.get("admitted")),
                ended_at=when(fan["ended"]),
                quoted_p10=fan["quote"][0],
                quoted_p50=fan["quote"][1],
                quoted_p90=fan["quote"][2],
                reentered_at=when(fan.get("reentered")),
            )
        )
    with transaction.atomic():
        created = QueueEntry.objects.bulk_create(entries)
        admissions = []
        for fan, entry in zip(people, created, strict=True):
            if fan.get("admitted") is not None:
                first = fan.get("first_admitted", fan["admitted"])
                admissions.append((first, entry.public_id))
                if "first_admitted" in fan:
                    admissions.append((fan["admitted"], entry.public_id))
        admissions.sort()
        audit_append_many(
            event_id=event.id,
            actor="test",
            at=start,
            items=[
                AuditItem(AuditAction.ADMITTED, public_id, at=start + timedelta(seconds=s))
                for s, public_id in admissions
            ],
        )
    closed_at = max(e.ended_at for e in entries)
    event_close(event=Event.objects.get(pk=event.pk), actor="test", now=closed_at)
    return Event.objects.get(pk=event.pk)
