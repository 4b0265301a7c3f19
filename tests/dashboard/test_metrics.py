import pytest
from django.test import Client

from tests.helpers import fans_join

pytestmark = pytest.mark.django_db


def test_metrics_are_prometheus_text_with_event_figures_and_latencies(make_event) -> None:
    event = make_event(slug="gig")
    tickets = fans_join(event.slug, 3)
    Client().get(f"/api/v1/tickets/{tickets[0]}")
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert 'waitingroom_waiting{event="gig"} 3.0' in text
    assert 'waitingroom_active{event="gig"} 0.0' in text
    assert 'waitingroom_admissions_total{event="gig"} 0.0' in text
    assert 'waitingroom_expirations_total{event="gig"} 0.0' in text
    assert "waitingroom_join_seconds_bucket" in text
    assert "waitingroom_status_seconds_count" in text


def test_a_scrape_costs_what_the_busy_on_sales_cost(
    make_event, django_assert_max_num_queries
) -> None:
    busy = make_event(slug="busy")
    fans_join(busy.slug, 2)
    for i in range(30):
        make_event(slug=f"idle-{i}")
    Client().get("/metrics")  # layouts cached, as in a running process
    with django_assert_max_num_queries(4):
        text = Client().get("/metrics").content.decode()
    assert 'waitingroom_waiting{event="busy"} 2.0' in text
    assert 'event="idle-0"' not in text


def test_metrics_are_not_for_the_public(db, settings) -> None:
    assert Client(REMOTE_ADDR="8.8.8.8").get("/metrics").status_code == 403
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 200
    settings.WR_METRICS_TOKEN = "scrape-me"
    assert Client().get("/metrics").status_code == 403
    authorized = Client().get("/metrics", headers={"authorization": "Bearer scrape-me"})
    assert authorized.status_code == 200


def test_behind_a_proxy_metrics_judge_the_client_not_the_proxy(db, settings) -> None:
    """nginx in front stands on a private address itself: the client it names decides."""
    settings.WR_TRUSTED_PROXY_COUNT = 1
    via_proxy = Client(REMOTE_ADDR="10.0.0.2")
    assert via_proxy.get("/metrics", headers={"x-forwarded-for": "8.8.8.8"}).status_code == 403
    spoofed = "10.1.2.3, 8.8.8.8"  # the left-most entry is the client's to invent
    assert via_proxy.get("/metrics", headers={"x-forwarded-for": spoofed}).status_code == 403
    assert via_proxy.get("/metrics", headers={"x-forwarded-for": "10.1.2.3"}).status_code == 200
    # A scraper inside the network talks to the web process directly, with no proxy header.
    assert via_proxy.get("/metrics").status_code == 200
