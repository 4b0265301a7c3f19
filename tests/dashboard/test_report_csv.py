"""The report's CSV (dashboard/report_csv.py): its ``draw`` section, for an on-sale sold by a
draw, before the draw (no seed) and after it."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from tests.helpers import (
    AUDITOR,
    invitations_settled,
    registration_drawn,
    registration_window_open,
    registrations_made,
    staff_client,
)

pytestmark = pytest.mark.django_db

CSV = "/dashboard/events/onsale/report.csv"


@pytest.fixture
def auditor() -> Client:
    return staff_client("audrey", **AUDITOR)


def draw_rows(client: Client) -> dict[tuple[str, str], str]:
    """The ``draw`` section as ``{(tier, measure): value}``; its rows never repeat a key."""
    rows = list(csv.DictReader(io.StringIO(client.get(CSV).content.decode())))
    drawn = [(r["tier"], r["measure"], r["value"]) for r in rows if r["section"] == "draw"]
    found = {(tier, measure): value for tier, measure, value in drawn}
    assert len(found) == len(drawn)
    return found


def test_an_on_sale_sold_first_come_has_no_draw_rows(auditor, event) -> None:
    assert draw_rows(auditor) == {}


def test_before_the_draw_the_window_and_registrations_without_the_seed(auditor, event) -> None:
    window = registration_window_open(event, winners=3, waitlist=2, invitation_hours=24)
    registrations_made(event, by_mail=2, by_shop=3)
    rows = draw_rows(auditor)
    assert rows["", "opens_at"] == window.opens_at.isoformat()
    assert rows["", "closes_at"] == window.closes_at.isoformat()
    assert (rows["", "winners_per_tier"], rows["", "waitlist_per_tier"]) == ("3", "2")
    assert rows["", "invitation_hours"] == "24"
    assert rows["", "draw_seed_sha256"] == event.draw_seed_sha256
    for tier in ("All tiers", "General"):
        assert rows[tier, "registered"] == "5"
        assert (rows[tier, "registered_by_email"], rows[tier, "registered_by_shop"]) == ("2", "3")
        assert rows[tier, "confirmed"] == "5"
    not_yet = {"draw_seed", "drawn_at", "list_root", "list_count", "winners", "in_list"}
    assert not_yet.isdisjoint(measure for _, measure in rows)
    assert event.draw_seed not in auditor.get(CSV).content.decode()


def test_after_the_draw_its_commitment_seed_outcomes_and_invitations(auditor, event) -> None:
    window = registration_drawn(event, by_mail=5, by_shop=5, winners=4, waitlist=3)
    invitations_settled(event, used=2)
    rows = draw_rows(auditor)
    assert rows["", "drawn_at"] == window.drawn_at.isoformat()
    assert (rows["", "list_root"], rows["", "list_count"]) == (window.list_root, "10")
    assert rows["", "draw_seed"] == event.draw_seed
    assert rows["", "draw_seed_sha256"] == event.draw_seed_sha256
    # As the page's table: 10 in the list, 4 winners and 3 waitlisted (3 lost); two winners
    # used theirs, two lapsed and invited two of the waitlist, whose invitations are unused.
    for tier in ("All tiers", "General"):
        assert rows[tier, "registered"] == "10"
        drawn = [rows[tier, m] for m in ("in_list", "winners", "waitlisted", "lost")]
        assert drawn == ["10", "4", "3", "3"]
        invitations = [rows[tier, f"invitations_{m}"] for m in ("sent", "used", "lapsed", "unused")]
        assert invitations == ["6", "2", "2", "2"]
        assert rows[tier, "waitlist_promoted"] == "2"
