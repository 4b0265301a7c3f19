"""The on-sale's own look on every fans' page the server renders (join, scheduled, pre-queue,
waiting, refused, ended, expired, maintenance): logo, accent, intro above the line and "what
happens next" below it; the room's own look when nothing is set; and nothing of staff's
markup or script on any of them."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from events.models import Event
from queueing.beat import event_tick
from queueing.line.expiry import sessions_expire
from queueing.models import QueueEntry
from queueing.rules.states import EntryStatus
from staff.services import event_close, event_logo_change, event_update
from tests.helpers import fans_join
from tests.images import TINY_PNG
from tests.markup import assert_only_the_safe_subset, tags_of

pytestmark = pytest.mark.django_db

INTRO = "**Presale** sold out. General sale at *10:00*.\n\n- one ticket per fan"
NEXT_STEPS = "You get [10 minutes](https://shop.example/help) to pay."
HOSTILE = (
    '<script>alert("intro")</script> <img src=x onerror=alert(1)> '
    "[x](javascript:alert(1)) <javascript:alert(2)> ![i](https://evil.example/t.png) "
    '<a href="https://evil.example" onclick="alert(3)">a</a> <style>*{display:none}</style> '
    '<div style="color:red">d</div> &lt;b&gt; [ok](https://ok.example "t onmouseover=x")'
)


def branded(event: Event, *, intro: str = INTRO, next_steps: str = NEXT_STEPS) -> Event:
    event = event_update(
        event=event,
        actor="staff:ann",
        now=timezone.now(),
        changes={"accent_color": "#7C3AED", "intro_text": intro, "next_steps_text": next_steps},
    )
    return event_logo_change(event=event, actor="staff:ann", now=timezone.now(), image=TINY_PNG)


def page_of(client: Client, event: Event, *, post: bool = False) -> tuple[int, str]:
    response = (client.post if post else client.get)(f"/e/{event.slug}/")
    return response.status_code, response.content.decode()


def the_join_page(make_event) -> tuple[Event, Callable[[], tuple[int, str]]]:
    event = make_event(capacity=0)
    return event, lambda: page_of(Client(), event)


def the_scheduled_page(make_event):
    event = make_event(prequeue_opens_at=timezone.now() + timedelta(hours=2))
    return event, lambda: page_of(Client(), event)


def the_prequeue_page(make_event):
    now = timezone.now()
    event = make_event(
        prequeue_opens_at=now - timedelta(hours=1), starts_at=now + timedelta(hours=1)
    )
    fan = Client()

    def show() -> tuple[int, str]:
        fan.post(f"/e/{event.slug}/")
        return page_of(fan, event)

    return event, show


def the_waiting_page(make_event):
    event = make_event(capacity=0)
    fan = Client()

    def show() -> tuple[int, str]:
        assert fan.post(f"/e/{event.slug}/").status_code == 302
        return page_of(fan, event)

    return event, show


def the_refused_page(make_event):
    event = make_event(capacity=0, max_queue_length=1)
    fans_join(event.slug, 1)
    return event, lambda: page_of(Client(), event, post=True)


def the_ended_page(make_event):
    event = make_event()

    def show() -> tuple[int, str]:
        event_close(event=event, actor="t", now=timezone.now())
        return page_of(Client(), event)

    return event, show


def the_expired_page(make_event):
    event = make_event(capacity=1, rate_per_minute=0, heartbeat_seconds=600, reentry_seconds=600)
    fan = Client()

    def show() -> tuple[int, str]:
        assert fan.post(f"/e/{event.slug}/").status_code == 302
        event_tick(event_id=event.id, now=timezone.now())
        assert fan.get(f"/e/{event.slug}/").status_code == 302  # to the shop
        QueueEntry.objects.filter(event=event, status=EntryStatus.ADMITTED).update(
            pass_expires_at=timezone.now() - timedelta(seconds=1)
        )
        assert sessions_expire(event_id=event.id, now=timezone.now()) == 1
        return page_of(fan, event)

    return event, show


def the_maintenance_page(make_event):
    event = make_event()

    def show() -> tuple[int, str]:
        event_update(event=event, actor="t", now=timezone.now(), changes={"mode": "maintenance"})
        return page_of(Client(), event)

    return event, show


def the_maintenance_page_of_a_fan_in_line(make_event):
    event = make_event(capacity=0)
    fan = Client()

    def show() -> tuple[int, str]:
        assert fan.post(f"/e/{event.slug}/").status_code == 302
        event_update(event=event, actor="t", now=timezone.now(), changes={"mode": "maintenance"})
        return page_of(fan, event)

    return event, show


STATES = {
    "join": (the_join_page, "Join the line to get a place.", 200),
    "scheduled": (the_scheduled_page, "The waiting room opens soon.", 200),
    # The fan's first line is written by the view (rules/wording.py): escaped, apostrophes too.
    "prequeue": (the_prequeue_page, "You&#x27;re in the pre-queue.", 200),
    "waiting": (the_waiting_page, "You&#x27;re next!", 200),
    "refused": (the_refused_page, "The line is full right now.", 429),
    "ended": (the_ended_page, "This on-sale has ended.", 200),
    "expired": (the_expired_page, "Your time in the shop ran out", 200),
    "maintenance": (the_maintenance_page, "paused for maintenance", 200),
    "maintenance_in_line": (
        the_maintenance_page_of_a_fan_in_line,
        "You keep your place and go in when it reopens.",
        200,
    ),
}


def section(html: str, element_id: str) -> str:
    """The inner HTML of the element with ``element_id`` (a div or section of ours)."""
    match = re.search(rf'<(div|section)[^>]* id="{element_id}"[^>]*>(.*?)</\1>', html, re.S)
    assert match, element_id
    return match.group(2)


@pytest.mark.parametrize("state", STATES)
def test_every_state_wears_the_on_sales_look(make_event, state: str) -> None:
    build, says, status = STATES[state]
    event, show = build(make_event)
    event = branded(event)
    code, html = show()
    assert code == status and says in html, html
    assert '<body style="--accent: #7c3aed; --accent-strong: #6630c2;">' in html
    logo = f'<img class="logo" src="/e/{event.slug}/logo/{event.logo_sha256}" alt="{event.name}">'
    assert logo in html
    intro = section(html, "intro")
    assert "<strong>Presale</strong> sold out. General sale at <em>10:00</em>." in intro
    assert "<li>one ticket per fan</li>" in intro
    next_steps = section(html, "next-steps")
    assert "What happens next" in next_steps
    assert 'href="https://shop.example/help" rel="noopener noreferrer nofollow"' in next_steps
    # Above the line and below it: the intro before the page's status, next steps after.
    assert html.index('id="intro"') < html.index(says) < html.index('id="next-steps"')


@pytest.mark.parametrize("state", STATES)
def test_without_a_look_the_page_is_the_rooms_own(make_event, state: str) -> None:
    build, says, status = STATES[state]
    _, show = build(make_event)
    code, html = show()
    assert code == status and says in html
    assert "<body>" in html and "--accent" not in html
    assert 'class="logo"' not in html and 'id="intro"' not in html
    assert 'id="next-steps"' not in html and "What happens next" not in html


@pytest.mark.parametrize("state", STATES)
def test_no_tag_attribute_or_script_of_staff_reaches_any_page(make_event, state: str) -> None:
    build, says, status = STATES[state]
    event, show = build(make_event)
    branded(event, intro=HOSTILE, next_steps=HOSTILE)
    code, html = show()
    assert code == status and says in html
    for element_id in ("intro", "next-steps"):
        inner = section(html, element_id)
        if element_id == "next-steps":
            inner = inner.split("</h2>", 1)[1]
        assert_only_the_safe_subset(inner)
    for tag, attrs in tags_of(html):
        assert tag not in ("img",) or attrs.get("class") == "logo", (tag, attrs)
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        for value in attrs.values():
            assert "javascript:" not in (value or "").lower(), (tag, attrs)
    scripts = [attrs for tag, attrs in tags_of(html) if tag == "script"]
    # Only the room's own scripts (files from /static/, its translation catalog, or its JSON
    # config).
    assert all(
        (a.get("src") or "").startswith(("/static/", "/i18n/catalog/"))
        or a.get("type") == "application/json"
        for a in scripts
    ), scripts
    assert "<style" not in html and 'alert("intro")' not in html
    assert "&lt;script&gt;alert(&quot;intro&quot;)&lt;/script&gt;" in html


def test_the_look_costs_the_page_no_query_for_the_logo(
    make_event, django_assert_max_num_queries
) -> None:
    event = branded(make_event(capacity=0))
    fan = Client()
    fan.post(f"/e/{event.slug}/")
    with django_assert_max_num_queries(20) as queries:
        fan.get(f"/e/{event.slug}/")
    assert not any("events_eventlogo" in q["sql"] for q in queries.captured_queries)
