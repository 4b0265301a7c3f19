"""The line's side of the Queue-it surface (docs/queueit.md): which on-sale a connector's
queue URL names, the token an admitted fan takes back to the shop, and ending a session
from the connector's cancel URL. The HTTP side is queueing/web/queueit.py; the wire format
queueing/rules/queueit_token.py."""

from __future__ import annotations

import hmac
import uuid
from datetime import datetime, timedelta

from django.db.models import CharField, Value
from django.db.models.functions import Coalesce, Lower, NullIf

from events.models import Event
from events.validation import QUEUEIT_CUSTOMER_ID_RE, QUEUEIT_EVENT_ID_RE
from queueing.line.sessions import session_end
from queueing.models import AuditAction, QueueEntry
from queueing.rules.queueit_token import RedirectType, token_mint
from queueing.rules.states import EntryStatus

# An entry admitted in its join (safety net, passthrough, a free shop) has the join's time as
# its admission time: ``rt_safetynet``; anyone admitted later waited: ``rt_queue``. The
# connector only stores it in its cookie; a join admitted a moment late (an admission run's
# clock ahead) is called ``queue``, which costs nothing.
STRAIGHT_THROUGH = timedelta(0)


def _customer_id_valid(customer_id: str) -> bool:
    """Whether ``customer_id`` could be stored at all: anything else (too long, NUL, other
    characters) names no on-sale, and is never sent to PostgreSQL."""
    return bool(customer_id) and QUEUEIT_CUSTOMER_ID_RE.match(customer_id) is not None


def queueit_event(customer_id: str, event_id: str) -> Event | None:
    """The on-sale whose Queue-it customer id is ``customer_id`` and whose Queue-it event
    id (the slug in lower case by default) is ``event_id``, both compared exactly; None when
    there is none, or when it has no secret key (it could not sign a token the shop takes).
    One query on the unique index of the pair (events.models, event_queueit_ids_unique)."""
    if not _customer_id_valid(customer_id) or not event_id:
        return None
    if QUEUEIT_EVENT_ID_RE.match(event_id) is None:
        return None
    return (
        Event.objects.annotate(
            effective_queueit_id=Coalesce(
                NullIf("queueit_event_id", Value("")), Lower("slug"), output_field=CharField()
            )
        )
        .filter(queueit_customer_id=customer_id, effective_queueit_id=event_id)
        .exclude(queueit_secret_key="")
        .first()
    )


def queueit_customer_on_sales(customer_id: str, api_key: str) -> list[Event]:
    """The on-sales of ``customer_id`` whose Queue-it secret key is ``api_key`` (an
    integration config uses one key), oldest first; none without a key."""
    if not _customer_id_valid(customer_id) or not api_key:
        return []
    candidates = Event.objects.filter(queueit_customer_id=customer_id).exclude(
        queueit_secret_key=""
    )
    return [
        event
        for event in candidates.order_by("created_at", "id")
        if hmac.compare_digest(event.queueit_secret_key.encode(), api_key.encode())
    ]


def handover_token(*, event: Event, entry_id: int, now: datetime) -> str | None:
    """The ``queueittoken`` of an admitted entry: ``q_`` is its ticket id (the pass's
    ``sub``), ``rt_`` says whether the fan waited. None if the entry is not admitted."""
    row = (
        QueueEntry.objects.filter(pk=entry_id, event=event, status=EntryStatus.ADMITTED)
        .values_list("public_id", "joined_at", "admitted_at")
        .first()
    )
    if row is None:
        return None
    public_id, joined_at, admitted_at = row
    waited = admitted_at is None or admitted_at - joined_at > STRAIGHT_THROUGH
    return token_mint(
        event_id=event.queueit_event_id_effective,
        queue_id=public_id,
        now=now.timestamp(),
        redirect_type=RedirectType.QUEUE if waited else RedirectType.SAFETY_NET,
        secret_key=event.queueit_secret_key,
    )


def entry_public_id(entry_id: int, event: Event) -> uuid.UUID | None:
    return (
        QueueEntry.objects.filter(pk=entry_id, event=event)
        .values_list("public_id", flat=True)
        .first()
    )


def session_cancel(*, event: Event, queue_id: uuid.UUID, now: datetime) -> bool:
    """The connector's cancel action: the shop is done with the fan of ticket ``queue_id``.
    Ends an admitted session as ``completed`` (audited as the shop's ``passes/complete``
    is, by actor ``queueit-cancel``) and frees its slot at once. True if this call ended it;
    idempotent, and a ticket of another on-sale or one not in the shop changes nothing."""
    entry_id = (
        QueueEntry.objects.filter(public_id=queue_id, event=event)
        .values_list("pk", flat=True)
        .first()
    )
    if entry_id is None:
        return False
    return session_end(
        event_id=event.id,
        entry_id=entry_id,
        to=EntryStatus.COMPLETED,
        action=AuditAction.COMPLETED,
        actor="queueit-cancel",
        now=now,
    )
