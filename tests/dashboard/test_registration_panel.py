"""An on-sale's registration and draw on its dashboard page (dashboard/registration_panel.py):
counts by tier from one grouped query, the draw's commitment once drawn, and the window set
through the staff API's own service by staff who may steer."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.registration_panel import registration_counts
from queueing.line.registration import registration_create
from queueing.models import AuditAction, AuditRecord, RegistrationWindow
from staff.services import TierSpec
from tests.helpers import (
    invitations_settled,
    registration_drawn,
    registration_window_open,
    registrations_made,
    staff_client,
)

pytestmark = pytest.mark.django_db


def figure(html: str, name: str) -> str:
    found = re.search(rf'id="fig-{name}">([^<]*)<', html)
    assert found, name
    return found.group(1)


def minutes(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")


def window_post(**fields: str) -> dict[str, str]:
    start = timezone.now().replace(second=0, microsecond=0) + timedelta(hours=1)
    return {
        "opens_at": minutes(start),
        "closes_at": minutes(start + timedelta(days=1)),
        "winners": "100",
        "waitlist": "20",
        "invitation_hours": "24",
        "shop_key": "",
        **fields,
    }


def test_an_on_sale_sold_first_come_says_so_and_offers_the_form(event) -> None:
    html = staff_client("ann", "change_event").get("/dashboard/events/onsale/").content.decode()
    assert 'id="registration-none"' in html and "sold first come" in html
    assert 'id="registration-form"' in html and "Open registration" in html


def test_staff_open_registration_from_the_page_audited_by_the_service(event) -> None:
    staff = staff_client("ann", "view_event", "change_event")
    sent = window_post(shop_key="s" * 40)
    reply = staff.post("/dashboard/events/onsale/registration", sent)
    assert reply.status_code == 302 and reply["Location"].endswith("#registration")
    window = RegistrationWindow.objects.get(event=event)
    assert (window.winners, window.waitlist, window.invitation_hours) == (100, 20, 24)
    assert minutes(window.opens_at) == sent["opens_at"] and window.shop_key == "s" * 40
    record = AuditRecord.objects.get(event=event, action=AuditAction.REGISTRATION_WINDOW_SET)
    assert record.actor == "staff:ann" and record.data["shop_key"] == "set"
    page = staff.get("/dashboard/events/onsale/").content.decode()
    assert "Registration <strong>not open yet</strong>" in page
    assert "s" * 40 not in page  # the key is never shown
    assert "Change the window" in page


def test_an_empty_shop_key_keeps_the_key_and_the_box_turns_the_route_off(event) -> None:
    registration_window_open(event)
    staff = staff_client("ann", "change_event")
    staff.post("/dashboard/events/onsale/registration", window_post())
    assert RegistrationWindow.objects.get(event=event).shop_key != ""
    staff.post("/dashboard/events/onsale/registration", window_post(shop_key_off="on"))
    assert RegistrationWindow.objects.get(event=event).shop_key == ""


@pytest.mark.parametrize(
    "fields",
    [
        {"closes_at": "2020-01-01T00:00"},
        {"winners": "-1"},
        {"winners": "lots"},
        {"invitation_hours": "0"},
        {"opens_at": "not a time"},
        {"shop_key": "short"},
        {"shop_key": "s" * 40, "shop_key_off": "on"},
    ],
)
def test_a_window_out_of_shape_comes_back_with_its_errors(event, fields) -> None:
    reply = staff_client("ann", "change_event").post(
        "/dashboard/events/onsale/registration", window_post(**fields)
    )
    assert reply.status_code == 400
    html = reply.content.decode()
    assert 'role="alert"' in html and 'id="registration-form"' in html
    assert not RegistrationWindow.objects.filter(event=event).exists()


def test_staff_who_may_only_look_see_the_counts_but_not_the_form(event) -> None:
    registration_window_open(event)
    viewer = staff_client("vic", "view_event")
    html = viewer.get("/dashboard/events/onsale/").content.decode()
    assert 'id="fig-registered"' in html and 'id="registration-form"' not in html
    assert "You may look, but not set the window" in html
    reply = viewer.post("/dashboard/events/onsale/registration", window_post(winners="1"))
    assert reply.status_code == 302
    assert RegistrationWindow.objects.get(event=event).winners == 10


def test_the_counts_come_by_tier_from_one_query(make_event, django_assert_num_queries) -> None:
    event = make_event(
        slug="tiers",
        tiers=[TierSpec(name="General"), TierSpec(name="Club", priority=1, access_codes=["C1"])],
    )
    registration_window_open(event)
    registrations_made(event, by_mail=3, by_shop=2)
    for n in range(2):  # left pending: registered, not confirmed
        registration_create(
            event=event, now=timezone.now(), email=f"club{n}@example.com", access_code="C1"
        )
    with django_assert_num_queries(1):
        counts = registration_counts(event)
    assert [(t.name, t.registered, t.confirmed) for t in counts] == [
        ("Club", 2, 0),
        ("General", 5, 5),
    ]
    html = staff_client("ann", "view_event").get("/dashboard/events/tiers/").content.decode()
    assert figure(html, "registered") == "7" and figure(html, "confirmed") == "5"


def test_after_the_draw_the_page_shows_its_commitment_and_the_invitations(event) -> None:
    window = registration_drawn(event, by_mail=4, by_shop=4, winners=3, waitlist=2)
    invitations_settled(event, used=1)
    html = (
        staff_client("ann", "view_event", "change_event")
        .get("/dashboard/events/onsale/")
        .content.decode()
    )
    assert "Registration <strong>drawn</strong>" in html
    assert figure(html, "registered") == "8" and figure(html, "confirmed") == "8"
    assert figure(html, "winners-invited") == "3"
    assert figure(html, "invitations-used") == "1"
    # Two winners lapsed and invited the two waitlisted, whose invitations are still unused.
    assert figure(html, "invitations-lapsed") == "2"
    assert figure(html, "waitlist-promoted") == "2"
    assert window.list_root in html and event.draw_seed in html
    assert 'id="registration-form"' not in html and "can no longer change" in html
    assert 'id="registrations-admin-link"' in html


def test_before_the_draw_the_seed_stays_secret(event) -> None:
    registration_window_open(event)
    registrations_made(event, by_shop=2)
    html = staff_client("ann", "change_event").get("/dashboard/events/onsale/").content.decode()
    assert event.draw_seed not in html and event.draw_seed_sha256 in html
    assert figure(html, "registered") == "2"


def test_a_drawn_window_is_refused_in_words(event) -> None:
    registration_drawn(event, by_shop=2)
    reply = staff_client("ann", "change_event").post(
        "/dashboard/events/onsale/registration", window_post()
    )
    assert reply.status_code == 400
    assert "The draw has taken place" in reply.content.decode()
    assert RegistrationWindow.objects.get(event=event).winners == 10
