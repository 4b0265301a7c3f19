"""The fans' pages of a draw (queueing/web/registration_pages.py): the form before, during and
after the window, bad input answered on the page with the contract's status, the mailed link's
page confirming only on its button, the outcomes after the draw, the invitation's button
into the line, and the mails in the language the page was in."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from queueing.line.draw import registration_draw
from queueing.line.outcome_mails import registration_mails_send
from queueing.line.registration import registration_create, registration_mail_send
from queueing.models import Registration, RegistrationWindow
from queueing.rules.registrations import confirm_token
from staff.services import TierSpec
from tests.helpers import registration_window_open, registrations_made, shop_token

pytestmark = pytest.mark.django_db


def text(answer: Any) -> str:
    return answer.content.decode()


def register(slug: str, **form: str) -> Any:
    return Client().post(f"/e/{slug}/register/", form)


def draw_now(event: Any) -> None:
    window = event.registration_window
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    registration_draw(event_id=event.id, now=timezone.now())


def link_of(event: Any, registration: Registration) -> str:
    token = confirm_token(event.registration_window.identity_key, registration.id)
    return f"/e/{event.slug}/register/{token}/"


def test_an_on_sale_without_a_window_or_unknown_has_no_page(event) -> None:
    assert Client().get(f"/e/{event.slug}/register/").status_code == 404
    assert Client().get("/e/nope/register/").status_code == 404


def test_before_the_window_the_page_says_when_it_opens_in_the_fans_zone(event) -> None:
    now = timezone.now()
    registration_window_open(
        event, opens_at=now + timedelta(hours=1), closes_at=now + timedelta(hours=2)
    )
    answer = Client().get(f"/e/{event.slug}/register/")
    assert answer.status_code == 200
    assert "has not opened yet" in text(answer) and 'data-local="datetime"' in text(answer)
    assert 'name="email"' not in text(answer)
    # A form sent anyway (a page left open from before) is refused as the API refuses it.
    refused = register(event.slug, email="fan@example.com")
    assert refused.status_code == 409 and not Registration.objects.exists()


def test_the_open_window_registers_an_address_and_asks_to_check_the_mail(event) -> None:
    registration_window_open(event)
    page = Client().get(f"/e/{event.slug}/register/")
    assert page.status_code == 200 and 'name="email"' in text(page)
    assert 'name="access_code"' not in text(page)  # the on-sale has no codes
    answer = register(event.slug, email="Fan@Example.com")
    assert answer.status_code == 200 and "Check your mail" in text(answer)
    assert Registration.objects.get().status == "pending"
    again = register(event.slug, email="fan@example.com")  # the same words, nothing new
    assert "Check your mail" in text(again) and Registration.objects.count() == 1


@pytest.mark.parametrize(
    ("form", "status", "words"),
    [
        ({"email": "nobody"}, 400, "That is not an e-mail address."),
        ({"email": ""}, 400, "That is not an e-mail address."),
        ({"email": "a" * 300 + "@example.com"}, 400, "That is not an e-mail address."),
        ({"email": "a@example.com", "shop_token": "x"}, 400, "That is not an e-mail address."),
        ({"shop_token": "not.a.jwt"}, 401, "sign-in from the shop could not be checked"),
        ({"email": "a@example.com", "access_code": "NOPE"}, 400, "That code is not valid"),
    ],
)
def test_bad_input_is_answered_on_the_page(event, form, status, words) -> None:
    registration_window_open(event)
    answer = register(event.slug, **form)
    assert answer.status_code == status, text(answer)
    assert words in text(answer) and 'role="alert"' in text(answer)
    assert not Registration.objects.exists()


def test_a_code_field_where_tiers_take_codes(make_event) -> None:
    event = make_event(
        tiers=[
            TierSpec(name="Fans", priority=10, access_codes=["FAN"]),
            TierSpec(name="General", priority=100),
        ]
    )
    registration_window_open(event)
    assert 'name="access_code"' in text(Client().get(f"/e/{event.slug}/register/"))
    assert register(event.slug, email="a@example.com", access_code="FAN").status_code == 200
    assert Registration.objects.get().tier.name == "Fans"


def test_the_proof_of_work_is_asked_for(make_event) -> None:
    event = make_event(pow_difficulty=8)
    registration_window_open(event)
    assert "data-pow=" in text(Client().get(f"/e/{event.slug}/register/"))
    answer = register(event.slug, email="a@example.com")
    assert answer.status_code == 400 and "The puzzle could not be checked." in text(answer)


def test_a_shop_identity_is_sent_on_arrival_and_registered(event) -> None:
    registration_window_open(event)
    token = shop_token("acct-1", slug=event.slug)
    page = Client().get(f"/e/{event.slug}/register/", {"shop_token": token})
    assert page.status_code == 200
    assert "data-autojoin" in text(page) and f'value="{token}"' in text(page)
    assert not Registration.objects.exists()  # arriving is a GET: the page's form registers
    answer = register(event.slug, shop_token=token)
    assert answer.status_code == 200 and "You are registered." in text(answer)
    assert Registration.objects.get().status == "confirmed"


def test_the_mailed_link_confirms_on_the_button_only(event) -> None:
    registration_window_open(event)
    registered = registration_create(event=event, now=timezone.now(), email="fan@example.com")
    link = link_of(event, registered.registration)
    shown = Client().get(link)  # what a mail scanner does
    assert shown.status_code == 200 and 'id="confirm"' in text(shown)
    assert Registration.objects.get().status == "pending"
    confirmed = Client().post(link)
    assert confirmed.status_code == 200 and "You are registered." in text(confirmed)
    assert Registration.objects.get().status == "confirmed"
    assert "You are registered." in text(Client().post(link))  # twice: the same


def test_a_wrong_link_or_another_on_sales_is_refused(make_event) -> None:
    event = make_event()
    other = make_event(slug="other")
    registration_window_open(event)
    registered = registration_create(event=event, now=timezone.now(), email="fan@example.com")
    wrong = Client().get(f"/e/{event.slug}/register/garbage/")
    assert wrong.status_code == 401 and "This link does not work." in text(wrong)
    link = link_of(event, registered.registration)
    assert Client().post(link.replace(f"/e/{event.slug}/", "/e/other/")).status_code == 404
    assert other.slug == "other" and Registration.objects.get().status == "pending"


def test_a_link_confirmed_too_late_says_so(event) -> None:
    registration_window_open(event)
    registered = registration_create(event=event, now=timezone.now(), email="fan@example.com")
    window = event.registration_window
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    answer = Client().post(link_of(event, registered.registration))
    assert answer.status_code == 409 and "was not confirmed before" in text(answer)


def test_after_the_draw_each_sees_the_outcome_and_the_winner_joins_the_line(event) -> None:
    registration_window_open(event, winners=1, waitlist=1)
    made = registrations_made(event, by_mail=3)
    draw_now(event)
    pages = {}
    for registered in made:
        registration = Registration.objects.get(id=registered.registration.id)
        pages[registration.outcome] = (registration, Client().get(link_of(event, registration)))
    winner, won = pages["won"]
    assert 'id="join-with-invitation"' in text(won) and 'id="list-root"' in text(won)
    list_root = RegistrationWindow.objects.get(event=event).list_root
    assert list_root and list_root in text(won) and event.draw_seed in text(won)
    assert f"/api/v1/registrations/{winner.id}/proof" in text(won)
    assert "Your place on the waitlist: 1." in text(pages["waitlisted"][1])
    assert "You were not drawn this time." in text(pages["lost"][1])
    # The draw is told on the form's page too, with its seed now revealed.
    closed = Client().get(f"/e/{event.slug}/register/")
    assert "has closed" in text(closed) and event.draw_seed in text(closed)

    code = Client().get(link_of(event, winner)).context["invitation"].code
    fan = Client()
    joined = fan.post(f"/e/{event.slug}/register/join", {"code": code})
    assert joined.status_code == 302 and joined["Location"] == f"/e/{event.slug}/"
    waiting = fan.get(f"/e/{event.slug}/")
    assert waiting.status_code == 200 and waiting.context["status"] == "waiting"
    # The button again (a reload, another tab) shows the same place, not a second one.
    assert fan.post(f"/e/{event.slug}/register/join", {"code": code}).status_code == 302


def test_a_shops_fan_signed_in_again_after_the_draw_sees_the_outcome(event) -> None:
    registration_window_open(event, winners=1, waitlist=0)
    registrations_made(event, by_shop=1)
    draw_now(event)
    token = shop_token("account-0", slug=event.slug)
    page = Client().get(f"/e/{event.slug}/register/", {"shop_token": token})
    assert "data-autojoin" in text(page) and "has closed" in text(page)
    answer = register(event.slug, shop_token=token)
    assert answer.status_code == 200 and 'id="join-with-invitation"' in text(answer)
    # One who never registered is told it closed, and the page does not send itself again.
    stranger = register(event.slug, shop_token=shop_token("account-9", slug=event.slug))
    assert stranger.status_code == 409 and "data-autojoin" not in text(stranger)


def test_a_wrong_invitation_is_refused_on_the_page(event) -> None:
    answer = Client().post(f"/e/{event.slug}/register/join", {"code": "nope"})
    assert answer.status_code == 400 and "cannot be used any more" in text(answer)
    assert Client().get(f"/e/{event.slug}/register/join").status_code == 405


def test_the_page_speaks_the_fans_language(event) -> None:
    registration_window_open(event)
    answer = Client(headers={"accept-language": "de"}).get(f"/e/{event.slug}/register/")
    assert 'lang="de"' in text(answer) and "Zur Auslosung anmelden" in text(answer)


@pytest.mark.parametrize(
    ("accept_language", "chosen", "confirm_subject", "invited_subject", "invited_words"),
    [
        (
            "de",
            None,
            "Bestätigen Sie Ihre Anmeldung: ",
            "Sie können sich anstellen: ",
            "Ihr Einladungscode",
        ),
        # The language switcher's choice wins over the browser's, as for the page itself.
        (
            "en",
            "fr",
            "Confirmez votre inscription : ",
            "Vous pouvez rejoindre la file : ",
            "Vous avez été tiré au sort pour",
        ),
        (
            "en",
            None,
            "Confirm your registration: ",
            "You can join the line: ",
            "Your invitation code",
        ),
    ],
)
def test_the_mails_speak_the_language_of_the_page_registered_on(
    event,
    mailbox,
    settings,
    accept_language,
    chosen,
    confirm_subject,
    invited_subject,
    invited_words,
) -> None:
    registration_window_open(event, winners=1, waitlist=0)
    fan = Client(headers={"accept-language": accept_language})
    if chosen:
        fan.cookies[settings.LANGUAGE_COOKIE_NAME] = chosen
    assert fan.post(f"/e/{event.slug}/register/", {"email": "fan@example.com"}).status_code == 200
    registration = Registration.objects.get()
    assert registration.language == (chosen or accept_language)
    # The worker's tasks, run here: the confirmation link, then (confirmed, drawn) the outcome.
    assert registration_mail_send(registration_id=str(registration.id), now=timezone.now())
    assert not registration_mail_send(registration_id=str(registration.id), now=timezone.now())
    assert fan.post(link_of(event, registration)).status_code == 200
    draw_now(event)
    assert registration_mails_send(event_id=event.id, now=timezone.now()) == 1
    assert registration_mails_send(event_id=event.id, now=timezone.now()) == 0
    confirmation, invited = mailbox.messages
    assert confirmation["Subject"] == confirm_subject + event.name
    assert link_of(event, registration) in confirmation.get_content()
    assert invited["Subject"] == invited_subject + event.name
    assert invited_words in invited.get_content()


def test_the_joins_limits_are_spent_and_said_on_the_page(event, settings) -> None:
    settings.WR_JOIN_LIMIT_PER_IDENTITY = 1
    registration_window_open(event)
    assert register(event.slug, email="fan@example.com").status_code == 200
    again = register(event.slug, email="fan@example.com")
    assert again.status_code == 429 and again["Retry-After"]
    assert "Too many attempts from here." in text(again)
