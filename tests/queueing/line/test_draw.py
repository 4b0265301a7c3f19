"""The draw (queueing/line/draw.py): frozen at the window's close, once, with its commitment,
outcomes per tier and the draw's own seed revealed in the trail, never the shuffle's; nothing
registers after it."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from queueing.line.draw import (
    draw_work_due,
    draws_ask,
    draws_run,
    registration_draw,
    registration_inclusion,
)
from queueing.line.registration import registration_create, registration_window_set
from queueing.models import AuditAction, AuditRecord, Registration
from queueing.records.audit_verify import audit_chain_verify
from queueing.rules.draw import Listed, draw, list_root
from queueing.rules.errors import DrawDone, EventClosed
from staff.services import TierSpec
from tests.helpers import AUDITOR, registration_window_open, registrations_made, staff_client

pytestmark = pytest.mark.django_db


def closed(window) -> None:
    """The window's close passed (moved back, as staff would before the draw)."""
    window.refresh_from_db()
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])


def test_nothing_is_drawn_before_the_close(event) -> None:
    registration_window_open(event)
    registrations_made(event, by_mail=2)
    assert not draw_work_due(timezone.now())
    assert registration_draw(event_id=event.id, now=timezone.now()) is None


def test_the_draw_freezes_the_confirmed_list_and_draws_each_tier_once(make_event) -> None:
    event = make_event(
        slug="tiers",
        tiers=[TierSpec(name="General"), TierSpec(name="Club", priority=1, access_codes=["CLUB1"])],
    )
    window = registration_window_open(event, winners=3, waitlist=2)
    registrations_made(event, by_mail=6, by_shop=4)
    registrations_made(event, by_shop=0, by_mail=0)
    club = [
        registration_create(
            event=event, now=timezone.now(), email=f"c{n}@example.com", access_code="CLUB1"
        )
        for n in range(2)
    ]  # left pending: never confirmed, not in the draw
    closed(window)
    now = timezone.now()
    assert draw_work_due(now)
    assert draws_run(now=now) == [event.id]
    assert draws_run(now=now) == [] and not draw_work_due(now)
    window.refresh_from_db()
    confirmed = Registration.objects.filter(event=event, status="confirmed")
    listed = [Listed(hash=r.public_hash, tier=r.tier.name) for r in confirmed]
    assert (window.list_root, window.list_count) == (list_root(listed), 10)
    expected = draw(event.draw_seed, listed, winners=3, waitlist=2)["General"]
    won = list(
        confirmed.filter(outcome="won").order_by("draw_rank").values_list("public_hash", flat=True)
    )
    waiting = list(
        confirmed.filter(outcome="waitlisted")
        .order_by("draw_rank")
        .values_list("public_hash", flat=True)
    )
    assert (won, waiting) == (expected.winners, expected.waitlist)
    assert confirmed.filter(outcome="lost").count() == 5
    assert (
        all(r.registration.outcome == "" for r in club)
        and not Registration.objects.filter(outcome="", status="confirmed").exists()
    )
    record = AuditRecord.objects.get(action=AuditAction.DRAWN)
    assert (
        record.data["draw_seed"] == event.draw_seed and record.data["list_root"] == window.list_root
    )
    assert record.data["tiers"] == {"General": {"registrations": 10, "winners": 3, "waitlist": 2}}
    assert audit_chain_verify(event_id=event.id).ok


def test_after_the_draw_nobody_registers_or_confirms_and_the_window_is_fixed(event) -> None:
    window = registration_window_open(event)
    pending = registration_create(event=event, now=timezone.now(), email="late@example.com")
    closed(window)
    registration_draw(event_id=event.id, now=timezone.now())
    # Even with the close moved later again by hand, the drawn list takes nobody.
    window.refresh_from_db()
    with pytest.raises(DrawDone):
        registration_window_set(
            event=event, actor="test", now=timezone.now(), fields={"winners": 9}
        )
    with pytest.raises(EventClosed):
        registration_create(
            event=event, now=window.closes_at - timedelta(seconds=5), email="x@example.com"
        )
    assert registration_inclusion(registration=pending.registration) is None
    # Never confirmed, never told anything: its address went with the draw.
    assert Registration.objects.get(pk=pending.registration.pk).email == ""


def test_an_empty_list_draws_nobody(event) -> None:
    window = registration_window_open(event)
    closed(window)
    summary = registration_draw(event_id=event.id, now=timezone.now())
    assert summary is not None and (summary.count, summary.list_root) == (0, "0" * 64)


def test_the_dispatch_asks_for_the_draws_only_when_one_is_due(event, monkeypatch) -> None:
    asked: list[bool] = []
    monkeypatch.setattr("queueing.line.draw.draws_soon", lambda: asked.append(True))
    window = registration_window_open(event)
    assert not draws_ask(timezone.now()) and asked == []
    closed(window)
    assert draws_ask(timezone.now()) and asked == [True]
    draws_run(now=timezone.now())
    assert not draws_ask(timezone.now()) and asked == [True]


@pytest.mark.parametrize("queue_order", ["fifo", "random"])
def test_a_draw_before_the_line_starts_reveals_its_own_seed_never_the_shuffle_s(
    make_event, queue_order
) -> None:
    """The shuffle's seed orders the pre-queue (secret until the line starts) and a random
    line's places (until the on-sale closes): a draw revealed before either must not give it
    away, in the on-sale's answer, the draw's, its list and proofs, or the trail."""
    start = timezone.now() + timedelta(hours=2)
    event = make_event(slug="later", starts_at=start, queue_order=queue_order)
    window = registration_window_open(event, winners=2, waitlist=1)
    made = registrations_made(event, by_mail=2, by_shop=3)
    closed(window)
    assert draws_run(now=timezone.now()) == [event.id]
    event.refresh_from_db()
    assert event.started_at is None and event.draw_seed != event.shuffle_seed
    fans, auditor = Client(), staff_client("audrey", api=True, **AUDITOR)
    onsale = fans.get(f"/api/v1/events/{event.slug}")
    drawn = fans.get(f"/api/v1/events/{event.slug}/draw")
    listing = fans.get(f"/api/v1/events/{event.slug}/draw/registrations")
    proof = fans.get(f"/api/v1/registrations/{made[0].registration.id}/proof")
    records = auditor.get("/api/v1/audit/records/", {"event": event.slug, "page_size": 1000})
    csv = auditor.get("/api/v1/audit/records/", {"event": event.slug, "format": "csv"})
    report = auditor.get(f"/api/v1/audit/events/{event.slug}/report")
    answers = [onsale, drawn, listing, proof, records, report]
    assert [a.status_code for a in [*answers, csv]] == [200] * 7
    assert records.json()["next"] is None
    published = [a.content.decode() for a in answers]
    published.append(b"".join(csv.streaming_content).decode())
    assert not any(event.shuffle_seed in text for text in published)
    # What the draw reveals is its own seed, committed to from the on-sale's creation.
    assert onsale.json()["shuffle_seed"] is None
    assert drawn.json()["draw_seed"] == event.draw_seed
    commitment = hashlib.sha256(event.draw_seed.encode()).hexdigest()
    created = AuditRecord.objects.get(event=event, action=AuditAction.EVENT_CREATED)
    assert (
        onsale.json()["draw_seed_sha256"]
        == drawn.json()["draw_seed_sha256"]
        == created.data["draw_seed_sha256"]
        == commitment
    )
    record = AuditRecord.objects.get(event=event, action=AuditAction.DRAWN)
    assert record.data["draw_seed"] == event.draw_seed and "seed" not in record.data
