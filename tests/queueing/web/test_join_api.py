from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from queueing.models import AuditRecord, QueueEntry
from staff.services import TierSpec, event_close
from tests.helpers import join, new_fan, staff_user

pytestmark = pytest.mark.django_db


def status(client: Client, ticket: str):
    return client.get(f"/api/v1/tickets/{ticket}")


def test_a_join_is_acknowledged_with_a_ticket_and_a_position(event) -> None:
    response = join(new_fan(), event.slug)
    assert response.status_code == 201
    body = response.json()
    assert body["event"] == event.slug
    assert body["status"] == "waiting"
    assert body["position"] == 1
    assert body["queue_length"] == 1
    assert "eta" in body
    assert float(response["X-Poll-After-Seconds"]) > 0
    # Acknowledged only once committed: the row and its audit record are in PostgreSQL.
    entry = QueueEntry.objects.get()
    assert AuditRecord.objects.filter(action="joined", ticket_id=entry.public_id).exists()


def test_sequential_joins_get_increasing_positions(event) -> None:
    positions = [join(new_fan(), event.slug).json()["position"] for _ in range(5)]
    assert positions == [1, 2, 3, 4, 5]


def test_status_reports_position_and_keeps_polling_header(event) -> None:
    fans = [new_fan() for _ in range(3)]
    tickets = [join(fan, event.slug).json()["ticket"] for fan in fans]
    response = status(fans[2], tickets[2])
    assert response.status_code == 200
    body = response.json()
    assert body["position"] == 3
    assert body["status"] == "waiting"
    assert body["pass"] is None and body["redirect_url"] is None
    assert "X-Poll-After-Seconds" in response


def test_leaving_shifts_everyone_behind_by_one(event) -> None:
    fans = [new_fan() for _ in range(5)]
    tickets = [join(fan, event.slug).json()["ticket"] for fan in fans]
    assert fans[1].delete(f"/api/v1/tickets/{tickets[1]}").status_code == 204
    positions = [status(new_fan(), t).json()["position"] for t in tickets]
    assert positions == [1, None, 2, 3, 4]
    assert status(new_fan(), tickets[1]).json()["status"] == "left"
    # Leaving twice is fine.
    assert new_fan().delete(f"/api/v1/tickets/{tickets[1]}").status_code == 204


def test_a_repeated_join_from_the_same_browser_returns_the_same_ticket(event) -> None:
    fan = new_fan()
    first = join(fan, event.slug)
    second = join(fan, event.slug)
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["ticket"] == second.json()["ticket"]
    assert QueueEntry.objects.count() == 1


def test_the_idempotency_key_identifies_clients_without_cookies(event) -> None:
    first = join(Client(), event.slug, **{"Idempotency-Key": "order-42"})
    second = join(Client(), event.slug, **{"Idempotency-Key": "order-42"})
    other = join(Client(), event.slug, **{"Idempotency-Key": "order-43"})
    assert (first.status_code, second.status_code, other.status_code) == (201, 200, 201)
    assert first.json()["ticket"] == second.json()["ticket"] != other.json()["ticket"]


def test_a_logged_in_user_has_one_ticket_across_browsers(event) -> None:
    user = staff_user("fan", staff=False)
    browsers = [Client(), Client()]
    for browser in browsers:
        browser.force_login(user)
    tickets = {join(b, event.slug).json()["ticket"] for b in browsers}
    assert len(tickets) == 1


def test_after_leaving_the_fan_may_join_again_at_the_back(event) -> None:
    fan = new_fan()
    ticket = join(fan, event.slug).json()["ticket"]
    join(new_fan(), event.slug)
    fan.delete(f"/api/v1/tickets/{ticket}")
    again = join(fan, event.slug)
    assert again.status_code == 201
    assert again.json()["ticket"] != ticket
    assert again.json()["position"] == 2


def test_access_codes_choose_the_tier_and_position_follows_tier_order(make_event) -> None:
    event = make_event(
        tiers=[
            TierSpec(name="Fans", priority=10, access_codes=["FAN-CLUB-123"]),
            TierSpec(name="General", priority=100),
        ]
    )
    general = [join(new_fan(), event.slug).json() for _ in range(2)]
    vip = join(new_fan(), event.slug, {"access_code": " fan-club-123 "})
    assert vip.status_code == 201
    assert vip.json()["position"] == 1
    assert [status(new_fan(), g["ticket"]).json()["position"] for g in general] == [2, 3]


def test_an_unknown_access_code_is_refused(event) -> None:
    response = join(new_fan(), event.slug, {"access_code": "NOPE"})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_access_code"


def test_an_on_sale_with_only_coded_tiers_needs_a_code(make_event) -> None:
    event = make_event(tiers=[TierSpec(name="Presale", access_codes=["PRE-1"])])
    response = join(new_fan(), event.slug)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_access_code"


def test_unknown_events_are_404(db) -> None:
    response = join(new_fan(), "no-such-event")
    assert response.status_code == 404
    assert response.json()["error"] == "event_not_found"


def test_joins_before_the_prequeue_opens_are_refused(make_event) -> None:
    now = timezone.now()
    event = make_event(
        prequeue_opens_at=now + timedelta(hours=1), starts_at=now + timedelta(hours=2)
    )
    response = join(new_fan(), event.slug)
    assert response.status_code == 409
    assert response.json()["error"] == "event_not_open"


def test_joins_in_the_prequeue_have_no_position(make_event) -> None:
    event = make_event(starts_at=timezone.now() + timedelta(hours=1))
    response = join(new_fan(), event.slug)
    assert response.status_code == 201
    body = response.json()
    assert (body["status"], body["position"], body["queue_length"]) == ("prequeue", None, 1)
    again = status(new_fan(), body["ticket"]).json()
    assert (again["status"], again["position"]) == ("prequeue", None)


def test_joins_after_close_or_end_are_refused(make_event) -> None:
    closed = make_event(slug="closed")
    event_close(event=closed, actor="test", now=timezone.now())
    make_event(
        slug="ended",
        starts_at=timezone.now() - timedelta(hours=2),
        ends_at=timezone.now() - timedelta(hours=1),
    )
    for slug in ("closed", "ended"):
        response = join(new_fan(), slug)
        assert response.status_code == 409
        assert response.json()["error"] == "event_closed"


def test_a_full_line_refuses_joins_with_retry_after(make_event) -> None:
    event = make_event(max_queue_length=2)
    assert [join(new_fan(), event.slug).status_code for _ in range(2)] == [201, 201]
    refused = join(new_fan(), event.slug)
    assert refused.status_code == 429
    assert refused.json()["error"] == "queue_full"
    assert int(refused["Retry-After"]) > 0
    assert QueueEntry.objects.count() == 2


def test_event_detail_reports_state_and_line(event) -> None:
    for _ in range(3):
        join(new_fan(), event.slug)
    body = Client().get(f"/api/v1/events/{event.slug}").json()
    assert body["slug"] == event.slug
    assert body["state"] == "open"
    assert body["queue_length"] == 3
    assert body["active"] == 0
    assert body["capacity"] == event.capacity
    assert set(body) >= {"name", "rate_per_minute", "eta_new", "starts_at", "ends_at"}


def test_unknown_tickets_are_404(event) -> None:
    from queueing.rules.ticket_codec import TicketRef, ticket_issue

    tier = event.tiers.get()
    ghost = ticket_issue(TicketRef(entry_id=999999, event_id=event.id, tier_id=tier.id))
    response = status(new_fan(), ghost)
    assert response.status_code == 404
    assert response.json()["error"] == "ticket_not_found"
