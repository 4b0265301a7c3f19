"""What the room stops keeping (queueing/line/retention.py): on-sales ended more than
WR_RETENTION_DAYS ago archived by the retention task, and only those; place links a day past
their expiry; the address digests of ended tickets, at their end or once no re-entry can use
them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from events.models import Event
from queueing.line.archives import onsale_archive
from queueing.line.draw import registration_draw
from queueing.line.place_links import place_link_create
from queueing.line.retention import (
    address_digests_erase,
    place_links_purge,
    registration_addresses_erase,
    retention_run,
)
from queueing.models import AuditChainHead, PlaceLink, QueueEntry, Registration
from queueing.tasks import retention_run as retention_task
from staff.services import event_close
from tests.helpers import (
    entry_of,
    fans_join,
    poll,
    registration_window_open,
    registrations_made,
    shop_completes,
    tick,
)

pytestmark = pytest.mark.django_db(transaction=True)


def ended(make_event, slug: str, *, days_ago: float) -> Event:
    event = make_event(slug=slug)
    fans_join(slug, 2)
    event_close(event=event, actor="staff:ann", now=timezone.now())
    tick(event)  # the line revoked
    Event.objects.filter(pk=event.pk).update(closed_at=timezone.now() - timedelta(days=days_ago))
    return event


def test_the_retention_task_archives_only_on_sales_ended_long_enough_ago(
    make_event, settings, tmp_path: Path
) -> None:
    settings.WR_RETENTION_DAYS = 90
    settings.WR_ARCHIVE_DIR = str(tmp_path)
    old = ended(make_event, "old", days_ago=91)
    recent = ended(make_event, "recent", days_ago=89)
    live = make_event(slug="live")
    fans_join(live.slug, 1)

    outcome = retention_task()

    assert outcome["archived"] == ["old"]
    assert [path.name.split("-")[0] for path in tmp_path.glob("*.jsonl.gz")] == ["old"]
    states = {e.slug: e.archived_at for e in Event.objects.all()}
    assert states["old"] is not None and states["recent"] is None and states["live"] is None
    assert not QueueEntry.objects.filter(event=old).exists()
    assert QueueEntry.objects.filter(event=recent).count() == 2


def test_retention_archives_nothing_while_it_is_off(make_event, settings, tmp_path) -> None:
    settings.WR_RETENTION_DAYS = 0
    settings.WR_ARCHIVE_DIR = str(tmp_path)
    ended(make_event, "old", days_ago=400)
    assert retention_run(now=timezone.now()).archived == []
    assert not list(tmp_path.iterdir())


def test_a_few_on_sales_a_run(make_event, settings, tmp_path: Path) -> None:
    settings.WR_RETENTION_DAYS = 1
    settings.WR_RETENTION_PER_RUN = 2
    settings.WR_ARCHIVE_DIR = str(tmp_path)
    for n in range(3):
        ended(make_event, f"s{n}", days_ago=10 - n)
    assert retention_run(now=timezone.now()).archived == ["s0", "s1"]
    assert retention_run(now=timezone.now()).archived == ["s2"]


def test_place_links_leave_a_day_past_their_expiry(make_event) -> None:
    event = make_event()
    (ticket,) = fans_join(event.slug, 1)
    entry = entry_of(ticket)
    now = timezone.now()

    def link(expired_hours_ago: float) -> None:
        place_link_create(
            entry_id=entry.pk,
            purpose=PlaceLink.Purpose.DEVICE,
            now=now - timedelta(hours=expired_hours_ago + 1),
            expires_at=now - timedelta(hours=expired_hours_ago),
        )

    link(25)
    link(23)
    link(-1)  # still valid
    assert place_links_purge(now=now) == 1
    assert PlaceLink.objects.count() == 2


def test_an_ended_ticket_keeps_no_address_digest_unless_it_may_come_back(make_event) -> None:
    event = make_event(capacity=2, rate_per_minute=0, heartbeat_seconds=600, reentry_seconds=60)
    gone, back, done = fans_join(event.slug, 3)
    assert all(entry_of(t).address for t in (gone, back, done))
    Client().delete(f"/api/v1/tickets/{gone}")
    tick(event)
    shop_completes(poll(back)["pass"], event.integration_key, outcome="abandoned")
    assert entry_of(gone).address is None  # left: no way back
    assert entry_of(back).address is not None  # may go back in line within 60 s
    tick(event)
    shop_completes(poll(done)["pass"], event.integration_key)
    assert entry_of(done).address is None

    assert address_digests_erase(now=timezone.now()) == 0  # the window is still open
    assert address_digests_erase(now=timezone.now() + timedelta(seconds=61)) == 1
    assert entry_of(back).address is None


def test_an_archive_cut_short_has_its_removal_finished(make_event, settings, tmp_path) -> None:
    settings.WR_RETENTION_DAYS = 0
    settings.WR_ARCHIVE_DIR = str(tmp_path)
    event = ended(make_event, "cut", days_ago=1)
    onsale_archive(event_id=event.id, now=timezone.now(), out=tmp_path / "cut.jsonl.gz")
    # As if the run had died after marking the on-sale, before its last rows went.
    AuditChainHead.objects.create(event=event, seq=3)
    retention_run(now=timezone.now())
    assert not AuditChainHead.objects.filter(event=event).exists()


@pytest.mark.django_db
def test_a_draw_s_waitlisted_addresses_go_when_the_on_sale_ends(event) -> None:
    window = registration_window_open(event, winners=1, waitlist=5)
    registrations_made(event, by_mail=3)
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    registration_draw(event_id=event.id, now=timezone.now())
    # No mail sent yet: every address still kept (the waitlisted's until an invitation).
    assert Registration.objects.exclude(email="").count() == 3
    assert registration_addresses_erase(now=timezone.now()) == 0  # still on sale
    event_close(event=event, actor="test", now=timezone.now())
    assert registration_addresses_erase(now=timezone.now()) == 3
    assert not Registration.objects.exclude(email="").exists()
