"""Handing passes to admitted fans, and the shop's side: verify and complete."""

from __future__ import annotations

import hmac
import uuid
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.db import transaction

from events.models import Event
from queueing.line.followups import admission_soon
from queueing.line.views import IssuedPass
from queueing.models import AuditAction, PassKey, QueueEntry
from queueing.passes.signing import (
    PassClaims,
    PassInvalid,
    pass_decode,
    pass_id_for,
    pass_issue,
)
from queueing.records.transitions import transition_audited
from queueing.rules.errors import InvalidInput, NotAuthorized
from queueing.rules.gate import PASS_QUERY_PARAMETER
from queueing.rules.return_urls import admitted_destination
from queueing.rules.states import EntryStatus


def with_pass(target_url: str, token: str) -> str:
    parts = urlsplit(target_url)
    query = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if k != PASS_QUERY_PARAMETER
    ]
    query.append((PASS_QUERY_PARAMETER, token))
    return urlunsplit(parts._replace(query=urlencode(query)))


def entry_pass(
    entry: QueueEntry, *, event: Event, now: datetime, key: PassKey | None = None
) -> IssuedPass:
    """The admitted fan's pass; the first hand-over is recorded (it claims the slot).
    ``key``: the signing key, for callers handing over many passes at once."""
    assert entry.admitted_at is not None and entry.pass_expires_at is not None
    token = pass_issue(
        event_slug=event.slug,
        ticket_id=entry.public_id,
        tier=entry.tier.name,
        admitted_at=entry.admitted_at,
        expires_at=entry.pass_expires_at,
        now=now,
        key=key,
    )
    if entry.pass_issued_at is None:
        QueueEntry.objects.filter(pk=entry.pk, pass_issued_at__isnull=True).update(
            pass_issued_at=now
        )
    return IssuedPass(
        token=token,
        expires_at=entry.pass_expires_at,
        redirect_url=with_pass(
            admitted_destination(
                return_url=entry.return_url,
                target_url=event.target_url,
                allowed_hosts=event.allowed_return_hosts,
            ),
            token,
        ),
    )


@dataclass(frozen=True)
class PassVerdict:
    valid: bool
    reason: str | None = None
    event: str | None = None
    ticket_id: uuid.UUID | None = None
    expires_at: datetime | None = None


_ENDED_REASON = {
    EntryStatus.COMPLETED: "completed",
    EntryStatus.EXPIRED: "expired",
    EntryStatus.ABANDONED: "revoked",
    EntryStatus.REVOKED: "revoked",
}


def pass_verify(*, token: str, now: datetime, event_slug: str | None = None) -> PassVerdict:
    try:
        claims = pass_decode(token, now=now)
    except PassInvalid as invalid:
        return PassVerdict(valid=False, reason=invalid.reason)
    if event_slug is not None and claims.event_slug != event_slug:
        return PassVerdict(valid=False, reason="wrong_event", event=claims.event_slug)
    session = (
        QueueEntry.objects.filter(public_id=claims.ticket_id, event__slug=claims.event_slug)
        .values_list("status", "reentered_at", "admitted_at")
        .first()
    )
    status = session[0] if session else None
    if status == EntryStatus.ADMITTED and not _of_current_session(claims, *session[1:]):
        return PassVerdict(valid=False, reason="revoked", event=claims.event_slug)
    if status != EntryStatus.ADMITTED:
        reason = _ENDED_REASON.get(EntryStatus(status), "revoked") if status else "revoked"
        return PassVerdict(valid=False, reason=reason, event=claims.event_slug)
    return PassVerdict(
        valid=True,
        event=claims.event_slug,
        ticket_id=claims.ticket_id,
        expires_at=claims.expires_at,
    )


def _of_current_session(
    claims: PassClaims, reentered_at: datetime | None, admitted_at: datetime | None
) -> bool:
    """False for a pass of a session that ended before the fan went back in line: once they
    are admitted again, that old pass (still within its ``exp`` if the shop abandoned the
    session early) must not count as theirs, nor end the new session. Each admission's
    passes carry their own ``jti``."""
    if reentered_at is None:
        return True  # one session only: every pass of this entry is of it
    return admitted_at is not None and hmac.compare_digest(
        claims.pass_id, pass_id_for(claims.ticket_id, admitted_at)
    )


_OUTCOMES = {
    "completed": (EntryStatus.COMPLETED, AuditAction.COMPLETED),
    "abandoned": (EntryStatus.ABANDONED, AuditAction.ABANDONED),
}


def pass_complete(*, token: str, outcome: str, integration_key: str, now: datetime) -> bool:
    """The shop is done with a fan. True if this call ended the session (idempotent)."""
    if outcome not in _OUTCOMES:
        raise InvalidInput("outcome must be 'completed' or 'abandoned'.")
    try:
        # An expired pass may still be reported: the answer is the same, nothing changes.
        claims = pass_decode(token, now=now, verify_exp=False)
    except PassInvalid as invalid:
        raise InvalidInput(f"The pass is not valid ({invalid.reason}).") from invalid
    event = Event.objects.filter(slug=claims.event_slug).first()
    if event is None or not hmac.compare_digest(
        integration_key.encode(), event.integration_key.encode()
    ):
        raise NotAuthorized()
    entry = QueueEntry.objects.filter(public_id=claims.ticket_id, event=event).first()
    if entry is None or not _of_current_session(claims, entry.reentered_at, entry.admitted_at):
        return False
    new_status, action = _OUTCOMES[outcome]
    with transaction.atomic():
        moved = transition_audited(
            event_id=event.id,
            ids=[entry.id],
            to=new_status,
            expected=(EntryStatus.ADMITTED,),
            now=now,
            action=action,
            actor="shop",
            data=lambda m: {},
        )
        if not moved:
            return False
        # The slot is free: admit the next fan now rather than at the next tick. Robust: if
        # the broker is down the completion still stands and the next tick admits.
        transaction.on_commit(lambda: admission_soon(event.id), robust=True)
    return True
