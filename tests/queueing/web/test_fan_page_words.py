"""The fans' page as the server renders it says what is true and offers only what applies
(queueing/web/pages.py, rules/wording.py): the wait per situation, one message in maintenance,
the others in the pre-queue, no way back into the line after a purchase, no "Continue on your
phone" on a phone, and every time in UTC named as such until the browser writes it in the
fan's own zone."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.test import Client
from django.utils import timezone

from events.models import Event
from staff.services import TierSpec, event_pause, event_update
from tests.helpers import fans_join, shop_completes, tick

pytestmark = pytest.mark.django_db

IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
)
DESKTOP = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0.0.0 Safari/537.36"
)


def text_of(html: str, element_id: str) -> str:
    match = re.search(rf'<(\w+)[^>]* id="{element_id}"[^>]*>(.*?)</\1>', html, re.S)
    assert match, element_id
    return unescape(re.sub(r"<[^>]+>", "", match.group(2))).strip()


def page(fan: Client, event: Event, **headers: str) -> str:
    answer = fan.get(f"/e/{event.slug}/", headers=headers)
    assert answer.status_code == 200
    return answer.content.decode()


def into_maintenance(event: Event) -> None:
    changes = {"mode": "maintenance"}
    event_update(event=event, actor="staff:ann", now=timezone.now(), changes=changes)


def poll_ticket(fan: Client, event: Event) -> str:
    """The page's ticket, as its script is handed it."""
    html = page(fan, event)
    match = re.search(r'"ticket": "([^"]+)"', html)
    assert match, html
    return match.group(1)


def in_line(event: Event, ahead: int = 0) -> Client:
    fans_join(event.slug, ahead)
    fan = Client()
    assert fan.post(f"/e/{event.slug}/").status_code == 302
    return fan


def test_a_line_still_measuring_says_so_and_never_promises_a_start(make_event) -> None:
    # Nothing limits the pace, and nothing has been let in yet to measure it by.
    event = make_event(capacity=0, rate_per_minute=0, mode="queue")
    html = page(in_line(event, ahead=2), event)
    assert text_of(html, "wait") == "Still measuring how fast the line moves."
    assert "as soon as the line starts moving" not in html


def test_a_capacity_bound_line_still_measuring_says_how_long_at_most(make_event) -> None:
    # Five places, two-minute sessions, no rate: the 12th fan goes in by the third wave.
    event = make_event(capacity=5, rate_per_minute=0, session_seconds=120)
    fans_join(event.slug, 11)
    tick(event)  # five go in; nobody has left, so nothing is measured
    fan = in_line(event)
    html = page(fan, event)
    assert text_of(html, "position") == "7"
    # Two waves of at most a session (and its turnover) each: 244 s, said as 5 minutes.
    assert text_of(html, "wait") == ("At most 5 minutes (still measuring how fast the line moves).")


def test_at_most_is_not_said_to_a_fan_others_may_pass(make_event) -> None:
    event = make_event(
        capacity=5,
        rate_per_minute=0,
        tiers=[TierSpec("Fan club", priority=1, access_codes=["CLUB"]), TierSpec("General")],
    )
    html = page(in_line(event, ahead=1), event)
    assert text_of(html, "wait") == "Still measuring how fast the line moves."


def test_a_paused_sale_says_the_wait_is_on_hold(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=6)
    fan = in_line(event, ahead=30)
    assert text_of(page(fan, event), "wait").startswith("about")
    event_pause(event=event, actor="staff:ann", now=timezone.now())
    html = page(fan, event)
    assert text_of(html, "wait") == "On hold while the sale is paused."
    assert text_of(html, "status-text") == "The sale is paused for a moment. You keep your place."


def test_maintenance_is_one_message_for_a_fan_in_line(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=60)
    fan = in_line(event, ahead=2)
    into_maintenance(event)
    html = page(fan, event)
    assert text_of(html, "status-text") == (
        "The shop is paused for maintenance. You keep your place and go in when it reopens."
    )
    assert text_of(html, "wait") == "On hold during maintenance."
    # No second box beside it, and never "closed".
    assert 'id="maintenance"' not in html
    assert "closed for maintenance" not in html
    assert text_of(html, "position") == "3"


def test_a_prequeue_fan_in_maintenance_keeps_their_place_in_the_prequeue(make_event) -> None:
    event = make_event(starts_at=timezone.now() + timedelta(hours=1))
    fan = in_line(event)
    into_maintenance(event)
    html = page(fan, event)
    assert text_of(html, "status-text") == (
        "The on-sale is paused for maintenance. You keep your place in the pre-queue."
    )
    assert 'id="maintenance"' not in html


def test_the_prequeue_counts_the_others_not_the_fan(make_event) -> None:
    event = make_event(starts_at=timezone.now() + timedelta(hours=1))
    first = in_line(event)
    assert text_of(page(first, event), "others-waiting") == "Nobody else is waiting yet."
    fans_join(event.slug, 1)
    assert text_of(page(first, event), "others-waiting") == "1 other person is waiting with you."
    fans_join(event.slug, 3)
    assert text_of(page(first, event), "others-waiting") == "4 other people are waiting with you."


def test_the_prequeue_names_the_start_in_utc_for_the_browser_to_rewrite(make_event) -> None:
    starts = (timezone.now() + timedelta(days=2)).replace(hour=18, minute=30, second=0)
    event = make_event(starts_at=starts)
    html = page(in_line(event), event)
    stamp = starts.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%S")
    assert re.search(
        rf'The sale starts at <time datetime="{stamp}(\.\d+)?Z" data-local="datetime">'
        r"[^<]*6:30 p\.m\. UTC</time>\.",
        html,
    ), html
    assert "/static/queueing/local_times.js" in html


def test_after_a_purchase_the_page_thanks_and_offers_no_way_back(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0)
    fan = in_line(event)
    tick(event)
    to_shop = fan.get(f"/e/{event.slug}/")
    assert to_shop.status_code == 302
    token = to_shop["Location"].split("wr_pass=", 1)[1]
    assert shop_completes(token, event.integration_key).status_code == 204
    html = page(fan, event)
    assert text_of(html, "status-text") == "Your purchase is complete."
    assert "Thank you for waiting with us." in html
    assert 'name="rejoin"' not in html and "Join" not in html


def test_a_fan_who_left_may_join_again_but_not_during_maintenance(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=60)
    fan = in_line(event)
    ticket = poll_ticket(fan, event)
    assert Client().delete(f"/api/v1/tickets/{ticket}").status_code == 204
    html = page(fan, event)
    assert text_of(html, "status-text") == "You left the line."
    assert 'name="rejoin"' in html
    into_maintenance(event)
    html = page(fan, event)
    # Joining is refused during maintenance: the notice says so, and the page checks again.
    assert 'name="rejoin"' not in html
    assert "You can join the line once it reopens." in html
    assert 'http-equiv="refresh"' in html


@pytest.mark.parametrize(
    ("headers", "offered"),
    [
        ({"User-Agent": DESKTOP}, True),
        ({"User-Agent": DESKTOP, "Sec-CH-UA-Mobile": "?0"}, True),
        ({"User-Agent": IPHONE}, False),
        ({"User-Agent": DESKTOP, "Sec-CH-UA-Mobile": "?1"}, False),
        ({"User-Agent": "Mozilla/5.0 (Linux; Android 14; SM-X710) AppleWebKit/537.36"}, False),
    ],
)
def test_continue_on_your_phone_is_not_offered_on_a_phone(make_event, headers, offered) -> None:
    event = make_event(capacity=0, rate_per_minute=60)
    html = page(in_line(event, ahead=1), event, **headers)
    assert ('id="continue-on-phone"' in html) is offered
    assert 'id="turn-mail"' in html  # the mail is for any device


@pytest.mark.parametrize(
    ("away_seconds", "said"),
    [
        (600, "You can close it for up to 10 minutes and keep your place"),
        (90, "You can close it for up to 1 minute and keep your place"),  # never more than kept
        (0, None),
    ],
)
def test_the_page_says_how_long_it_may_be_closed(make_event, away_seconds, said) -> None:
    event = make_event(slug="hold", capacity=1, rate_per_minute=0, away_seconds=away_seconds)
    html = page(in_line(event, ahead=2), event)
    if said is None:
        assert 'id="away-hold"' not in html
    else:
        assert said in text_of(html, "away-hold")


def test_the_prequeue_says_the_place_is_kept_until_after_the_start(make_event) -> None:
    now = timezone.now()
    event = make_event(
        slug="later",
        away_seconds=300,
        prequeue_opens_at=now - timedelta(minutes=1),
        starts_at=now + timedelta(hours=1),
    )
    html = page(in_line(event), event)
    assert "kept until the sale starts, and for 5 minutes after that" in text_of(
        html, "prequeue-hold"
    )
