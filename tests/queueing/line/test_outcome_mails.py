"""Outcome mails (queueing/line/outcome_mails.py), against a local SMTP server: each
registrant by address told once what the draw decided, the invited their code, in the
language they registered in, the address erased once nothing more can be told, and a refused
mail sent by the retry."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from queueing.line.draw import registration_draw
from queueing.line.invitations import invitation_redeem, invitations_lapse
from queueing.line.outcome_mails import OutcomeMailsFailed, registration_mails_send
from queueing.line.registration import registration_confirm, registration_create
from queueing.models import Registration, RegistrationWindow
from queueing.rules.registrations import confirm_token
from tests.helpers import registration_window_open, registrations_made
from tests.mailbox import smtp_server
from tests.processes import running_stack, wait_until

pytestmark = pytest.mark.django_db


def drawn(event, *, winners: int, waitlist: int, by_mail: int, by_shop: int = 0):
    window = registration_window_open(event, winners=winners, waitlist=waitlist)
    registrations_made(event, by_mail=by_mail, by_shop=by_shop)
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    registration_draw(event_id=event.id, now=timezone.now())
    window.refresh_from_db()
    return window


def subjects(mailbox) -> dict[str, str]:
    return {m["To"]: m["Subject"] for m in mailbox.messages}


def test_every_registrant_by_address_is_told_once_and_erased_when_done(event, mailbox) -> None:
    drawn(event, winners=2, waitlist=2, by_mail=7, by_shop=3)
    by_mail = Registration.objects.filter(route="email")
    won = by_mail.filter(outcome="won").count()
    assert registration_mails_send(event_id=event.id, now=timezone.now()) == 7
    assert registration_mails_send(event_id=event.id, now=timezone.now()) == 0
    assert len(mailbox.messages) == 7 and len(subjects(mailbox)) == 7
    told = list(subjects(mailbox).values())
    assert sum(s.startswith("You can join the line") for s in told) == won
    # Erased once told for good; the waitlisted keep theirs for the invitation to come.
    assert set(by_mail.exclude(email="").values_list("outcome", flat=True)) <= {"waitlisted"}
    assert (
        by_mail.filter(outcome__in=["won", "lost"], email="").count()
        == by_mail.filter(outcome__in=["won", "lost"]).count()
    )


def test_an_invited_fan_s_mail_carries_a_code_that_joins(make_event, mailbox) -> None:
    event = make_event(slug="mailed", capacity=0)
    drawn(event, winners=1, waitlist=0, by_mail=1)
    registration_mails_send(event_id=event.id, now=timezone.now())
    (message,) = mailbox.messages
    code = re.search(r"code .*: (\w{32})", message.get_content()).group(1)
    assert invitation_redeem(event=event, code=code, now=timezone.now()).result.created


def test_a_waitlisted_fan_invited_as_an_invitation_lapses_is_mailed_again(event, mailbox) -> None:
    window = drawn(event, winners=1, waitlist=1, by_mail=3)
    registration_mails_send(event_id=event.id, now=timezone.now())
    waiting = Registration.objects.get(outcome="waitlisted")
    # Told their place on the waitlist (the first after the one winner), as their page says.
    told = next(m for m in mailbox.messages if m["Subject"].startswith("You are on the waitlist"))
    assert "(rank 1 in your tier)" in told.get_content()
    invitations_lapse(now=window.drawn_at + timedelta(hours=49))
    assert registration_mails_send(event_id=event.id, now=timezone.now()) == 1
    last = mailbox.messages[-1]
    assert last["Subject"].startswith("You can join the line")
    waiting.refresh_from_db()
    assert (waiting.mailed, waiting.email) == ("invited", "")
    assert len(mailbox.messages) == 4


def test_each_outcome_is_told_in_the_language_the_fan_registered_in(event, mailbox) -> None:
    window = registration_window_open(event, winners=1, waitlist=1)
    now = timezone.now()
    for n in range(3):
        registered = registration_create(
            event=event, now=now, email=f"fan{n}@example.com", language="de"
        )
        token = confirm_token(window.identity_key, registered.registration.id)
        registration_confirm(token=token, now=now)
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    registration_draw(event_id=event.id, now=timezone.now())
    window.refresh_from_db()
    outcome_of = dict(Registration.objects.values_list("email", "outcome"))
    assert registration_mails_send(event_id=event.id, now=timezone.now()) == 3
    told = {outcome_of[message["To"]]: message for message in mailbox.messages}
    assert told["won"]["Subject"] == f"Sie können sich anstellen: {event.name}"
    assert "Ihr Einladungscode (er funktioniert einmal, bis" in told["won"].get_content()
    assert told["waitlisted"]["Subject"] == f"Sie stehen auf der Warteliste: {event.name}"
    assert "(Rang 1 in Ihrer Kategorie)" in told["waitlisted"].get_content()
    assert told["lost"]["Subject"] == f"Das Ergebnis der Auslosung: {event.name}"
    assert "Sie wurden diesmal für" in told["lost"].get_content()
    for message in told.values():
        assert "Der veröffentlichte Hash Ihrer Anmeldung: " in message.get_content()
    # The addresses told for good are erased as before; the language is kept (not personal
    # data), and the waitlisted fan invited later is told in it too.
    assert Registration.objects.exclude(email="").get().outcome == "waitlisted"
    assert set(Registration.objects.values_list("language", flat=True)) == {"de"}
    invitations_lapse(now=window.drawn_at + timedelta(hours=49))
    assert registration_mails_send(event_id=event.id, now=timezone.now()) == 1
    invited = mailbox.messages[-1]
    assert invited["To"] == told["waitlisted"]["To"]
    assert invited["Subject"] == f"Sie können sich anstellen: {event.name}"
    assert len(mailbox.messages) == 4


def test_a_registrant_in_the_room_s_own_language_is_told_in_english(event, mailbox) -> None:
    drawn(event, winners=1, waitlist=0, by_mail=1)
    assert Registration.objects.get().language == ""  # registered with no language given
    registration_mails_send(event_id=event.id, now=timezone.now())
    (message,) = mailbox.messages
    assert message["Subject"] == f"You can join the line: {event.name}"
    assert "Your invitation code (it works once, until" in message.get_content()
    assert "Your registration's published hash: " in message.get_content()


def test_a_mail_the_server_refuses_is_sent_by_the_retry_and_only_it(event, settings) -> None:
    drawn(event, winners=1, waitlist=0, by_mail=2)
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", 9  # nothing listens there
    with pytest.raises(OutcomeMailsFailed):
        registration_mails_send(event_id=event.id, now=timezone.now())
    assert not Registration.objects.filter(route="email", email="").exists()
    with smtp_server() as (box, port):
        settings.EMAIL_PORT = port
        assert registration_mails_send(event_id=event.id, now=timezone.now()) == 2
        assert registration_mails_send(event_id=event.id, now=timezone.now()) == 0
    assert len(box.messages) == 2


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_the_beat_and_worker_draw_at_the_close_and_mail_each_once(make_event) -> None:
    with smtp_server() as (box, port):
        with running_stack(EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(port)) as stack:
            event = make_event(slug="closing")
            window = registration_window_open(event, winners=1, waitlist=1)
            registrations_made(event, by_mail=3, by_shop=2)
            window.closes_at = timezone.now() + timedelta(seconds=2)
            window.save(update_fields=["closes_at"])
            stack.worker()
            stack.beat()
            wait_until(
                lambda: RegistrationWindow.objects.get(pk=event.pk).drawn_at is not None,
                timeout=30,
                what="the draw at the window's close",
            )
            wait_until(lambda: len(box.messages) == 3, timeout=30, what="three outcome mails")
            time.sleep(3)  # more dispatches: nobody is mailed twice
            assert len(box.messages) == 3
            assert {m["X-Envelope-To"] for m in box.messages} == {
                f"fan{n}@example.com" for n in range(3)
            }
