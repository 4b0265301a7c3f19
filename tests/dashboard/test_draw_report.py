"""The report's "Registration and draw" (dashboard/draw_report.py), and what it says of a
random line's order."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.test import Client
from django.utils import timezone

from queueing.models import AuditAction, AuditRecord
from staff.services import event_close
from tests.helpers import (
    AUDITOR,
    fans_join,
    invitations_settled,
    registration_drawn,
    registration_window_open,
    registrations_made,
    staff_client,
)
from tests.processes import ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture
def auditor() -> Client:
    return staff_client("audrey", **AUDITOR)


def test_after_the_draw_the_report_gives_its_commitment_seed_and_invitations(
    auditor, event
) -> None:
    window = registration_drawn(event, by_mail=5, by_shop=5, winners=4, waitlist=3)
    invitations_settled(event, used=2)
    html = auditor.get("/dashboard/events/onsale/report").content.decode()
    assert 'id="report-draw"' in html
    assert f'id="report-list-root">{window.list_root}<' in html
    assert 'id="report-list-count">10<' in html
    assert f'id="report-draw-seed">{event.draw_seed}<' in html
    assert event.draw_seed_sha256 in html
    drawn = AuditRecord.objects.get(event=event, action=AuditAction.DRAWN).data["tiers"]
    assert drawn == {"General": {"registrations": 10, "winners": 4, "waitlist": 3}}
    # Tier, in the list, winners, waitlisted, used, lapsed, not used yet, from the waitlist:
    # two winners used theirs, two lapsed and invited two of the waitlist.
    row = (
        '<th scope="row">General</th><td class="num">10</td><td class="num">4</td>'
        '<td class="num">3</td><td class="num">2</td><td class="num">2</td>'
        '<td class="num">2</td><td class="num">2</td>'
    )
    assert row in html
    assert "python3 verify_draw.py draw.json" in html
    assert "/api/v1/events/onsale/draw/registrations" in html


def test_the_commands_shown_check_the_draw_with_the_script(auditor, event, tmp_path) -> None:
    """What the report tells an outsider to fetch, fetched here through the same API, makes
    scripts/verify_draw.py say the draw holds."""
    registration_drawn(event, by_shop=6, winners=2, waitlist=2)
    client = Client()
    parts = [client.get("/api/v1/events/onsale/draw").content.decode()]
    url = "/api/v1/events/onsale/draw/registrations"
    while url:
        answer = client.get(url)
        parts.append(answer.content.decode())
        url = answer.json()["next"]
    parts.append(client.get("/api/v1/events/onsale").content.decode())
    (tmp_path / "draw.json").write_text("\n".join(parts))
    checked = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "verify_draw.py"), str(tmp_path / "draw.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "the draw holds" in checked.stdout
    html = auditor.get("/dashboard/events/onsale/report").content.decode()
    assert "curl -s http" in html and "/api/v1/events/onsale/draw &gt; draw.json" in html


def test_before_the_draw_the_report_keeps_the_seed(auditor, event) -> None:
    registration_window_open(event)
    registrations_made(event, by_shop=3)
    html = auditor.get("/dashboard/events/onsale/report").content.decode()
    assert 'id="report-draw-pending"' in html and "3 registrations so far" in html
    assert event.draw_seed not in html and event.draw_seed_sha256 in html


def test_an_on_sale_sold_first_come_has_no_draw_section(auditor, event) -> None:
    fans_join("onsale", 2)
    html = auditor.get("/dashboard/events/onsale/report").content.decode()
    assert 'id="report-draw"' not in html and 'id="report-random-order"' not in html


def test_a_random_line_is_said_random_and_judged_against_its_seeds_hash(
    auditor, make_event
) -> None:
    event = make_event(slug="lucky", queue_order="random")
    fans_join("lucky", 3)
    html = auditor.get("/dashboard/events/lucky/report").content.decode()
    assert 'id="report-random-order"' in html and "The order was random." in html
    assert event.shuffle_seed_sha256 in html
    assert event.shuffle_seed not in html  # secret while the line runs
    event_close(event=event, actor="test", now=timezone.now())
    html = auditor.get("/dashboard/events/lucky/report").content.decode()
    assert f'id="report-shuffle-seed">{event.shuffle_seed}<' in html
