"""The on-sale's page steers the on-sale: every live control, only where it applies, each
confirmed on a page that says what it will do in the numbers of that moment."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from events.models import Event, EventControl, EventMode
from queueing.beat import event_tick
from queueing.models import AuditRecord, QueueEntry
from staff.services import event_admit_now, event_close, event_pause, event_update
from tests.helpers import fans_join, staff_client, waiting_entries

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Client:
    return staff_client("ann", "change_event")


def control(client: Client, event: Event, **form: str) -> Any:
    return client.post(f"/dashboard/events/{event.slug}/control", form)


def confirmation_text(reply: Any) -> str:
    """The confirmation page's words, tags dropped, spaces folded."""
    assert reply.status_code == 200, reply.status_code
    html = re.search(r'<section class="confirm".*?</section>', reply.content.decode(), re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html.group(0)).split())


def line_of(make_event, *, in_line: int, in_shop: int, **fields: Any) -> Event:
    """An open on-sale with ``in_shop`` fans let in and ``in_line`` waiting."""
    event = make_event(slug="night", **{"capacity": in_shop, "rate_per_minute": 30, **fields})
    fans_join(event.slug, in_shop)
    event_tick(event_id=event.id, now=timezone.now())  # the line starts; the pace lets one in
    event_admit_now(event=event, count=in_shop, actor="test", now=timezone.now())
    assert QueueEntry.objects.filter(event=event, status="admitted").count() == in_shop
    waiting_entries(event, event.tiers.get(), in_line)
    event.refresh_from_db()
    return event


def test_a_capacity_of_0_typed_is_refused_no_cap_is_said_in_words(staff, make_event) -> None:
    event = make_event(capacity=5, rate_per_minute=30)
    typed = control(staff, event, action="capacity", value="0", confirmed="yes")
    event.refresh_from_db()
    assert event.capacity == 5
    page = staff.get(f"/dashboard/events/{event.slug}/").content.decode()
    assert typed.status_code == 302 and "0 would not stop anyone: it means no cap" in page
    assert "to stop letting fans in, pause the on-sale" in page
    asked = confirmation_text(control(staff, event, action="capacity", no_limit="1"))
    assert "No cap: fans will be let in at the pace only (30 a minute)" in asked
    assert "To stop letting fans in, pause the on-sale instead." in asked
    assert "Yes, set the capacity" in asked
    event.refresh_from_db()
    assert event.capacity == 5  # asked, not done
    done = control(staff, event, action="capacity", no_limit="1", confirmed="yes")
    assert done.status_code == 302
    event.refresh_from_db()
    assert event.capacity == 0
    page = staff.get(f"/dashboard/events/{event.slug}/").content.decode()
    assert '<span id="fig-capacity">No cap</span>' in page
    assert 'id="capacity-no-cap" checked' in page
    assert "To stop letting fans in, use <strong>Pause</strong>" in page
    assert staff.get("/dashboard/?tab=live").content.decode().count("/ no cap") == 1


def test_a_pace_of_0_typed_is_refused_and_no_limit_at_all_is_warned(staff, make_event) -> None:
    event = line_of(make_event, in_line=40, in_shop=0, capacity=0)
    control(staff, event, action="rate", value="0", confirmed="yes")
    event.refresh_from_db()
    assert event.rate_per_minute == 30
    asked = confirmation_text(control(staff, event, action="rate", no_limit="1"))
    assert "No pace limit, and no cap either: nothing holds fans back." in asked
    assert "The 40 fans in line go to the shop as fast as the room lets them through." in asked


@pytest.mark.parametrize(
    ("form", "paused", "said"),
    [
        (
            {"action": "pause"},
            False,
            [
                "Pause On-sale night?",
                "Nobody new goes to the shop until you resume.",
                "The 4,210 fans in line keep their place; fans may still join.",
                "The 3 fans in the shop keep their passes.",
                "Yes, pause",
            ],
        ),
        (
            {"action": "resume"},
            True,
            [
                "Fans go to the shop again: 30 a minute, at most 3 in the shop at once "
                "(3 there now).",
                "The 4,210 fans in line move again.",
            ],
        ),
        (
            {"action": "close"},
            False,
            [
                "Close: the 4,210 fans still in line are sent home, and nobody new may join.",
                "The 3 fans in the shop keep their passes until their session ends.",
                "Closing is final",
                "Yes, close",
            ],
        ),
        (
            {"action": "admit", "value": "25"},
            False,
            [
                "Let up to 25 fans in now, past the pace; 4,210 wait in line.",
                "The shop has room for 0 more under its capacity of 3 (3 inside), so at most "
                "0 go in.",
            ],
        ),
        (
            {"action": "capacity", "value": "10"},
            False,
            ["At most 10 fans in the shop at once (now 3; 3 inside)."],
        ),
        (
            {"action": "capacity", "value": "2"},
            False,
            ["The 3 fans inside keep their passes; nobody new goes in until fewer than 2 are"],
        ),
        (
            {"action": "rate", "value": "90"},
            False,
            [
                "Up to 90 fans a minute go to the shop (now 30), while there is room under the cap "
                "(at most 3 in the shop at once)."
            ],
        ),
        (
            {"action": "mode", "value": "passthrough"},
            False,
            [
                "From queue to passthrough.",
                "past the capacity and the pace: the 4,210 fans in line within a few seconds",
            ],
        ),
        (
            {"action": "mode", "value": "maintenance"},
            False,
            ["Nobody goes to the shop and nobody may join; the 4,210 fans in line keep"],
        ),
        (
            {"action": "message", "message": "Doors at 8"},
            False,
            ["Every waiting page shows this at once (4,210 fans in line):", "“Doors at 8”"],
        ),
    ],
)
def test_each_confirmation_says_what_will_happen_in_numbers(
    staff, make_event, form, paused, said
) -> None:
    event = line_of(make_event, in_line=4210, in_shop=3)
    if paused:
        event_pause(event=event, actor="test", now=timezone.now())
    records = AuditRecord.objects.filter(event=event).count()
    text = confirmation_text(control(staff, event, **form))
    for words in said:
        assert words in text
    # Asking changes nothing: the confirmation page sends the control back, confirmed.
    assert AuditRecord.objects.filter(event=event).count() == records


def test_the_confirmation_page_sends_back_what_was_asked_and_does_it(staff, make_event) -> None:
    event = line_of(make_event, in_line=5, in_shop=1, capacity=4)
    asked = control(staff, event, action="admit", value="2").content.decode()
    form = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', asked))
    assert form.pop("csrfmiddlewaretoken")
    assert form == {"action": "admit", "value": "2", "confirmed": "yes"}
    done = control(staff, event, **form)
    assert done.status_code == 302
    let_in = AuditRecord.objects.filter(event=event, action="admitted", actor="staff:ann")
    assert let_in.count() == 2
    page = staff.get(f"/dashboard/events/{event.slug}/").content.decode()
    assert "On-sale night: 2 fans let in." in page


def test_admitting_now_never_passes_the_capacity(staff, make_event) -> None:
    event = line_of(make_event, in_line=50, in_shop=2, capacity=5)
    control(staff, event, action="admit", value="10", confirmed="yes")
    assert QueueEntry.objects.filter(event=event, status="admitted").count() == 5
    for bad in ("0", "-1", "10001", "ten", ""):
        reply = control(staff, event, action="admit", value=bad, confirmed="yes")
        assert reply.status_code == 302
    assert QueueEntry.objects.filter(event=event, status="admitted").count() == 5
    page = staff.get(f"/dashboard/events/{event.slug}/").content.decode()
    assert "Give the number of fans to let in as a whole number from 1 to 10,000." in page


def controls_shown(client: Client, event: Event) -> set[str]:
    page = client.get(f"/dashboard/events/{event.slug}/").content.decode()
    return set(re.findall(r'name="action" value="(\w+)"', page)) | (
        {"message"} if 'id="message-input"' in page else set()
    )


def test_only_what_applies_in_the_on_sales_state_is_offered(staff, make_event) -> None:
    now = timezone.now()
    event = line_of(make_event, in_line=2, in_shop=1)
    live = {"pause", "admit", "close", "capacity", "rate", "mode", "message", "sold_out"}
    assert controls_shown(staff, event) == live
    event_pause(event=event, actor="test", now=now)
    assert controls_shown(staff, event) == live - {"pause"} | {"resume"}
    event_update(event=event, actor="test", now=now, changes={"mode": EventMode.MAINTENANCE})
    assert controls_shown(staff, event) == live - {"pause", "admit"} | {"resume"}
    later = make_event(
        slug="later",
        prequeue_opens_at=now + timedelta(hours=1),
        starts_at=now + timedelta(hours=2),
    )
    assert controls_shown(staff, later) == live - {"admit"}
    prequeue = make_event(
        slug="prequeue", prequeue_opens_at=now - timedelta(hours=1), starts_at=now + timedelta(1)
    )
    assert controls_shown(staff, prequeue) == live - {"admit"}
    event_close(event=event, actor="test", now=now)
    closed = staff.get(f"/dashboard/events/{event.slug}/").content.decode()
    assert controls_shown(staff, event) == set()
    assert "nothing left to steer" in closed and 'id="fig-wait"' not in closed
    ended = make_event(
        slug="ended", starts_at=now - timedelta(hours=2), ends_at=now - timedelta(hours=1)
    )
    assert controls_shown(staff, ended) == set()
    assert staff.get("/dashboard/events/ended/stats").json()["wait_text"] == "–"


def test_a_control_that_does_not_apply_is_refused_not_done(staff, make_event) -> None:
    now = timezone.now()
    event = make_event()
    event_close(event=event, actor="test", now=now)
    records = AuditRecord.objects.filter(event=event).count()
    for form in (
        {"action": "pause"},
        {"action": "mode", "value": "queue"},
        {"action": "capacity", "value": "9"},
        {"action": "message", "message": "hi"},
    ):
        assert control(staff, event, **form, confirmed="yes").status_code == 302
    event.refresh_from_db()
    assert (event.capacity, event.message) == (100, "")
    assert AuditRecord.objects.filter(event=event).count() == records
    page = staff.get(f"/dashboard/events/{event.slug}/").content.decode()
    assert "On-sale onsale is closed: there is nothing left to steer." in page
    upcoming = make_event(slug="soon", starts_at=now + timedelta(hours=1))
    control(staff, upcoming, action="admit", value="5", confirmed="yes")
    page = staff.get("/dashboard/events/soon/").content.decode()
    assert "has not started: nobody can be let in before the sale starts" in page
    running = make_event(slug="running")
    control(staff, running, action="resume", confirmed="yes")
    assert "is not paused" in staff.get("/dashboard/events/running/").content.decode()


def test_who_may_only_look_sees_no_controls_and_steers_nothing(make_event) -> None:
    event = line_of(make_event, in_line=3, in_shop=1)
    viewer = staff_client("viv", "view_event")
    page = viewer.get(f"/dashboard/events/{event.slug}/").content.decode()
    assert controls_shown(viewer, event) == set() and "You may look, but not steer" in page
    for form in ({"action": "admit", "value": "1"}, {"action": "capacity", "no_limit": "1"}):
        assert control(viewer, event, **form, confirmed="yes").status_code == 302
        assert control(viewer, event, **form).status_code == 302  # no confirmation page either
    event.refresh_from_db()
    assert event.capacity == 1
    assert QueueEntry.objects.filter(event=event, status="admitted").count() == 1


@pytest.mark.parametrize(
    "form",
    [
        {"action": "admit", "value": "1"},
        {"action": "capacity", "no_limit": "1"},
        {"action": "message", "message": "hello"},
    ],
)
def test_the_new_controls_need_their_csrf_token(make_event, form) -> None:
    event = line_of(make_event, in_line=3, in_shop=1, capacity=2)
    browser = staff_client("eve", "change_event", csrf_checks=True)
    url = f"/dashboard/events/{event.slug}/control"
    records = AuditRecord.objects.filter(event=event).count()
    assert browser.post(url, form).status_code == 403
    assert browser.post(url, {**form, "confirmed": "yes"}).status_code == 403
    assert AuditRecord.objects.filter(event=event).count() == records
    token = browser.get(f"/dashboard/events/{event.slug}/").context["csrf_token"]
    done = browser.post(url, {**form, "confirmed": "yes", "csrfmiddlewaretoken": token})
    assert done.status_code == 302
    assert AuditRecord.objects.filter(event=event).count() > records


def test_the_message_is_confirmed_too_and_keeps_its_lines(staff, make_event) -> None:
    event = make_event()
    url = f"/dashboard/events/{event.slug}/message"
    asked = staff.post(url, {"message": " Doors at 8.\nBring ID. "})
    assert "Every waiting page shows this at once (0 fans in line):" in confirmation_text(asked)
    assert '<textarea name="message" hidden>Doors at 8.\nBring ID.</textarea>' in (
        asked.content.decode()
    )
    event.refresh_from_db()
    assert event.message == ""
    staff.post(url, {"message": "Doors at 8.\nBring ID.", "confirmed": "yes"})
    event.refresh_from_db()
    assert event.message == "Doors at 8.\nBring ID."
    cleared = confirmation_text(staff.post(url, {"message": "x", "clear": "1"}))
    assert "The message leaves every waiting page at once" in cleared
    assert "Yes, clear the message" in cleared


def test_the_page_links_the_fans_page(staff, make_event) -> None:
    event = make_event(slug="spring")
    page = staff.get(f"/dashboard/events/{event.slug}/").content.decode()
    assert '<a href="/e/spring/" id="fans-page-link"' in page
    assert event.control == EventControl.RUNNING
