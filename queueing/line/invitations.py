"""Invitations (docs/api.md, "Invitations"): the draw's winners each get a single-use code,
bound to their registration, that joins them to the line in their tier; one unused past its
``invitation_hours`` lapses, and the next waitlisted fan of the tier is invited in its place,
in draw order.

The code is derived from the window's key (``rules/registrations.invitation_code``), only its
hash stored. Using it joins the line as the registration's own identity
(``registration:<id>``), so the one live ticket per identity holds it to one place however
often it is presented; the invitation records that entry, and once used it joins nobody else.

Lapses cost per lapsed invitation: the dispatch's one probe for the whole room
(``line/draw.py``) sees an unused invitation past its time through a partial index of the
unused ones, and only then asks for a run, which lapses them a chunk at a time.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from events.models import AccessCode, Event
from queueing.line.joining import JoinResult, entry_join
from queueing.line.outcome_mails import registration_mails_ask
from queueing.models import (
    AuditAction,
    Invitation,
    InvitationStatus,
    QueueEntry,
    Registration,
    RegistrationWindow,
)
from queueing.records.audit import AuditItem, audit_append, audit_append_many
from queueing.rules.errors import InvalidAccessCode
from queueing.rules.registrations import invitation_code, invitation_code_hash
from queueing.rules.states import LIVE

LAPSE_CHUNK = 500
_LIVE = [status.value for status in LIVE]


def invitations_issue(
    *, window: RegistrationWindow, registrations: Sequence[Registration], now: datetime
) -> list[Invitation]:
    """Invite these registrations (in the caller's transaction), one audit record each."""
    expires_at = now + timedelta(hours=window.invitation_hours)
    invitations = []
    for registration in registrations:
        invitation_id = uuid.uuid4()
        code = invitation_code(window.identity_key, invitation_id)
        invitations.append(
            Invitation(
                id=invitation_id,
                event_id=window.event_id,
                registration=registration,
                code_hash=invitation_code_hash(code),
                status=InvitationStatus.SENT,
                created_at=now,
                expires_at=expires_at,
            )
        )
    Invitation.objects.bulk_create(invitations, batch_size=1000)
    if invitations:
        audit_append_many(
            event_id=window.event_id,
            actor="system:draw",
            at=now,
            items=[
                AuditItem(
                    action=AuditAction.INVITED,
                    data={
                        "registration": str(i.registration.id),
                        "hash": i.registration.public_hash,
                        "expires_at": expires_at.isoformat(),
                    },
                )
                for i in invitations
            ],
        )
    return invitations


def registration_identity(registration_id: uuid.UUID) -> str:
    """The line's identity of an invited fan: one live ticket per registration."""
    return hashlib.sha256(f"registration:{registration_id}".encode()).hexdigest()


def _tier_code(registration: Registration) -> str | None:
    """The join's way into the registration's tier: none for the default tier, else one of
    its access codes (a tier reachable by neither is refused as a wrong code)."""
    if registration.tier.is_default:
        return None
    code = AccessCode.objects.filter(tier=registration.tier).values_list("code", flat=True)
    return code.first() or ""


@dataclass(frozen=True)
class Redeemed:
    result: JoinResult
    identity: str


def invitation_redeem(*, event: Event, code: str, now: datetime) -> Redeemed:
    """Join the line with an invitation's code: its registration's ticket, the same one for
    as long as it is live however often the code is used; refused once used for an entry that
    ended, lapsed, or unknown.

    An unused invitation is claimed (sent -> used, in its time) before the join, not after: a
    lapse run that comes between them then finds it used, and invites nobody in its place for
    a fan who came in time. A join that fails gives the claim back (it may lapse then). Of two
    uses at once one claims; both join as the registration's one identity, hence one ticket."""
    invitation = (
        Invitation.objects.select_related("registration__tier")
        .filter(event=event, code_hash=invitation_code_hash(code))
        .first()
    )
    # Refused as a wrong access code: the code is one, for one fan.
    if invitation is None or invitation.status == InvitationStatus.LAPSED:
        raise InvalidAccessCode("That invitation is not valid (unknown, or it lapsed).")
    if invitation.status == InvitationStatus.SENT and now >= invitation.expires_at:
        raise InvalidAccessCode("That invitation has lapsed.")
    registration = invitation.registration
    identity = registration_identity(registration.id)
    claimed = False
    if invitation.status == InvitationStatus.SENT:
        claimed = bool(
            Invitation.objects.filter(
                id=invitation.id, status=InvitationStatus.SENT, expires_at__gt=now
            ).update(status=InvitationStatus.USED, used_at=now)
        )
        if not claimed:
            invitation.refresh_from_db(fields=["status", "entry"])
            if invitation.status != InvitationStatus.USED:
                raise InvalidAccessCode("That invitation has lapsed.")
    # Used already (an entry recorded; none yet while the use that claimed it joins): only
    # while that ticket is live.
    if (
        not claimed
        and invitation.entry_id is not None
        and not QueueEntry.objects.filter(pk=invitation.entry_id, status__in=_LIVE).exists()
    ):
        raise InvalidAccessCode("That invitation has been used.")
    try:
        result = entry_join(
            event=event, identity=identity, access_code=_tier_code(registration), now=now
        )
    except BaseException:
        if claimed:
            Invitation.objects.filter(
                id=invitation.id, status=InvitationStatus.USED, entry__isnull=True
            ).update(status=InvitationStatus.SENT, used_at=None)
        raise
    if claimed:
        with transaction.atomic():
            # The identity's latest ticket is the one the join answered (live or, in the
            # instant since, ended): recorded, so that the code joins nobody once it ends.
            entry = (
                QueueEntry.objects.filter(event=event, identity=identity)
                .order_by("-id")
                .only("id", "public_id")
                .first()
            )
            Invitation.objects.filter(id=invitation.id).update(entry=entry)
            audit_append(
                event_id=event.id,
                action=AuditAction.INVITATION_USED,
                actor="registration:invitation",
                at=now,
                ticket_id=entry.public_id if entry is not None else None,
                data={"registration": str(registration.id), "hash": registration.public_hash},
            )
    return Redeemed(result=result, identity=identity)


def invitations_lapse(*, now: datetime) -> int:
    """Lapse the unused invitations past their time, a chunk per transaction, each inviting
    the next waitlisted registration of its tier not invited yet; how many lapsed."""
    lapsed = 0
    while True:
        with transaction.atomic():
            chunk = list(
                Invitation.objects.select_for_update(skip_locked=True)
                .select_related("registration")
                .filter(status=InvitationStatus.SENT, expires_at__lte=now)
                .order_by("expires_at")[:LAPSE_CHUNK]
            )
            if not chunk:
                return lapsed
            Invitation.objects.filter(id__in=[i.id for i in chunk]).update(
                status=InvitationStatus.LAPSED
            )
            by_event: dict[int, list[Invitation]] = {}
            for invitation in chunk:
                by_event.setdefault(invitation.event_id, []).append(invitation)
            for event_id, invitations in by_event.items():
                audit_append_many(
                    event_id=event_id,
                    actor="system:draw",
                    at=now,
                    items=[
                        AuditItem(
                            action=AuditAction.INVITATION_LAPSED,
                            data={"registration": str(i.registration_id)},
                        )
                        for i in invitations
                    ],
                )
                _invite_next(event_id=event_id, lapsed=invitations, now=now)
                registration_mails_ask(event_id)
            lapsed += len(chunk)


def _invite_next(*, event_id: int, lapsed: Sequence[Invitation], now: datetime) -> None:
    window = RegistrationWindow.objects.select_for_update().get(event_id=event_id)
    per_tier: dict[int, int] = {}
    for invitation in lapsed:
        per_tier[invitation.registration.tier_id] = (
            per_tier.get(invitation.registration.tier_id, 0) + 1
        )
    following: list[Registration] = []
    for tier_id, count in per_tier.items():
        following += list(
            Registration.objects.filter(
                event_id=event_id,
                tier_id=tier_id,
                outcome="waitlisted",
                invitation__isnull=True,
            ).order_by("draw_rank")[:count]
        )
    invitations_issue(window=window, registrations=following, now=now)


def invitation_of(*, registration: Registration) -> Invitation | None:
    return Invitation.objects.filter(registration=registration).first()


def invitation_code_for(*, window: RegistrationWindow, invitation: Invitation) -> str:
    return invitation_code(window.identity_key, invitation.id)
