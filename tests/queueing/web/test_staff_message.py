"""Staff's word to the line (issue 16, part 1): set and cleared from the dashboard, audited,
carried by every ticket status answer (lean path and Django alike, from the cached layout, no
query), shown as plain text on every fans' page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from config.asgi import django_asgi_app
from events.models import Event
from queueing import in_process
from queueing.models import AuditAction, AuditRecord
from queueing.web.hot_paths import HotPaths
from tests.asgi import call
from tests.helpers import join, new_fan, staff_client

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert(1)</script>\n<img src=x onerror="alert(2)">'


def say(client: Client, slug: str, **form: str) -> Any:
    """The message form, confirmed (the dashboard asks first: tests/dashboard)."""
    return client.post(f"/dashboard/events/{slug}/message", {**form, "confirmed": "yes"})


def test_staff_set_and_clear_the_message_from_the_dashboard_audited(make_event) -> None:
    event = make_event(slug="word")
    client = staff_client("staff-True", "change_event")
    assert (
        say(client, "word", message="  Presale sold out.\nGeneral sale at 10:00.  ").status_code
        == 302
    )
    event.refresh_from_db()
    assert event.message == "Presale sold out.\nGeneral sale at 10:00."
    page = client.get("/dashboard/events/word/").content.decode()
    assert 'id="clear-message"' in page and "General sale at 10:00." in page
    assert say(client, "word", message="ignored", clear="1").status_code == 302
    event.refresh_from_db()
    assert event.message == ""
    changes = [
        r.data["changes"]["message"]
        for r in AuditRecord.objects.filter(event=event, action=AuditAction.EVENT_CHANGED)
    ]
    assert changes == [
        ["", "Presale sold out.\nGeneral sale at 10:00."],
        ["Presale sold out.\nGeneral sale at 10:00.", ""],
    ]
    assert AuditRecord.objects.filter(event=event, actor="staff:staff-True").count() == 2


def test_a_message_too_long_is_refused_and_nothing_changes(make_event) -> None:
    event = make_event(slug="long")
    client = staff_client("staff-True", "change_event")
    reply = say(client, "long", message="x" * 501)
    assert reply.status_code == 302
    event.refresh_from_db()
    assert event.message == ""
    assert "500" in client.get("/dashboard/events/long/").content.decode()


def test_staff_who_may_only_look_cannot_change_the_message(make_event) -> None:
    event = make_event(slug="look")
    say(staff_client("staff-False"), "look", message="Hello")
    event.refresh_from_db()
    assert event.message == ""
    assert Client().post("/dashboard/events/look/message", {"message": "x"}).status_code == 302
    event.refresh_from_db()
    assert event.message == ""


def test_every_ticket_status_answer_carries_the_message_lean_and_django(make_event) -> None:
    event = make_event(slug="poll", capacity=0)
    ticket = join(new_fan(), "poll").json()["ticket"]
    path = f"/api/v1/tickets/{ticket}"

    async def refuse(*args: Any) -> None:
        raise AssertionError("went to Django")

    lean = HotPaths(refuse)
    assert call(lean, "GET", path).body["message"] is None
    Event.objects.filter(pk=event.pk).update(message="Back at nine.")
    in_process.clear_all()  # as the cache's two seconds running out
    # Django's path reads the layout again (in this test's transaction, which the lean path's
    # own thread could not see); the lean path then answers from it.
    assert Client().get(path).json()["message"] == "Back at nine."
    assert call(django_asgi_app, "GET", path).body["message"] == "Back at nine."
    assert call(lean, "GET", path).body["message"] == "Back at nine."


def test_the_lean_poll_reads_the_message_without_a_query(
    make_event, django_assert_num_queries
) -> None:
    make_event(slug="cheap", capacity=0, message="Hello")
    ticket = join(new_fan(), "cheap").json()["ticket"]

    async def refuse(*args: Any) -> None:
        raise AssertionError("went to Django")

    lean = HotPaths(refuse)
    call(lean, "GET", f"/api/v1/tickets/{ticket}")  # the layout is cached from here on
    with django_assert_num_queries(0):
        assert call(lean, "GET", f"/api/v1/tickets/{ticket}").body["message"] == "Hello"


@pytest.mark.parametrize("mode", ["queue", "maintenance"])
def test_the_page_shows_the_message_as_text_in_every_state(make_event, mode: str) -> None:
    make_event(slug="text", capacity=0, message=HOSTILE, mode=mode)
    fan = new_fan()
    # The join page (or, in maintenance, the notice), then the waiting page.
    first = fan.get("/e/text/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in first
    assert "<script>alert(1)" not in first and "<img src=x" not in first
    assert 'role="status" aria-live="polite"' in first
    if mode == "queue":
        fan.post("/e/text/")
        waiting = fan.get("/e/text/").content.decode()
        assert 'id="position"' in waiting
        assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in waiting


def test_without_a_message_the_live_region_is_there_but_empty(make_event) -> None:
    make_event(slug="none", capacity=0)
    fan = new_fan()
    fan.post("/e/none/")
    page = fan.get("/e/none/").content.decode()
    assert 'id="staff-message"' in page and 'id="staff-message-text" hidden' in page
