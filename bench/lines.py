"""Lines for the benchmarks to measure: the on-sales, waiting fans loaded in bulk, their
tickets and passes written to files for the load generators, and what a line takes in Redis.

The project's models can be imported only once Django is set up, and modules that import
this one (bench/outage.py) are imported before: the functions import them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from bench.waiting_rows import copy_waiting
from queueing.hot import keys
from queueing.hot.client import client as hot_client

if TYPE_CHECKING:
    from events.models import Event


def new_on_sale(
    slug: str, *, actor: str, paused: bool = True, started: bool = True, **fields: Any
) -> Event:
    """A new on-sale ``slug`` (``fields`` as staff would set them), made by ``actor``: paused
    unless told otherwise (nothing admits from it, so its line only grows), and open as if its
    start time had passed unless ``started`` is False. The instance ``event_create`` returned:
    ``started_at`` is set in the database only."""
    from events.models import Event
    from staff.services import event_create, event_pause

    event = event_create(
        actor=actor,
        now=timezone.now(),
        slug=slug,
        name=slug,
        target_url="https://shop.example/",
        **fields,
    )
    if paused:
        event_pause(event=event, actor=actor, now=timezone.now())
    if started:
        Event.objects.filter(pk=event.pk).update(started_at=timezone.now())
    return event


def bulk_line(event: Event, count: int) -> None:
    """`count` waiting fans in one COPY (the join path is measured separately)."""
    tier = event.tiers.get()
    copy_waiting((event.pk, tier.pk, f"bulk-{event.pk}-{i}") for i in range(count))


def _tickets_written(path: Path, event_id: int, entries: Iterable[tuple[int, int]]) -> None:
    """The tickets of ``entries`` (entry id, tier id), one a line, for bench/status.lua."""
    from queueing.rules.ticket_codec import TicketRef, ticket_issue

    path.write_text(
        "".join(
            ticket_issue(TicketRef(entry_id=i, event_id=event_id, tier_id=t)) + "\n"
            for i, t in entries
        )
    )


def write_tickets(event_id: int, path: Path, limit: int = 2000) -> None:
    """The tickets of the first ``limit`` fans in line: at the front, where pages are sent
    every tick (queueing/rules/tick_bands.py)."""
    from queueing.models import QueueEntry

    rows = (
        QueueEntry.objects.filter(event_id=event_id, status="waiting", passed_over_at__isnull=True)
        .order_by("tier_id", "order_key")
        .values_list("id", "tier_id")[:limit]
    )
    _tickets_written(path, event_id, rows)


def write_spread_tickets(event_id: int, path: Path, count: int = 2000) -> int:
    """``count`` tickets of waiting fans spread evenly over the whole line (a poll's cost
    in degraded mode does not depend on the position, but its answer's exactness does)."""
    from queueing.models import QueueEntry

    rows = list(
        QueueEntry.objects.filter(event_id=event_id, status="waiting")
        .order_by("order_key")
        .values_list("id", "tier_id")
    )
    step = max(1, len(rows) // count)
    _tickets_written(path, event_id, rows[::step][:count])
    return len(rows)


def write_gate_passes(event: Event, path: Path, count: int = 1000) -> None:
    """``count`` fans of ``event`` admitted (manual admissions: the event is paused) and
    their passes, one a line, for bench/gate.lua."""
    from queueing.line.admission import ManualAdmission, admission_run
    from queueing.line.index_sync import hot_index_rebuild
    from queueing.line.sessions import entry_pass
    from queueing.models import QueueEntry

    bulk_line(event, count)
    assert hot_index_rebuild(event_id=event.pk)
    batch = ManualAdmission(count=500, actor="bench")
    while QueueEntry.objects.filter(event=event, status="waiting").exists():
        assert admission_run(event_id=event.pk, now=timezone.now(), manual=batch).admitted
    admitted = QueueEntry.objects.filter(event=event, status="admitted").select_related("tier")
    now = timezone.now()
    path.write_text("".join(entry_pass(e, event=event, now=now).token + "\n" for e in admitted))


def index_bytes_per_entry(event_id: int, count: int) -> float:
    from queueing.line.reads import event_layout

    client = hot_client()  # the settings' Redis: bench/unit_costs.py runs on its own
    layout = event_layout(event_id, fresh=True)
    names = [keys.heartbeats(event_id), keys.prequeue(event_id)] + [
        keys.tier_queue(event_id, t.id) for t in layout.tiers
    ]
    used = sum(client.memory_usage(name, samples=0) or 0 for name in names)
    return used / count
