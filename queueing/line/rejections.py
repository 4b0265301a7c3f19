"""Wrong access codes in the audit trail, for staff to see guessing (docs/api.md, auditors'
``rejected``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from django.db import DatabaseError, transaction

from events.validation import access_code_tag
from queueing.models import AuditAction
from queueing.records.audit import AuditItem, audit_append_many

logger = logging.getLogger(__name__)


def wrong_codes_audit(*, event_id: int, tried: Sequence[tuple[datetime, str]]) -> None:
    """A ``rejected`` record per wrong code tried (when, the code as typed), with a keyed tag
    of the code, never the code itself.

    In a transaction of its own, before the batch's joins commit: those joins do not hold the
    chain head any longer for it, and only batches with a wrong code pay for it. The
    wrong-code budget per address (queueing/web/abuse.py) bounds how many records one address
    can have written. A rejection changes nothing, so failing to record it does not fail the
    batch's joins."""
    if not tried:
        return
    try:
        with transaction.atomic():
            audit_append_many(
                event_id=event_id,
                actor="fan",
                at=tried[0][0],
                items=[
                    AuditItem(
                        action=AuditAction.REJECTED,
                        at=at,
                        data={"reason": "invalid_access_code", "code_tag": access_code_tag(code)},
                    )
                    for at, code in tried
                ],
            )
    except DatabaseError:
        logger.warning("could not audit %d wrong access codes of event %s", len(tried), event_id)
