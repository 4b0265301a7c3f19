"""The dashboard's catalogue of on-sales: grouped by state, searched, paged, with each row's
figures, and as cheap with a thousand on-sales as with thirty."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.catalogue_figures import Pace
from queueing import in_process
from queueing.beat import event_tick
from queueing.hot import keys
from staff.services import event_close, event_pause
from tests.events.bulk import bulk_events, spread
from tests.helpers import fans_join, staff_client

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


@pytest.fixture
def staff() -> Client:
    return staff_client("ann", "view_event")


def slugs(page) -> list[str]:
    return [row.event.slug for row in page.context["catalogue"].rows]


def tab_counts(page) -> dict[str, int]:
    return {tab.group.value: tab.count for tab in page.context["catalogue"].tabs}


@pytest.fixture
def sales(make_event):
    """One on-sale in each state."""
    now = timezone.now()
    make_event(slug="open-gig", starts_at=now - HOUR)
    make_event(slug="lobby", prequeue_opens_at=now - HOUR, starts_at=now + HOUR)
    event_pause(event=make_event(slug="held"), actor="test", now=now)
    make_event(slug="next-week", prequeue_opens_at=now + 2 * HOUR, starts_at=now + 3 * HOUR)
    make_event(slug="tomorrow", prequeue_opens_at=now + HOUR)
    event_close(event=make_event(slug="done"), actor="test", now=now)


def test_live_upcoming_and_ended_each_in_their_order(staff, sales) -> None:
    page = staff.get("/dashboard/")
    assert page.status_code == 200
    assert page.context["catalogue"].group == "live"  # the default while any is live
    assert tab_counts(page) == {"live": 3, "upcoming": 2, "ended": 1}
    assert set(slugs(page)) == {"open-gig", "lobby", "held"}
    assert slugs(staff.get("/dashboard/?tab=upcoming")) == ["tomorrow", "next-week"]
    assert slugs(staff.get("/dashboard/?tab=ended")) == ["done"]
    html = page.content.decode()
    assert re.search(r'id="tab-live" aria-current="page"', html)
    assert 'href="/dashboard/events/held/"' in html
    assert '<th scope="col">Admission from</th>' in html
    assert 'state-paused" data-fig="state">paused<' in html
    assert '<label for="catalogue-q">Search on-sales</label>' in html
    assert staff.get("/dashboard/?tab=nonsense").context["catalogue"].group == "live"


def test_without_live_on_sales_the_page_opens_on_upcoming(staff, make_event) -> None:
    make_event(slug="soon", prequeue_opens_at=timezone.now() + HOUR)
    page = staff.get("/dashboard/")
    assert page.context["catalogue"].group == "upcoming"
    assert slugs(page) == ["soon"]
    empty = staff.get("/dashboard/?tab=live").content.decode()
    assert "No live on-sales." in empty and "1 upcoming" in empty


def test_search_by_name_or_slug_lands_where_the_matches_are(staff, sales) -> None:
    page = staff.get("/dashboard/?q=DONE")
    assert tab_counts(page) == {"live": 0, "upcoming": 0, "ended": 1}
    assert page.context["catalogue"].group == "ended" and slugs(page) == ["done"]
    by_name = staff.get("/dashboard/?q=on-sale next")  # the fixture names them "On-sale <slug>"
    assert slugs(by_name) == ["next-week"]
    html = staff.get("/dashboard/?q=zzz").content.decode()
    assert "No on-sale has “zzz” in its name or slug." in html
    assert 'value="zzz"' in html


def test_a_search_with_a_nul_is_a_bad_request_not_a_crash(staff, sales) -> None:
    # PostgreSQL cannot compare text with a NUL: the search never reaches it.
    for url in ("/dashboard/", "/dashboard/catalogue/figures"):
        assert staff.get(url, {"q": "gig\x00"}).status_code == 400
        assert staff.get(url, {"q": "gig"}).status_code == 200


def test_sixty_on_sales_in_pages_of_25_that_keep_the_tab_and_search(staff, make_event) -> None:
    now = timezone.now()
    bulk_events(
        [{"slug": f"tour-{n:02d}", "prequeue_opens_at": now + (n + 1) * HOUR} for n in range(60)]
        + [{"slug": f"other-{n}", "prequeue_opens_at": now + 2 * HOUR} for n in range(5)]
    )
    first = staff.get("/dashboard/?tab=upcoming&q=tour")
    assert slugs(first) == [f"tour-{n:02d}" for n in range(25)]
    html = first.content.decode()
    assert "1–25 of 60" in html
    assert 'href="?tab=upcoming&amp;q=tour&amp;page=2" rel="next"' in html
    assert 'aria-label="Page 1" aria-current="page"' in html
    last = staff.get("/dashboard/?tab=upcoming&q=tour&page=3")
    assert slugs(last) == [f"tour-{n:02d}" for n in range(50, 60)]
    assert 'href="?tab=upcoming&amp;q=tour&amp;page=2" rel="prev"' in last.content.decode()
    assert slugs(staff.get("/dashboard/?tab=upcoming&q=tour&page=99")) == slugs(last)
    assert slugs(staff.get("/dashboard/?tab=upcoming&q=tour&page=x")) == slugs(first)


def test_each_row_shows_waiting_in_shop_and_pace(staff, make_event) -> None:
    busy = make_event(slug="busy", capacity=2, rate_per_minute=0)
    make_event(slug="quiet", capacity=100, rate_per_minute=60, session_seconds=900)
    fans_join(busy.slug, 5)
    event_tick(event_id=busy.id, now=timezone.now())  # two are let in: the capacity
    page = staff.get("/dashboard/?tab=live")
    figures = {row.event.slug: row.figures for row in page.context["catalogue"].rows}
    assert (figures["busy"].waiting, figures["busy"].active, figures["busy"].capacity) == (3, 2, 2)
    assert (figures["quiet"].waiting, figures["quiet"].active) == (0, 0)
    # No admission measured yet: the rate set, which the capacity (100 per 900 s) may bind.
    assert (figures["quiet"].pace.text, figures["quiet"].pace.source) == ("up to 60", "configured")
    # No pace set and none measured yet (one run): "no pace limit", the capacity alone binds.
    assert figures["busy"].pace is None
    row = re.search(r'<tr data-event="busy">.*?</tr>', page.content.decode(), re.S).group(0)
    assert '<td class="num" data-fig="waiting">3</td>' in row
    assert '<span data-fig="active">2</span> / 2' in row
    refreshed = staff.get("/dashboard/catalogue/figures?tab=live").json()
    assert refreshed["counts"] == {"live": 2, "upcoming": 0, "ended": 0}
    assert refreshed["rows"]["busy"]["waiting"] == 3 and refreshed["rows"]["busy"]["active"] == 2
    assert refreshed["rows"]["quiet"]["pace"] == "up to 60"
    assert refreshed["rows"]["quiet"]["pace_source"] == "configured"


def test_a_configured_pace_is_the_rate_set_per_minute(staff, make_event) -> None:
    """The demo's settings, 5 in the shop and 30 a minute, read "up to 30" configured: not
    0.33, the slowest the shop could be (5 places over a 15-minute session), which beside a
    rate of 30 looked like a rate per second shown per minute."""
    make_event(slug="demo", capacity=5, rate_per_minute=30, session_seconds=900)
    make_event(slug="paced", capacity=1000, rate_per_minute=30, session_seconds=900)
    make_event(slug="capped", capacity=5, rate_per_minute=0)
    make_event(slug="open", capacity=0, rate_per_minute=0)
    page = staff.get("/dashboard/?tab=live")
    figures = {row.event.slug: row.figures for row in page.context["catalogue"].rows}
    assert (figures["demo"].pace.text, figures["demo"].pace.source) == ("up to 30", "configured")
    # 30 a minute cannot fill 1,000 places in a session: the rate is the pace.
    assert (figures["paced"].pace.text, figures["paced"].pace.source) == ("30", "configured")
    assert figures["capped"].pace is None and figures["open"].pace is None
    rows = {
        slug: re.search(rf'<tr data-event="{slug}">.*?</tr>', page.content.decode(), re.S).group(0)
        for slug in ("demo", "open")
    }
    assert '<span data-fig="pace">up to 30</span>' in rows["demo"]
    assert '<span data-fig="active">0</span> / no cap' in rows["open"]
    assert '<span data-fig="pace">no pace limit</span>' in rows["open"]
    assert staff.get("/dashboard/catalogue/figures?tab=live").json()["rows"]["demo"]["pace"] == (
        "up to 30"
    )


@pytest.mark.parametrize(
    ("per_minute", "text"),
    [
        (240.4, "240"),
        (10, "10"),
        (9.96, "10"),
        (6.666, "6.7"),
        (6.0, "6"),
        (0.1333, "0.13"),
        (0.001, "0"),
    ],
)
def test_the_pace_is_shown_to_two_figures_or_whole_fans(per_minute: float, text: str) -> None:
    assert Pace(per_minute=per_minute, measured=True).text == text


def test_waiting_is_counted_in_postgresql_when_redis_lost_the_index(
    staff, make_event, redis_client
) -> None:
    event = make_event(slug="lost")
    fans_join(event.slug, 4)
    redis_client.delete(keys.epoch(event.id))
    assert staff.get("/dashboard/catalogue/figures").json()["rows"]["lost"]["waiting"] == 4


def test_the_catalogue_is_for_staff_only(make_event) -> None:
    assert Client().get("/dashboard/catalogue/figures").status_code == 302
    fan = staff_client("fan", staff=False)
    assert fan.get("/dashboard/").status_code == 302


def _queries(client: Client, url: str) -> int:
    in_process.clear_all()  # as cold as a page can be
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_a_thousand_on_sales_cost_what_thirty_do(staff, django_assert_max_num_queries) -> None:
    now = timezone.now()
    bulk_events(spread(30, now=now, prefix="few"))
    urls = ["/dashboard/", "/dashboard/?tab=ended&page=2", "/dashboard/?q=sale&tab=upcoming"]
    few = [_queries(staff, url) for url in urls]
    bulk_events(spread(1000, now=now))
    for url, queries in zip(urls, few, strict=True):
        in_process.clear_all()
        with django_assert_max_num_queries(12):
            page = staff.get(url)
        assert len(page.context["catalogue"].rows) == 25
        assert _queries(staff, url) == queries
    assert tab_counts(staff.get("/dashboard/")) == {"live": 344, "upcoming": 343, "ended": 343}
    with django_assert_max_num_queries(12):
        assert (
            len(staff.get("/dashboard/catalogue/figures?tab=upcoming&page=13").json()["rows"]) == 25
        )
