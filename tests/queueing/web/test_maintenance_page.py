"""The waiting page of an on-sale in maintenance, as the server renders it: the notice with
staff's message (plain text, escaped) and the start if it is still to come, for a newcomer
(no join); a fan already in line is told in the page's first line, once, that they keep
their place."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from queueing.beat import event_tick
from queueing.models import QueueEntry
from staff.services import event_update

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script> Back & running soon'
ESCAPED = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; Back &amp; running soon"
NOTICE = "The on-sale is paused for maintenance."
IN_LINE = "The shop is paused for maintenance. You keep your place and go in when it reopens."


def maintenance(event, message: str = HOSTILE):
    return event_update(
        event=event,
        actor="staff:ann",
        now=timezone.now(),
        changes={"mode": "maintenance", "message": message},
    )


def test_a_newcomer_sees_the_notice_with_the_message_escaped_and_no_join(make_event) -> None:
    event = maintenance(make_event())
    page = Client().get(f"/e/{event.slug}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert NOTICE in html
    assert ESCAPED in html
    assert HOSTILE not in html and "<script>alert" not in html
    # No form that joins on arrival; the page checks again by itself.
    assert "data-autojoin" not in html and "autojoin.js" not in html
    assert 'http-equiv="refresh"' in html
    assert "due to start" not in html  # no start to come: no opening time
    assert not QueueEntry.objects.exists()


def test_the_notice_gives_the_start_when_it_is_still_to_come(make_event) -> None:
    starts = (timezone.now() + timedelta(days=2)).replace(hour=18, minute=30, second=0)
    event = maintenance(
        make_event(prequeue_opens_at=timezone.now() - timedelta(hours=1), starts_at=starts),
        message="",
    )
    html = Client().get(f"/e/{event.slug}/").content.decode()
    assert NOTICE in html
    assert "The sale is due to start at" in html and "6:30 p.m. UTC</time>" in html
    assert 'id="staff-message-text" hidden' in html  # no message: nothing to show


def test_a_join_sent_anyway_is_refused_with_the_notice(make_event) -> None:
    event = maintenance(make_event())
    page = Client().post(f"/e/{event.slug}/")
    html = page.content.decode()
    assert page.status_code == 409
    assert NOTICE in html and ESCAPED in html
    assert not QueueEntry.objects.exists()


def test_a_fan_in_line_keeps_their_place_and_is_told_so_once(make_event) -> None:
    event = make_event(capacity=0)
    fans = [Client() for _ in range(3)]
    for fan in fans:
        assert fan.post(f"/e/{event.slug}/").status_code == 302
    maintenance(event)
    event_tick(event_id=event.id, now=timezone.now())  # admits nobody in maintenance
    html = fans[2].get(f"/e/{event.slug}/").content.decode()
    assert ESCAPED in html
    assert f'<p class="status" id="status-text">{IN_LINE}</p>' in html
    assert '<dd id="position">3</dd>' in html
    # One message: no notice box beside it (waiting.js says it live in the same line).
    shown = html.split('id="wr-config"')[0]  # the page, not its script's phrasebook
    assert 'id="maintenance"' not in shown and NOTICE not in shown
    assert set(QueueEntry.objects.values_list("status", flat=True)) == {"waiting"}


def test_out_of_maintenance_the_waiting_page_has_no_notice(make_event) -> None:
    event = make_event(capacity=0)
    fan = Client()
    fan.post(f"/e/{event.slug}/")
    html = fan.get(f"/e/{event.slug}/").content.decode()
    assert 'id="maintenance"' not in html and "maintenance" not in html.split('id="wr-config"')[0]


def test_the_notice_speaks_german(make_event) -> None:
    event = maintenance(make_event(), message="Gleich zurück.")
    html = Client().get(f"/e/{event.slug}/", headers={"accept-language": "de"}).content.decode()
    assert "Dieser Vorverkauf ist wegen Wartungsarbeiten unterbrochen." in html
    assert "Gleich zurück." in html
