from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from dashboard.models import AuditVerdict
from queueing.beat import room_dispatch
from queueing.hot import stats
from queueing.line.expiry import sessions_expire
from queueing.models import QueueEntry
from queueing.web.latency import REGISTRY
from tests.helpers import entry_of, fans_join, poll, tick

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
    # Readiness, the on-sales with fans, their slugs, their figures (three grouped counts),
    # the scheduler, the chain verdicts: as many with 30 idle on-sales as with none.
    with django_assert_max_num_queries(8):
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


def _sample(text: str, line_start: str) -> float:
    """The value of the one series of ``text`` whose line starts with ``line_start``."""
    found = [line for line in text.splitlines() if line.startswith(line_start + " ")]
    assert len(found) == 1, (line_start, found)
    return float(found[0].rsplit(" ", 1)[1])


def test_the_workers_counters_are_read_from_redis_at_scrape(db) -> None:
    """Ticks and rebuilds are counted in the workers, which serve no /metrics: every web
    process reads the same figures from Redis."""
    stats.room_counter_add(stats.TICKS_DISPATCHED, 3)
    stats.room_counter_add(stats.TICKS_DROPPED)
    stats.rebuild_observe(0.3)
    stats.rebuild_observe(20.0)
    text = Client().get("/metrics").content.decode()
    assert _sample(text, "waitingroom_ticks_dispatched_total") == 3
    assert _sample(text, "waitingroom_ticks_dropped_total") == 1
    assert _sample(text, "waitingroom_hot_index_rebuilds_total") == 2
    assert _sample(text, 'waitingroom_hot_index_rebuild_seconds_bucket{le="0.5"}') == 1
    assert _sample(text, 'waitingroom_hot_index_rebuild_seconds_bucket{le="30"}') == 2
    assert _sample(text, 'waitingroom_hot_index_rebuild_seconds_bucket{le="+Inf"}') == 2
    assert _sample(text, "waitingroom_hot_index_rebuild_seconds_sum") == pytest.approx(20.3)


def test_a_tick_dispatched_is_counted(make_event) -> None:
    event = make_event(slug="ticking")
    fans_join(event.slug, 1)
    sent: list[int] = []
    room_dispatch(
        now=timezone.now(), send=lambda event_id, claim: sent.append(event_id), claim_seconds=2.0
    )
    assert sent == [event.pk]
    assert stats.room_counters().ticks_dispatched == 1


def test_refusals_are_counted_by_status_and_code(make_event, settings) -> None:
    make_event(slug="limited")
    settings.WR_JOIN_LIMIT_PER_IP = 1
    before = (
        REGISTRY.get_sample_value(
            "waitingroom_refusals_total", {"status": "429", "reason": "rate_limited"}
        )
        or 0
    )
    client = Client(REMOTE_ADDR="10.9.9.9")
    assert (
        client.post("/api/v1/events/limited/join", content_type="application/json").status_code
        == 201
    )
    refused = client.post("/api/v1/events/limited/join", content_type="application/json")
    assert refused.status_code == 429
    after = REGISTRY.get_sample_value(
        "waitingroom_refusals_total", {"status": "429", "reason": "rate_limited"}
    )
    assert after == before + 1


def test_pools_queue_and_chain_failures_are_exported(make_event) -> None:
    event = make_event(slug="audited")
    AuditVerdict.objects.create(
        event=event, ok=False, checked_hash="0" * 64, checked_at=timezone.now(), problem="x"
    )
    text = Client().get("/metrics").content.decode()
    assert _sample(text, "waitingroom_audit_chain_failures") == 1
    assert 'waitingroom_redis_pool_connections{state="idle"}' in text
    # The tests' own database connections are not pooled (the processes' are: the
    # observability test scrapes a running room).
    pooled = "pool" in settings.DATABASES["default"]["OPTIONS"]
    assert ('waitingroom_db_pool_connections{state="size"}' in text) == pooled
    assert f'waitingroom_celery_queue_depth{{queue="{settings.CELERY_TASK_DEFAULT_QUEUE}"}}' in text
    # django-prometheus's figures of the requests Django served.
    assert "django_http_requests_total_by_method_total" in text


def test_admissions_never_go_back_when_a_fan_goes_back_in_line(make_event) -> None:
    """A re-entry clears the fan's admitted_at; the counter keeps the earlier admission (from
    the trail's ``reentered`` record), and the next one adds to it."""
    event = make_event(capacity=1, rate_per_minute=0, heartbeat_seconds=600, reentry_seconds=300)
    first, _ = fans_join(event.slug, 2)
    tick(event)
    assert poll(first)["status"] == "admitted"  # the pass collected
    QueueEntry.objects.filter(pk=entry_of(first).pk).update(
        pass_expires_at=timezone.now() - timedelta(seconds=1)
    )
    sessions_expire(event_id=event.id, now=timezone.now())
    tick(event)  # the freed place goes to the second fan
    assert Client().post(f"/api/v1/tickets/{first}/reenter").status_code == 200
    text = Client().get("/metrics").content.decode()
    assert _sample(text, f'waitingroom_admissions_total{{event="{event.slug}"}}') == 2
    assert _sample(text, f'waitingroom_active{{event="{event.slug}"}}') == 1
    assert _sample(text, f'waitingroom_waiting{{event="{event.slug}"}}') == 1
