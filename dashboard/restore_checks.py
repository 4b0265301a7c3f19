"""Whether a restored database can serve the room: read, never written.

Run against a restore (``manage.py restore_check``; ``scripts/restore_drill.sh`` runs it on
every drill), it says per on-sale how many entries are in each status and whether the whole
audit trail recomputes, and whether every pass-signing key still signs a pass that verifies.
A key that does not is the sign of a restore without its secrets: the pass-key encryption key
or ``DJANGO_SECRET_KEY`` were not restored with the database (docs/operations.md, "Backups and
restores"), and passes signed before the backup would not verify either.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count

from events.models import Event
from queueing.models import PassKey, QueueEntry
from queueing.passes.signing import pass_decode, pass_issue
from queueing.records.audit_verify import audit_event_verify


@dataclass(frozen=True)
class OnSaleCheck:
    slug: str
    entries: dict[str, int]  # status -> count
    chain_ok: bool
    records: int
    problem: str  # what failed in the chain, "" when it holds


@dataclass(frozen=True)
class KeyCheck:
    kid: str
    signs: bool
    problem: str


@dataclass(frozen=True)
class RestoreReport:
    on_sales: list[OnSaleCheck]
    keys: list[KeyCheck]

    @property
    def ok(self) -> bool:
        # No key at all is fit: a room that never signed a pass makes its first when it does.
        return all(sale.chain_ok for sale in self.on_sales) and all(k.signs for k in self.keys)


def _on_sale_check(event: Event) -> OnSaleCheck:
    counts = (
        QueueEntry.objects.filter(event=event)
        .values_list("status")
        .annotate(n=Count("id"))
        .order_by("status")
    )
    # The whole trail, from seq 1: a restore is checked once, not a stretch at a time.
    verdict = audit_event_verify(event_id=event.id)
    problem = verdict.problem or ("" if verdict.ok else f"first bad record {verdict.first_bad_id}")
    return OnSaleCheck(
        slug=event.slug,
        entries=dict(counts),
        chain_ok=verdict.ok,
        records=verdict.records,
        problem=problem,
    )


def _key_check(key: PassKey, *, now: datetime) -> KeyCheck:
    probe = uuid.uuid4()
    try:
        token = pass_issue(
            event_slug="restore-check",
            ticket_id=probe,
            tier="probe",
            admitted_at=now,
            expires_at=now + timedelta(minutes=1),
            now=now,
            key=key,
        )
        signs = pass_decode(token, now=now, keys=[key]).ticket_id == probe
    # Whatever opening the private key raises (a wrong encryption key, a damaged PEM) is
    # the verdict, not a crash of the check.
    except Exception as exc:  # noqa: BLE001
        return KeyCheck(kid=key.kid, signs=False, problem=f"{type(exc).__name__}: {exc}")
    return KeyCheck(kid=key.kid, signs=signs, problem="" if signs else "its pass does not verify")


def restore_report(*, now: datetime) -> RestoreReport:
    """Every on-sale's entries and trail, and every pass-signing key, as restored."""
    return RestoreReport(
        on_sales=[_on_sale_check(event) for event in Event.objects.order_by("id")],
        keys=[_key_check(key, now=now) for key in PassKey.objects.order_by("activates_at", "id")],
    )
