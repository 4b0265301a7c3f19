"""Registering for a draw (queueing/line/registration.py): both identity routes, one
registration per identity, the mailed confirmation link (in the fan's language), the window's
bounds and the audit."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from events.models import AccessCode
from queueing.line.registration import (
    registration_confirm,
    registration_create,
    registration_mail_send,
    registration_of_link,
)
from queueing.models import AuditAction, AuditRecord, Registration
from queueing.records.audit_verify import audit_chain_verify
from queueing.rules.errors import (
    EventClosed,
    EventNotOpen,
    InvalidInput,
    NotAuthorized,
    RegistrationLinkInvalid,
)
from staff.services import TierSpec
from tests.helpers import registration_window_open, shop_token

pytestmark = pytest.mark.django_db


def test_an_address_registers_pending_and_again_answers_the_same(event) -> None:
    registration_window_open(event)
    first = registration_create(event=event, now=timezone.now(), email="Fan@Example.com")
    again = registration_create(event=event, now=timezone.now(), email="fan@example.com ")
    assert first.created and not again.created
    assert again.registration.id == first.registration.id and again.hash == first.hash
    assert first.registration.status == "pending" and first.tier == "General"
    assert Registration.objects.count() == 1


def test_a_shop_identity_registers_confirmed_once_per_account(event) -> None:
    registration_window_open(event)
    now = timezone.now()
    first = registration_create(event=event, now=now, shop_token=shop_token("a1", slug=event.slug))
    again = registration_create(event=event, now=now, shop_token=shop_token("a1", slug=event.slug))
    other = registration_create(event=event, now=now, shop_token=shop_token("a2", slug=event.slug))
    assert first.registration.status == "confirmed" and first.registration.email == ""
    assert again.registration.id == first.registration.id and not again.created
    assert other.registration.id != first.registration.id


def test_a_forged_or_foreign_shop_token_is_refused(event) -> None:
    registration_window_open(event)
    for token in (
        shop_token("a1", slug=event.slug, key="z" * 40),
        shop_token("a1", slug="another"),
        shop_token("a1", slug=event.slug, seconds=-5),
    ):
        with pytest.raises(NotAuthorized):
            registration_create(event=event, now=timezone.now(), shop_token=token)
    assert not Registration.objects.exists()


def test_registration_takes_place_only_inside_its_window(make_event) -> None:
    unset = make_event(slug="unset")
    with pytest.raises(EventNotOpen):
        registration_create(event=unset, now=timezone.now(), email="fan@example.com")
    event = make_event(slug="later")
    now = timezone.now()
    registration_window_open(
        event, opens_at=now + timedelta(hours=1), closes_at=now + timedelta(hours=2)
    )
    with pytest.raises(EventNotOpen):
        registration_create(event=event, now=now, email="fan@example.com")
    with pytest.raises(EventClosed):
        registration_create(event=event, now=now + timedelta(hours=2), email="fan@example.com")


def test_bad_input_is_refused(event) -> None:
    registration_window_open(event)
    now = timezone.now()
    for kwargs in (
        {},
        {"email": "a@example.com", "shop_token": "x"},
        {"email": "not an address"},
        {"email": "x@localhost"},
    ):
        with pytest.raises(InvalidInput):
            registration_create(event=event, now=now, **kwargs)


def test_an_access_code_registers_in_its_tier(make_event) -> None:
    event = make_event(
        slug="tiers",
        tiers=[TierSpec(name="General"), TierSpec(name="Club", priority=1, access_codes=["CLUB1"])],
    )
    registration_window_open(event)
    assert AccessCode.objects.filter(event=event).count() == 1
    club = registration_create(
        event=event, now=timezone.now(), email="a@example.com", access_code="club1"
    )
    general = registration_create(event=event, now=timezone.now(), email="b@example.com")
    assert (club.tier, general.tier) == ("Club", "General")


def test_the_mailed_link_confirms_once_and_the_mail_goes_once(event, mailbox) -> None:
    registration_window_open(event)
    now = timezone.now()
    registered = registration_create(event=event, now=now, email="fan@example.com")
    rid = str(registered.registration.id)
    assert registration_mail_send(registration_id=rid, now=now)
    assert not registration_mail_send(registration_id=rid, now=now)
    (message,) = mailbox.messages
    assert message["To"] == "fan@example.com"
    # The link is the fans' page, which confirms only on its button (web/registration_pages.py).
    link = rf"/e/{event.slug}/register/([^/\s]+)/"
    token = re.search(link, message.get_content()).group(1)
    shown = registration_of_link(token=token)  # what the page shows first: nothing confirmed
    assert shown.registration.status == "pending" and shown.hash == registered.hash
    with pytest.raises(RegistrationLinkInvalid):
        registration_confirm(token=token[:-2] + "00", now=now)
    confirmed = registration_confirm(token=token, now=now)
    assert confirmed.registration.status == "confirmed" and confirmed.hash == registered.hash
    registration_confirm(token=token, now=now)  # a second click: same answer, one record
    assert AuditRecord.objects.filter(action=AuditAction.REGISTRATION_CONFIRMED).count() == 1


def test_the_confirmation_mail_speaks_the_language_registered_in(event, mailbox) -> None:
    window = registration_window_open(event)
    now = timezone.now()
    registered = registration_create(event=event, now=now, email="fan@example.com", language="ja")
    # Registering again in another language answers the first registration, language and all.
    registration_create(event=event, now=now, email="fan@example.com", language="fr")
    assert Registration.objects.get().language == "ja"
    rid = str(registered.registration.id)
    assert registration_mail_send(registration_id=rid, now=now)
    assert not registration_mail_send(registration_id=rid, now=now)
    (message,) = mailbox.messages
    # Stripped: Python's e-mail package folds a subject of one encoded word onto its own line.
    subject = message["Subject"].strip()
    assert subject == f"登録を確認してください\N{FULLWIDTH COLON}{event.name}"
    body = message.get_content()
    assert f"{event.name} の抽選に登録しました。" in body
    assert f"UTC {window.closes_at:%Y-%m-%d %H:%M} まで有効です" in body
    assert f"/e/{event.slug}/register/" in body


def test_the_confirmation_mail_without_a_language_is_in_english(event, mailbox) -> None:
    registration_window_open(event)
    registered = registration_create(event=event, now=timezone.now(), email="fan@example.com")
    registration_mail_send(registration_id=str(registered.registration.id), now=timezone.now())
    (message,) = mailbox.messages
    assert message["Subject"] == f"Confirm your registration: {event.name}"
    assert "Open this link to confirm your address" in message.get_content()


def test_a_refused_mail_is_released_for_the_retry(event, settings) -> None:
    registration_window_open(event)
    registered = registration_create(event=event, now=timezone.now(), email="fan@example.com")
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", 9  # nothing listens there
    with pytest.raises(OSError):
        registration_mail_send(registration_id=str(registered.registration.id), now=timezone.now())
    assert Registration.objects.get().confirm_mail_sent_at is None


def test_registrations_are_audited_without_the_address(event) -> None:
    registration_window_open(event)
    now = timezone.now()
    registered = registration_create(event=event, now=now, email="secret-fan@example.com")
    record = AuditRecord.objects.get(action=AuditAction.REGISTERED)
    assert record.data["hash"] == registered.hash and record.data["route"] == "email"
    assert "secret-fan" not in str(record.data) and "secret-fan" not in record.actor
    window_set = AuditRecord.objects.get(action=AuditAction.REGISTRATION_WINDOW_SET)
    assert window_set.data["shop_key"] == "set" and "k" * 40 not in str(window_set.data)
    assert audit_chain_verify(event_id=event.id).ok
