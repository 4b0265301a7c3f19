"""The gate's check with an on-sale's traffic rules, on the lean ASGI path and the Django view:
bypass (204, no pass, no cookie, nothing written), block (403 traffic_blocked), queue (the
pass check); the fan's address from X-Original-Remote-Addr, else the room's own rule; the
decisions counted; the rules read once per WR_TRAFFIC_RULES_SECONDS, not per request, and a
change staff make applied within that bound."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from events.models import Event
from queueing.line import gate_rules
from queueing.models import QueueEntry
from queueing.web.hot_paths import HotPaths
from queueing.web.latency import REGISTRY
from staff.services import event_update
from tests.asgi import AsgiReply, asgi_call, call

pytestmark = pytest.mark.django_db(transaction=True)

SHOP = {"x-original-host": "shop.example", "x-original-proto": "https"}
BLOCKED = {"error": "traffic_blocked", "detail": "This request is refused by the on-sale."}
RULES = [
    {"action": "bypass", "path": ["/static/*", "/health"]},
    {"action": "block", "user_agent": ["*badbot*"]},
    {"action": "bypass", "header": {"x-shop-probe": "s3cret"}, "cookie": {"staff": "yes"}},
    {"action": "bypass", "ip": ["2001:db8:77::/48", "198.51.100.0/24"]},
]


@pytest.fixture
def lean_only() -> HotPaths:
    async def refuse(*args: Any) -> None:
        raise AssertionError("went to Django")

    return HotPaths(refuse)


def check(app: Any, uri: str = "/", slug: str = "sale", **headers: str) -> AsgiReply:
    sent = {**SHOP, "x-original-uri": uri, **{k.replace("_", "-"): v for k, v in headers.items()}}
    return call(app, "GET", f"/gate/{slug}/check", headers=sent)


def django_check(uri: str = "/", slug: str = "sale", **headers: str) -> Any:
    sent = {**SHOP, "x-original-uri": uri, **{k.replace("_", "-"): v for k, v in headers.items()}}
    return Client().get(f"/gate/{slug}/check", headers=sent)


def decisions(slug: str, action: str) -> float:
    labels = {"event": slug, "action": action}
    return REGISTRY.get_sample_value("waitingroom_traffic_decisions_total", labels) or 0.0


def test_a_bypass_is_a_bare_204_that_needs_no_pass_and_writes_nothing(
    make_event, lean_only
) -> None:
    make_event(slug="sale", traffic_rules=RULES)
    for uri in ("/static/app.css?v=3", "/static/img/a/b.png", "/health"):
        with CaptureQueriesContext(connection) as queries:
            reply = check(lean_only, uri)
            django = django_check(uri)
        assert reply.status == 204, (uri, reply.raw)
        assert reply.headers["cache-control"] == "private, no-store"
        assert "set-cookie" not in reply.headers
        assert "x-waiting-room-redirect" not in reply.headers
        assert "x-waiting-room-location" not in reply.headers
        assert django.status_code == 204
        assert "Set-Cookie" not in django.headers
        assert not [q for q in queries.captured_queries if not q["sql"].startswith("SELECT")]
    assert not QueueEntry.objects.exists()
    # The path is judged as nginx routes it: no way out of /static/ by dots or escapes.
    for uri in ("/static/../checkout", "/static/%2e%2e/checkout", "/health/", "/x/static/a"):
        assert check(lean_only, uri).status == 401, uri
        assert django_check(uri).status_code == 401, uri


def test_a_block_is_a_403_before_any_pass_is_looked_at(make_event, lean_only) -> None:
    make_event(slug="sale", traffic_rules=RULES)
    reply = check(lean_only, "/seats", user_agent="Mozilla/5.0 (BadBot/2.1)")
    assert (reply.status, reply.body) == (403, BLOCKED)
    assert reply.headers["cache-control"] == "private, no-store"
    django = django_check("/seats", user_agent="Mozilla/5.0 (BadBot/2.1)")
    assert (django.status_code, django.json()) == (403, BLOCKED)
    # First match wins: the static files stay open to it.
    assert check(lean_only, "/static/a.css", user_agent="BadBot").status == 204
    assert check(lean_only, "/seats", user_agent="Mozilla/5.0").status == 401


def test_header_and_cookie_conditions_must_all_match(make_event, lean_only) -> None:
    make_event(slug="sale", traffic_rules=RULES)
    both = {"x_shop_probe": "s3cret", "cookie": "a=1; staff=yes; wr_pass_sale=x"}
    assert check(lean_only, "/seats", **both).status == 204
    assert django_check("/seats", **both).status_code == 204
    assert check(lean_only, "/seats", x_shop_probe="s3cret").status == 401
    assert check(lean_only, "/seats", cookie="staff=yes").status == 401
    assert check(lean_only, "/seats", x_shop_probe="S3CRET", cookie="staff=yes").status == 401


def test_the_address_is_the_one_the_web_server_names_else_the_rooms_own_rule(
    make_event, lean_only, settings
) -> None:
    make_event(slug="sale", traffic_rules=RULES)
    named = "x_original_remote_addr"
    assert check(lean_only, "/seats", **{named: "2001:db8:77:1::9"}).status == 204
    assert check(lean_only, "/seats", **{named: "2001:db8:78::9"}).status == 401
    assert check(lean_only, "/seats", **{named: "::ffff:198.51.100.20"}).status == 204
    assert check(lean_only, "/seats", **{named: "not an address"}).status == 401
    assert django_check("/seats", **{named: "198.51.100.20"}).status_code == 204
    # Without the header: the room's own rule, here its one trusted proxy's X-Forwarded-For.
    assert check(lean_only, "/seats", x_forwarded_for="198.51.100.20").status == 401
    settings.WR_TRUSTED_PROXY_COUNT = 1
    assert check(lean_only, "/seats", x_forwarded_for="198.51.100.20").status == 204
    assert django_check("/seats", x_forwarded_for="198.51.100.20").status_code == 204
    assert check(lean_only, "/seats", x_forwarded_for="198.51.100.20, 10.1.1.1").status == 401
    # The header, when the web server sends it, wins over the room's rule.
    spoof = {named: "192.0.2.1", "x_forwarded_for": "198.51.100.20"}
    assert check(lean_only, "/seats", **spoof).status == 401


def test_every_decision_of_an_on_sale_is_counted_and_unknown_slugs_are_not(
    make_event, lean_only
) -> None:
    make_event(slug="sale", traffic_rules=RULES)
    make_event(slug="plain")
    before = {a: decisions("sale", a) for a in ("bypass", "queue", "block")}
    plain_before = decisions("plain", "queue")
    check(lean_only, "/static/a")
    check(lean_only, "/static/b")
    check(lean_only, "/seats")
    check(lean_only, "/seats", user_agent="badbot")
    django_check("/seats", user_agent="badbot")
    check(lean_only, "/seats", slug="plain")
    check(lean_only, "/seats", slug="nobody-made-this")
    assert {a: decisions("sale", a) - before[a] for a in before} == {
        "bypass": 2,
        "queue": 1,
        "block": 2,
    }
    assert decisions("plain", "queue") - plain_before == 1
    assert decisions("nobody-made-this", "queue") == 0
    metrics = Client().get("/metrics").content.decode()
    assert 'waitingroom_traffic_decisions_total{action="block",event="sale"}' in metrics


def test_rules_are_read_once_per_bound_and_a_change_applies_within_it(
    make_event, lean_only, settings, monkeypatch
) -> None:
    settings.WR_TRAFFIC_RULES_SECONDS = 0.6
    event = make_event(slug="sale", traffic_rules=RULES)
    reads: list[float] = []
    read = gate_rules.gate_rules_read

    def counted(slug: str) -> Any:
        reads.append(time.monotonic())
        return read(slug)

    monkeypatch.setattr(gate_rules, "gate_rules_read", counted)
    headers = {**SHOP, "x-original-uri": "/seats", "user-agent": "BadBot"}

    async def ask() -> int:
        return (await asgi_call(lean_only, "GET", "/gate/sale/check", headers=headers)).status

    async def scenario() -> tuple[list[int], float]:
        statuses = await asyncio.gather(*(ask() for _ in range(20)))
        assert len(reads) == 1  # twenty requests at once, one read
        statuses += [await ask() for _ in range(20)]
        assert len(reads) == 1  # and none per request after it
        await asyncio.to_thread(
            event_update,
            event=event,
            actor="test",
            now=timezone.now(),
            changes={"traffic_rules": []},
        )
        changed_at = time.monotonic()
        while await ask() == 403:
            assert time.monotonic() - changed_at < 10, "the change never applied"
            await asyncio.sleep(0.02)
        return statuses, time.monotonic() - changed_at

    statuses, applied_after = asyncio.run(scenario())
    assert statuses == [403] * 40
    # Within the bound plus one read (a loaded machine: generous).
    assert applied_after <= settings.WR_TRAFFIC_RULES_SECONDS + 1.0, applied_after
    assert len(reads) <= 2 + int(applied_after / (settings.WR_TRAFFIC_RULES_SECONDS / 2)) + 1


def test_rules_that_no_longer_parse_queue_everyone(make_event, lean_only) -> None:
    make_event(slug="sale")
    Event.objects.filter(slug="sale").update(traffic_rules=[{"action": "allow"}])
    assert check(lean_only, "/static/a").status == 401
