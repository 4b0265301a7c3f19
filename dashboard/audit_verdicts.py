"""Each on-sale's audit trail checked a stretch at a time, and the verdict kept.

A trail can hold millions of records, so the auditors' page never recomputes one when it is
viewed: it shows the verdict kept here (``AuditVerdict``). Checking goes on from the last
record found intact in each chain (``audit_event_verify``'s ``after``, whose hashes must not
have changed meanwhile), at most ``WR_AUDIT_VERIFY_MAX`` records a time over all the
on-sale's chains (its root chain, then its lanes'); a broken trail, or one asked for "from
the start", is read again from seq 1. ``manage.py verify_audit`` checks a whole trail and
keeps its verdict too.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction

from dashboard.models import AuditVerdict
from events.models import Event
from queueing.records.audit_verify import EventVerdict, Progress, audit_event_verify
from queueing.webhooks.emitting import webhook_emit


def _progress(kept: AuditVerdict) -> dict[int | None, Progress]:
    lanes = {
        int(lane): Progress(seq=done["checked_seq"], hash=done["checked_hash"])
        for lane, done in kept.lanes.items()
    }
    return {None: Progress(seq=kept.checked_seq, hash=kept.checked_hash), **lanes}


def _first_bad_seq(verdict: EventVerdict) -> int | None:
    if not verdict.root.ok:
        return verdict.root.first_bad_seq
    if verdict.root_problem:
        return verdict.bad_root_seq
    lane = verdict.bad_lane
    return verdict.lanes[lane].first_bad_seq if lane is not None else None


def verdict_check(
    event: Event, *, now: datetime, from_start: bool = False, limit: int | None = None
) -> tuple[EventVerdict, AuditVerdict]:
    """Check ``event``'s trail from where its last check stopped (or from the start), at most
    ``limit`` records (``WR_AUDIT_VERIFY_MAX`` unless given; 0: no limit), and keep the
    verdict. Two checks at once each keep theirs; the later one stays, and either is true."""
    kept = AuditVerdict.objects.filter(event=event).first()
    after = _progress(kept) if kept is not None and kept.ok and not from_start else {}
    most = settings.WR_AUDIT_VERIFY_MAX if limit is None else (limit or None)
    verdict = audit_event_verify(event_id=event.id, after=after, limit=most)
    with transaction.atomic():
        # Read again under its lock: of two checks at once, one tells.
        before = AuditVerdict.objects.select_for_update().filter(event=event).first()
        stored = _verdict_keep(event, verdict, now=now)
        # Told when a trail kept as intact (or never checked) is found broken: once, not at
        # every check that finds it still broken.
        if not verdict.ok and (before is None or before.ok):
            webhook_emit(
                event=event,
                type="onsale.chain_verification_failed",
                now=now,
                data={
                    "problem": stored.problem,
                    "first_bad_seq": stored.first_bad_seq,
                    "lane": stored.first_bad_lane,
                },
            )
    return verdict, stored


def _verdict_keep(event: Event, verdict: EventVerdict, *, now: datetime) -> AuditVerdict:
    root = verdict.root
    stored, _ = AuditVerdict.objects.update_or_create(
        event=event,
        defaults={
            "ok": verdict.ok,
            "checked_seq": root.checked_seq,
            "checked_hash": root.checked_hash,
            "head_seq": root.head_seq,
            "first_bad_seq": _first_bad_seq(verdict),
            "first_bad_id": verdict.first_bad_id,
            "first_bad_lane": verdict.bad_lane,
            "problem": verdict.problem[:200],
            "checked_at": now,
            "lanes": {
                str(lane): {
                    "checked_seq": done.checked_seq,
                    "checked_hash": done.checked_hash,
                    "head_seq": done.head_seq,
                }
                for lane, done in verdict.lanes.items()
            },
        },
    )
    return stored
