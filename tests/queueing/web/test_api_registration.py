"""``POST /api/v1/events/{slug}/registrations`` and the confirmation link over HTTP
(queueing/web/api_registration.py): answers, bad input as ``{"error", "detail"}``, and the
mails in the request's language."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from queueing.line.draw import registration_draw
from queueing.line.outcome_mails import registration_mails_send
from queueing.line.registration import (
    registration_confirm,
    registration_create,
    registration_mail_send,
)
from queueing.models import Registration
from queueing.rules.registrations import confirm_token
from tests.helpers import registration_window_open, shop_token

pytestmark = pytest.mark.django_db


def register(slug: str, body: object, **headers: str) -> object:
    return Client(headers=headers).post(
        f"/api/v1/events/{slug}/registrations", body, content_type="application/json"
    )


def test_both_routes_register_over_the_api(event) -> None:
    registration_window_open(event)
    made = register(event.slug, {"email": "fan@example.com"})
    assert made.status_code == 202 and made.json()["status"] == "check_mail"
    assert Registration.objects.get().status == "pending"
    again = register(event.slug, {"email": "FAN@example.com"})
    assert again.status_code == 202 and again.json() == made.json()
    assert Registration.objects.count() == 1
    shop = register(event.slug, {"shop_token": shop_token("acct-9", slug=event.slug)})
    assert shop.status_code == 201 and shop.json()["status"] == "confirmed"
    assert set(shop.json()) == {"registration", "status", "tier", "hash", "outcome", "invitation"}


def test_an_address_s_registration_is_told_to_nobody_who_only_knows_the_address(event) -> None:
    registration_window_open(event)
    known = registration_create(event=event, now=timezone.now(), email="known@example.com")
    registration_confirm(
        token=confirm_token(event.registration_window.identity_key, known.registration.id),
        now=timezone.now(),
    )
    # An address registered and confirmed, and one never seen: the same answer, naming
    # neither the registration nor its state.
    asked = register(event.slug, {"email": "known@example.com"})
    fresh = register(event.slug, {"email": "fresh@example.com"})
    assert (asked.status_code, asked.json()) == (fresh.status_code, fresh.json())
    assert str(known.registration.id) not in asked.content.decode()
    assert known.registration.public_hash not in asked.content.decode()


def test_a_pending_address_registering_again_is_mailed_its_link_again_not_at_once(
    event, mailbox
) -> None:
    registration_window_open(event)
    register(event.slug, {"email": "lost@example.com"})
    registration = Registration.objects.get()
    first = timezone.now() - timedelta(minutes=6)
    assert registration_mail_send(registration_id=str(registration.id), now=first)
    # Within five minutes of the last mail: nothing more is sent.
    Registration.objects.filter(id=registration.id).update(
        confirm_mail_sent_at=timezone.now() - timedelta(minutes=1)
    )
    register(event.slug, {"email": "lost@example.com"})
    registration.refresh_from_db()
    assert registration.confirm_mail_sent_at < timezone.now() - timedelta(seconds=30)
    # Past them: the link goes again (the worker's task; here sent by hand), once.
    Registration.objects.filter(id=registration.id).update(confirm_mail_sent_at=first)
    register(event.slug, {"email": "lost@example.com"})
    registration.refresh_from_db()
    assert registration.confirm_mail_sent_at is None
    assert registration_mail_send(registration_id=str(registration.id), now=timezone.now())
    assert not registration_mail_send(registration_id=str(registration.id), now=timezone.now())
    assert [m["To"] for m in mailbox.messages] == ["lost@example.com", "lost@example.com"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({}, 400, "bad_request"),
        ({"email": 5}, 400, "bad_request"),
        ({"email": "nobody"}, 400, "bad_request"),
        ({"email": "a\x00@example.com"}, 400, "validation_error"),
        ({"shop_token": "not.a.jwt"}, 401, "unauthorized"),
        ({"email": "a@example.com", "access_code": "NOPE"}, 400, "invalid_access_code"),
        ([1, 2], 400, "validation_error"),
    ],
)
def test_bad_input_is_refused_in_the_contract(event, body, status, code) -> None:
    registration_window_open(event)
    answer = register(event.slug, body)
    assert answer.status_code == status, answer.content
    assert answer.json()["error"] == code and answer.json()["detail"]


def test_an_on_sale_without_a_window_or_unknown_is_refused(event) -> None:
    assert register(event.slug, {"email": "a@example.com"}).status_code == 409
    assert register("nope", {"email": "a@example.com"}).status_code == 404


def test_the_link_confirms_over_get_and_a_wrong_one_is_refused(event) -> None:
    window = registration_window_open(event)
    registered = registration_create(event=event, now=timezone.now(), email="fan@example.com")
    token = confirm_token(window.identity_key, registered.registration.id)
    answer = Client().get(f"/api/v1/registrations/confirm/{token}")
    assert answer.status_code == 200 and answer.json()["status"] == "confirmed"
    assert Client().post(f"/api/v1/registrations/confirm/{token}").status_code == 200
    wrong = Client().get("/api/v1/registrations/confirm/garbage")
    assert wrong.status_code == 401 and wrong.json()["error"] == "unauthorized"


def test_an_invitation_joins_the_line_over_the_api_once(event) -> None:
    window = registration_window_open(event, winners=1, waitlist=0)
    registered = registration_create(event=event, now=timezone.now(), email="fan@example.com")
    token = confirm_token(window.identity_key, registered.registration.id)
    link = f"/api/v1/registrations/confirm/{token}"
    Client().get(link)
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    registration_draw(event_id=event.id, now=timezone.now())
    # The mailed link, opened again after the draw, shows the registrant their invitation.
    answer = Client().get(link).json()
    assert answer["outcome"] == "won" and answer["invitation"]["status"] == "sent"
    code = answer["invitation"]["code"]
    url = f"/api/v1/events/{event.slug}/invitations/join"
    joined = Client().post(url, {"code": code}, content_type="application/json")
    assert joined.status_code == 201, joined.content
    again = Client().post(url, {"code": code}, content_type="application/json")
    assert again.status_code == 200 and again.json()["ticket"] == joined.json()["ticket"]
    wrong = Client().post(url, {"code": "nope"}, content_type="application/json")
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_access_code"
    empty = Client().post(url, {}, content_type="application/json")
    assert empty.status_code == 400 and empty.json()["error"] == "validation_error"


@pytest.mark.parametrize(
    ("accept_language", "language", "confirm_subject", "lost_subject"),
    [
        (
            "fr-CH, fr;q=0.9, en;q=0.5",
            "fr",
            "Confirmez votre inscription : ",
            "Le résultat du tirage au sort : ",
        ),
        ("", "en", "Confirm your registration: ", "The draw's result: "),
        ("tlh", "en", "Confirm your registration: ", "The draw's result: "),  # not offered
    ],
)
def test_the_mails_speak_the_request_s_language(
    event, mailbox, accept_language, language, confirm_subject, lost_subject
) -> None:
    registration_window_open(event, winners=0, waitlist=0)
    headers = {"accept-language": accept_language} if accept_language else {}
    made = register(event.slug, {"email": "fan@example.com"}, **headers)
    assert made.status_code == 202
    registration = Registration.objects.get()
    assert registration.language == language
    assert registration_mail_send(registration_id=str(registration.id), now=timezone.now())
    assert not registration_mail_send(registration_id=str(registration.id), now=timezone.now())
    token = confirm_token(event.registration_window.identity_key, registration.id)
    assert Client().get(f"/api/v1/registrations/confirm/{token}").status_code == 200
    window = event.registration_window
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    registration_draw(event_id=event.id, now=timezone.now())
    assert registration_mails_send(event_id=event.id, now=timezone.now()) == 1
    confirmation, lost = mailbox.messages
    assert confirmation["Subject"] == confirm_subject + event.name
    assert lost["Subject"] == lost_subject + event.name


def test_registering_takes_the_join_s_proof_of_work_and_limits(make_event, settings) -> None:
    event = make_event(slug="guarded", pow_difficulty=8)
    registration_window_open(event)
    refused = register(event.slug, {"email": "fan@example.com"})
    assert refused.status_code == 400 and refused.json()["error"] == "pow_required"
    settings.WR_JOIN_LIMIT_PER_IDENTITY = 1
    plain = make_event(slug="limited")
    registration_window_open(plain)
    assert register(plain.slug, {"email": "other@example.com"}).status_code == 202
    again = register(plain.slug, {"email": "other@example.com"})
    assert again.status_code == 429 and again.json()["error"] == "rate_limited"
