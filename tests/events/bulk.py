"""Many on-sales at once, for tests of lists that must stay cheap at a thousand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from events.models import Event, EventControl, Tier
from queueing.models import AuditChainHead
from staff.services import DEFAULT_TIER_NAME


def bulk_events(fields: list[dict[str, Any]]) -> list[Event]:
    """On-sales as event_create leaves them (a default tier, the start of an audit chain), in
    three queries however many there are."""
    events = Event.objects.bulk_create(
        Event(name=f"On-sale {f['slug']}", target_url="https://shop.example/", **f) for f in fields
    )
    Tier.objects.bulk_create(
        Tier(event=event, name=DEFAULT_TIER_NAME, is_default=True) for event in events
    )
    AuditChainHead.objects.bulk_create(AuditChainHead(event=event) for event in events)
    return events


def spread(count: int, *, now: datetime, prefix: str = "sale") -> list[dict[str, Any]]:
    """``count`` on-sales by turns live (open), upcoming, ended (closed by staff)."""
    hour = timedelta(hours=1)
    kinds = (
        {"starts_at": now - hour},
        {"prequeue_opens_at": now + hour, "starts_at": now + 2 * hour},
        {"control": EventControl.CLOSED, "closed_at": now - hour},
    )
    return [{"slug": f"{prefix}-{n:04d}", **kinds[n % 3]} for n in range(count)]


def bulk_started(kind: str, count: int, **fields: Any) -> list[Event]:
    """``count`` on-sales ``<kind>-<n>`` whose line has started (no start due), with ``fields``."""
    now = datetime.now(tz=UTC)
    return bulk_events([{"slug": f"{kind}-{i}", "started_at": now, **fields} for i in range(count)])
