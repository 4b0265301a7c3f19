"""Each on-sale's audit chain checked a stretch at a time, and the verdict kept.

A trail can hold millions of records, so the auditors' page never recomputes one when it is
viewed: it shows the verdict kept here (``AuditVerdict``). Checking goes on from the last
record found intact (``audit_chain_verify``'s ``after_seq``, whose hash must not have changed
meanwhile), at most ``WR_AUDIT_VERIFY_MAX`` records a time; a broken chain, or one asked for
"from the start", is read again from seq 1. ``manage.py verify_audit`` checks a whole chain
and keeps its verdict too.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from dashboard.models import AuditVerdict
from events.models import Event
from queueing.models import GENESIS_HASH
from queueing.records.audit_verify import ChainVerdict, audit_chain_verify


def verdict_check(
    event: Event, *, now: datetime, from_start: bool = False, limit: int | None = None
) -> tuple[ChainVerdict, AuditVerdict]:
    """Check ``event``'s chain from where its last check stopped (or from the start), at most
    ``limit`` records (``WR_AUDIT_VERIFY_MAX`` unless given; 0: no limit), and keep the
    verdict. Two checks at once each keep theirs; the later one stays, and either is true."""
    kept = AuditVerdict.objects.filter(event=event).first()
    after_seq, after_hash = 0, GENESIS_HASH
    if kept is not None and kept.ok and not from_start:
        after_seq, after_hash = kept.checked_seq, kept.checked_hash
    most = settings.WR_AUDIT_VERIFY_MAX if limit is None else (limit or None)
    verdict = audit_chain_verify(
        event_id=event.id, after_seq=after_seq, after_hash=after_hash, limit=most
    )
    stored, _ = AuditVerdict.objects.update_or_create(
        event=event,
        defaults={
            "ok": verdict.ok,
            "checked_seq": verdict.checked_seq,
            "checked_hash": verdict.checked_hash,
            "head_seq": verdict.head_seq,
            "first_bad_seq": verdict.first_bad_seq,
            "first_bad_id": verdict.first_bad_id,
            "problem": verdict.problem[:200],
            "checked_at": now,
        },
    )
    return verdict, stored
