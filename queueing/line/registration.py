"""Registering for a draw (docs/api.md, "Registration and the draw"): staff set an on-sale's
registration window; fans register with an e-mail address they confirm by a mailed link, or
with an identity their shop signed. One registration per identity and on-sale: a second
attempt is answered with the first (the unique constraint decides, not a read before).

Every registration and confirmation is audited on the on-sale's root chain, with the
registration's published hash and never the address.

The mails speak the language the fan registered in (``Registration.language``: the page's,
or the API request's), as the turn mail speaks its page's. The language is not personal data:
it stays when the address is erased.

Over 350 lines on purpose: the window, both identity routes, the mailed link and its mail are
one contract (docs/api.md, "Registration and the draw"), read in one place.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext

from events.models import Event, Tier
from queueing.line.followups import registration_mail_soon
from queueing.line.joining import tiers_for_access_codes
from queueing.line.turn_mail import validate_mailbox
from queueing.models import (
    AuditAction,
    Invitation,
    Registration,
    RegistrationStatus,
    RegistrationWindow,
)
from queueing.records.audit import audit_append
from queueing.rules.errors import (
    DrawDone,
    EventClosed,
    EventNotOpen,
    InvalidInput,
    NotAuthorized,
    QueueError,
    RegistrationLinkInvalid,
)
from queueing.rules.registrations import (
    EMAIL_MAX_LENGTH,
    ShopTokenInvalid,
    confirm_token,
    confirm_token_id,
    confirm_token_valid,
    email_identity,
    identity_hash,
    invitation_code,
    registration_hash,
    shop_identity,
    shop_token_verify,
)

logger = logging.getLogger(__name__)

WINDOW_FIELDS = ("opens_at", "closes_at", "winners", "waitlist", "invitation_hours")


def registration_window_set(
    *, event: Event, actor: str, now: datetime, fields: dict[str, Any]
) -> RegistrationWindow:
    """Create or change the on-sale's registration window (``WINDOW_FIELDS`` and the
    write-only ``shop_key``), audited with the shop key named as set, never shown."""
    with transaction.atomic():
        window = RegistrationWindow.objects.select_for_update().filter(event=event).first()
        if window is None:
            window = RegistrationWindow(event=event, created_at=now)
        elif window.drawn_at is not None:
            raise DrawDone()
        for name, value in fields.items():
            if name not in (*WINDOW_FIELDS, "shop_key"):
                raise ValueError(f"unknown registration window field: {name}")
            setattr(window, name, value)
        window.updated_at = now
        window.full_clean(exclude=["event"])
        window.save()
        audit_append(
            event_id=event.id,
            action=AuditAction.REGISTRATION_WINDOW_SET,
            actor=actor,
            at=now,
            data={
                **{name: _audit_value(getattr(window, name)) for name in WINDOW_FIELDS},
                "shop_key": "set" if window.shop_key else "",
            },
        )
    return window


def _audit_value(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


@dataclass(frozen=True)
class Registered:
    registration: Registration
    tier: str
    hash: str
    created: bool  # False: the identity had registered already, this is that registration
    # The registration's invitation, to one who proved to be its registrant (a shop token
    # signed again, the mailed link opened again): its code, expiry and status.
    invitation: InvitationView | None = None


@dataclass(frozen=True)
class InvitationView:
    code: str
    expires_at: datetime
    status: str


def _as_registered(registration: Registration) -> Registered:
    return Registered(
        registration=registration,
        tier=registration.tier.name,
        hash=registration.public_hash,
        created=False,
        invitation=_invitation_view(registration),
    )


def _invitation_view(registration: Registration) -> InvitationView | None:
    invitation = Invitation.objects.filter(registration=registration).first()
    if invitation is None:
        return None
    window = RegistrationWindow.objects.only("identity_key").get(event_id=registration.event_id)
    return InvitationView(
        code=invitation_code(window.identity_key, invitation.id),
        expires_at=invitation.expires_at,
        status=invitation.status,
    )


def _window_open(event: Event, now: datetime, *, lock: bool = False) -> RegistrationWindow:
    """The window, open at ``now``. With ``lock``, held shared until the commit: the draw
    takes it alone, so no registration commits into a list already frozen."""
    if lock:
        # FOR SHARE: registrations do not wait for each other here, only the draw for them.
        table = RegistrationWindow._meta.db_table
        found = RegistrationWindow.objects.raw(
            f"SELECT * FROM {table} WHERE event_id = %s FOR SHARE", [event.pk]
        )
        window = next(iter(found), None)
    else:
        window = RegistrationWindow.objects.filter(event=event).first()
    if window is None:
        raise EventNotOpen("This on-sale takes no registrations.")
    if now < window.opens_at:
        raise EventNotOpen("Registration for this on-sale has not opened yet.")
    if now >= window.closes_at or window.drawn_at is not None:
        raise EventClosed("Registration for this on-sale has closed.")
    return window


def _tier(event: Event, access_code: str | None) -> Tier:
    found = tiers_for_access_codes(event, [access_code])[access_code]
    if isinstance(found, QueueError):
        raise found
    return found


def registration_create(
    *,
    event: Event,
    now: datetime,
    email: str | None = None,
    shop_token: str | None = None,
    access_code: str | None = None,
    language: str = "",
) -> Registered:
    """Register one identity: an address (pending until its link is opened; the link is
    mailed after the commit) or a shop's signed account (confirmed at once). ``language``
    (a code of ``LANGUAGES``; "" for the room's own) is the one its mails speak; an identity
    that registers again keeps the language it first registered in."""
    if (email is None) == (shop_token is None):
        raise InvalidInput("Give either an email or a shop_token.")
    if shop_token is not None:
        drawn = _drawn_shop_registration(event=event, shop_token=shop_token, now=now)
        if drawn is not None:
            return drawn
    window = _window_open(event, now)
    if email is not None:
        address = email.strip().lower()
        try:
            if len(address) > EMAIL_MAX_LENGTH:
                raise ValidationError("too long")
            validate_mailbox(address)
        except ValidationError:
            raise InvalidInput("That is not an e-mail address.") from None
        identity, route, status = email_identity(address), "email", RegistrationStatus.PENDING
    else:
        assert shop_token is not None
        try:
            claims = shop_token_verify(shop_token, key=window.shop_key, slug=event.slug, now=now)
        except ShopTokenInvalid as exc:
            raise NotAuthorized(str(exc)) from None
        identity, route, status = shop_identity(claims.sub), "shop", RegistrationStatus.CONFIRMED
        address = ""
    tier = _tier(event, access_code)
    digest = identity_hash(window.identity_key, identity)
    registration_id = uuid.uuid4()
    published = registration_hash(registration_id, tier.name, digest)
    registration = Registration(
        id=registration_id,
        public_hash=published,
        event=event,
        tier=tier,
        identity_hash=digest,
        route=route,
        email=address,
        language=language[:8],
        status=status,
        created_at=now,
        confirmed_at=now if status == RegistrationStatus.CONFIRMED else None,
    )
    try:
        with transaction.atomic():
            _window_open(event, now, lock=True)
            registration.save(force_insert=True)
            audit_append(
                event_id=event.id,
                action=AuditAction.REGISTERED,
                actor=f"registration:{route}",
                at=now,
                data={
                    "registration": str(registration.id),
                    "tier": tier.name,
                    "route": route,
                    "status": status.value,
                    "hash": published,
                },
            )
            if route == "email":
                transaction.on_commit(lambda: _mail_soon(registration_id))
    except IntegrityError:
        existing = Registration.objects.select_related("tier").get(
            event=event, identity_hash=digest
        )
        if route == "email":
            _confirmation_mailed_again(existing, now=now)
        return Registered(
            registration=existing,
            tier=existing.tier.name,
            hash=existing.public_hash,
            created=False,
        )
    return Registered(registration=registration, tier=tier.name, hash=published, created=True)


def _drawn_shop_registration(*, event: Event, shop_token: str, now: datetime) -> Registered | None:
    """After the draw a shop's fan, signed in again, is answered their registration with its
    invitation (they have no mail to receive it by); None while registration is open."""
    window = RegistrationWindow.objects.filter(event=event, drawn_at__isnull=False).first()
    if window is None:
        return None
    try:
        claims = shop_token_verify(shop_token, key=window.shop_key, slug=event.slug, now=now)
    except ShopTokenInvalid as exc:
        raise NotAuthorized(str(exc)) from None
    digest = identity_hash(window.identity_key, shop_identity(claims.sub))
    existing = (
        Registration.objects.select_related("tier")
        .filter(event=event, identity_hash=digest)
        .first()
    )
    if existing is None:
        raise EventClosed("Registration for this on-sale has closed.")
    return _as_registered(existing)


# A pending address that registers again is mailed its link again, at most this often (and
# within the join's budget per address): the first mail may have been lost or filtered.
MAIL_AGAIN_AFTER = timedelta(minutes=5)


def _confirmation_mailed_again(registration: Registration, *, now: datetime) -> None:
    """The confirmation link sent again to a pending address that registers again, once the
    last one is ``MAIL_AGAIN_AFTER`` old: released by a compare-and-set on when it was sent,
    so that two such requests send one mail."""
    sent_at = registration.confirm_mail_sent_at
    if registration.status != RegistrationStatus.PENDING or sent_at is None:
        return  # confirmed (nothing to confirm), or its first mail is still on its way
    if now - sent_at < MAIL_AGAIN_AFTER:
        return
    released = Registration.objects.filter(
        id=registration.id, status=RegistrationStatus.PENDING, confirm_mail_sent_at=sent_at
    ).update(confirm_mail_sent_at=None)
    if released:
        _mail_soon(registration.id)


def _mail_soon(registration_id: uuid.UUID) -> None:
    try:
        registration_mail_soon(str(registration_id))
    except Exception:  # the broker is away: the fan registers again to be sent the link
        logger.warning(
            "could not ask for the confirmation mail of %s", registration_id, exc_info=True
        )


def registration_of_link(*, token: str) -> Registered:
    """What the mailed link's page shows before anything is pressed: the registration as it
    stands, confirming nothing (mail scanners open links by themselves)."""
    registration_id = confirm_token_id(token)
    if registration_id is None:
        raise RegistrationLinkInvalid()
    registration = (
        Registration.objects.select_related("tier", "event__registration_window")
        .filter(id=registration_id)
        .first()
    )
    if registration is None or not confirm_token_valid(
        registration.event.registration_window.identity_key, token
    ):
        raise RegistrationLinkInvalid()
    return _as_registered(registration)


def registration_confirm(*, token: str, now: datetime) -> Registered:
    """Confirm the address a mailed link was sent to (again: the same answer, nothing new)."""
    registration = registration_of_link(token=token).registration
    with transaction.atomic():
        if registration.status == RegistrationStatus.PENDING:
            _window_open(registration.event, now, lock=True)
        # Compare-and-set: two clicks on the link confirm (and audit) once.
        confirmed = Registration.objects.filter(
            id=registration.id, status=RegistrationStatus.PENDING
        ).update(status=RegistrationStatus.CONFIRMED, confirmed_at=now)
        if confirmed:
            audit_append(
                event_id=registration.event_id,
                action=AuditAction.REGISTRATION_CONFIRMED,
                actor="registration:email",
                at=now,
                data={"registration": str(registration.id)},
            )
    registration.refresh_from_db(fields=["status", "confirmed_at", "outcome", "draw_rank"])
    return _as_registered(registration)


def registration_mail_send(*, registration_id: str, now: datetime) -> bool:
    """Mail a pending registration its confirmation link, once (claimed by compare-and-set
    before sending); False when another run sent it or nothing is to be sent."""
    claimed = Registration.objects.filter(
        id=registration_id,
        status=RegistrationStatus.PENDING,
        confirm_mail_sent_at__isnull=True,
    ).exclude(email="")
    if not claimed.update(confirm_mail_sent_at=now):
        return False
    registration = Registration.objects.select_related("event__registration_window").get(
        id=registration_id
    )
    event = registration.event
    token = confirm_token(event.registration_window.identity_key, registration.id)
    url = settings.WR_PUBLIC_URL + reverse("registration-status", args=[event.slug, token])
    closes_at = event.registration_window.closes_at
    try:
        with translation.override(registration.language or settings.LANGUAGE_CODE):
            send_mail(
                subject=gettext("Confirm your registration: %(event)s") % {"event": event.name},
                message=gettext(
                    "You registered for the draw of %(event)s.\n\n"
                    "Open this link to confirm your address (until %(until)s UTC):\n%(url)s\n\n"
                    "If you did not register, ignore this mail: nothing happens without the link."
                )
                % {"event": event.name, "until": closes_at.strftime("%Y-%m-%d %H:%M"), "url": url},
                from_email=None,
                recipient_list=[registration.email],
            )
    except Exception:  # a refused mail: released, so that the task's retry may send it
        Registration.objects.filter(id=registration_id).update(confirm_mail_sent_at=None)
        raise
    return True
