"""Access codes cannot be guessed at the join budget: wrong codes have a small budget of their
own per client address and on-sale (queueing/web/abuse.py, ``wrong_code_gate``)."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from config.asgi import django_asgi_app
from queueing.hot import rate_limits
from queueing.hot.client import HotIndexUnavailable
from queueing.models import AuditRecord, QueueEntry
from queueing.records.audit_verify import audit_chain_verify
from queueing.web import abuse
from queueing.web.hot_paths import HotPaths
from staff.services import TierSpec, event_close
from tests.asgi import asgi_call
from tests.helpers import join, new_fan, staff_client

pytestmark = pytest.mark.django_db

CODE = "FAN-CLUB-1"
BUDGET = override_settings(
    WR_WRONG_CODES_PER_ADDRESS=10,
    WR_WRONG_CODES_WINDOW_SECONDS=600,
    # The general join limits out of the way: this is about the wrong-code budget alone.
    WR_JOIN_LIMIT_PER_IP=0,
    WR_JOIN_LIMIT_PER_IDENTITY=0,
)


def _presale(make_event: Any, slug: str = "presale") -> Any:
    return make_event(
        slug=slug,
        capacity=0,
        tiers=[
            TierSpec(name="Fans", priority=10, access_codes=[CODE]),
            TierSpec(name="General", priority=100),
        ],
    )


def _guess(slug: str, code: str, client: Client | None = None) -> Any:
    return join(client or new_fan(), slug, {"access_code": code})


@BUDGET
def test_the_eleventh_coded_join_is_refused_even_with_the_right_code(make_event) -> None:
    event = _presale(make_event)
    assert [_guess(event.slug, f"GUESS-{i}").status_code for i in range(10)] == [400] * 10
    refused = _guess(event.slug, CODE)
    assert refused.status_code == 429
    assert refused.json()["error"] == "rate_limited"
    assert "wrong access codes" in refused.json()["detail"]
    assert 590 <= int(refused["Retry-After"]) <= 600
    assert _guess(event.slug, "GUESS-X").status_code == 429
    assert not QueueEntry.objects.exists()
    # Joins without a code are not affected.
    assert join(new_fan(), event.slug).status_code == 201
    # Another address still has its whole budget, and the right code works there.
    elsewhere = _guess(event.slug, CODE, Client(REMOTE_ADDR="203.0.113.9"))
    assert elsewhere.status_code == 201
    # Another on-sale is not affected from the same address.
    other = _presale(make_event, "other")
    assert _guess(other.slug, CODE).status_code == 201
    assert _guess(other.slug, "GUESS-0").status_code == 400


@BUDGET
def test_right_codes_spend_nothing(make_event) -> None:
    """A venue's NAT full of fan-club members joining with their code is not refused."""
    event = _presale(make_event)
    assert [_guess(event.slug, CODE).status_code for _ in range(15)] == [201] * 15
    assert [_guess(event.slug, f"GUESS-{i}").status_code for i in range(10)] == [400] * 10
    assert _guess(event.slug, "GUESS-10").status_code == 429


@BUDGET
def test_the_budget_comes_back_when_the_window_has_passed(make_event, monkeypatch) -> None:
    event = _presale(make_event)
    for i in range(10):
        _guess(event.slug, f"GUESS-{i}")
    assert _guess(event.slug, CODE).status_code == 429
    later = time.time() + 601
    monkeypatch.setattr(abuse, "time", SimpleNamespace(time=lambda: later))
    assert _guess(event.slug, CODE).status_code == 201


@BUDGET
def test_a_closed_sale_answers_as_closed_and_spends_nothing(make_event) -> None:
    event = _presale(make_event)
    event_close(event=event, actor="test", now=timezone.now())
    statuses = {_guess(event.slug, f"GUESS-{i}").json()["error"] for i in range(12)}
    assert statuses == {"event_closed"}
    assert not AuditRecord.objects.filter(action="rejected").exists()


@BUDGET
def test_wrong_codes_are_audited_without_the_code(make_event) -> None:
    event = _presale(make_event)
    for code in ("GUESS-1", "guess-1 ", "GUESS-2"):
        _guess(event.slug, code)
    join(new_fan(), event.slug)  # a code-less join is no rejection
    records = list(AuditRecord.objects.filter(event=event, action="rejected").order_by("seq"))
    assert len(records) == 3
    assert {r.actor for r in records} == {"fan"}
    assert all(r.data["reason"] == "invalid_access_code" for r in records)
    assert "GUESS" not in json.dumps([r.data for r in records]).upper()
    # The same code (as typed, normalised) has the same tag; another code another one.
    tags = [r.data["code_tag"] for r in records]
    assert tags[0] == tags[1] != tags[2]
    assert audit_chain_verify(event_id=event.id).ok


@BUDGET
def test_the_waiting_page_keeps_the_same_budget(make_event) -> None:
    event = _presale(make_event)
    page = f"/e/{event.slug}/"
    for i in range(10):
        assert Client().post(page, {"access_code": f"GUESS-{i}"}).status_code == 400
    refused = Client().post(page, {"access_code": CODE})
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 600
    # The API shares the budget of that address and on-sale.
    assert _guess(event.slug, CODE).status_code == 429
    assert Client().post(page, {}).status_code == 302  # no code: joins


@BUDGET
def test_without_redis_the_budget_is_off_not_a_failure(make_event, monkeypatch) -> None:
    event = _presale(make_event)

    def unreachable(*args: Any, **kwargs: Any) -> None:
        raise HotIndexUnavailable("down")

    # The budget's counters cannot be reached; the rest of the room's Redis can.
    monkeypatch.setattr(rate_limits, "run_script", unreachable)
    assert [_guess(event.slug, f"GUESS-{i}").status_code for i in range(12)] == [400] * 12
    assert _guess(event.slug, CODE).status_code == 201


@BUDGET
def test_the_dashboard_shows_wrong_codes_of_the_last_hour(make_event) -> None:
    event = _presale(make_event)
    for i in range(4):
        _guess(event.slug, f"GUESS-{i}")
    staff = staff_client("ann", "view_event")
    page = staff.get(f"/dashboard/events/{event.slug}/").content.decode()
    assert "Wrong access codes (last hour)" in page
    assert '<strong id="fig-wrong-codes">4</strong>' in page
    stats = staff.get(f"/dashboard/events/{event.slug}/stats").json()
    assert stats["wrong_access_codes_last_hour"] == 4


@pytest.mark.django_db(transaction=True)
@BUDGET
def test_a_storm_of_parallel_guesses_gets_ten_answers(make_event) -> None:
    """Guesses that arrive together (one batch of the lean join path, or several) are judged
    one after the other: ten wrong codes are answered, every other guess, the right code
    among them, is refused."""
    event = _presale(make_event)
    hot = HotPaths(django_asgi_app)
    codes = [f"GUESS-{i}" for i in range(30)] + [CODE]

    async def storm() -> list[Any]:
        return await asyncio.gather(
            *(
                asgi_call(
                    hot,
                    "POST",
                    f"/api/v1/events/{event.slug}/join",
                    body=json.dumps({"access_code": code}).encode(),
                    headers={"idempotency-key": f"bot-{i}"},
                )
                for i, code in enumerate(codes)
            )
        )

    replies = asyncio.run(storm())
    statuses = [r.status for r in replies]
    assert statuses.count(400) == 10
    assert statuses.count(429) == 21
    assert replies[-1].status == 429
    assert not QueueEntry.objects.filter(event=event).exists()
    assert AuditRecord.objects.filter(event=event, action="rejected").count() == 10
