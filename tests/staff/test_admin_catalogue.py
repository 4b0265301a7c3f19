"""The admin's list of on-sales filters by the dashboard's groups, in SQL, and shows states."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from staff.services import event_close, event_pause
from tests.events.bulk import bulk_events, spread
from tests.helpers import staff_client

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
LIST = "/admin/events/event/"


@pytest.fixture
def boss() -> Client:
    return staff_client("boss", superuser=True)


def listed(page) -> set[str]:
    return {event.slug for event in page.context["cl"].result_list}


def test_the_state_filter_has_the_dashboards_groups(boss, make_event) -> None:
    now = timezone.now()
    make_event(slug="open-gig")
    make_event(slug="lobby", prequeue_opens_at=now - HOUR, starts_at=now + HOUR)
    event_pause(event=make_event(slug="held"), actor="test", now=now)
    make_event(slug="soon", prequeue_opens_at=now + HOUR)
    event_close(event=make_event(slug="done"), actor="test", now=now)
    assert listed(boss.get(f"{LIST}?state=live")) == {"open-gig", "lobby", "held"}
    assert listed(boss.get(f"{LIST}?state=paused")) == {"held"}
    assert listed(boss.get(f"{LIST}?state=prequeue")) == {"lobby"}
    assert listed(boss.get(f"{LIST}?state=upcoming")) == {"soon"}
    assert listed(boss.get(f"{LIST}?state=ended&q=don")) == {"done"}  # with the search
    page = boss.get(LIST).content.decode()
    assert "By state" in page and "Live: pre-queue" in page
    assert 'class="field-state">Paused<' in page and 'class="field-state">Closed<' in page


def test_a_filtered_list_of_a_thousand_is_one_page(boss, django_assert_max_num_queries) -> None:
    bulk_events(spread(1000, now=timezone.now()))
    with django_assert_max_num_queries(12):
        page = boss.get(f"{LIST}?state=live&q=sale")
    assert page.status_code == 200
    assert len(page.context["cl"].result_list) == 50
    assert page.context["cl"].result_count == 334
