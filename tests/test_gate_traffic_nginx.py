"""An on-sale's traffic rules through a real nginx (deploy/nginx/gate.conf.template with Debian's
nginx, the real room, a sample shop): a bypass reaches the shop without a pass and writes no
entry, a block is nginx's plain 403 page, header and cookie conditions, an IPv6 network
matched for a fan behind the one trusted proxy in front of nginx (and not for anyone else who
writes the same X-Forwarded-For), a change by staff applied within the bound, the decisions
counted on /metrics; and the two policies for a room that cannot be asked: closed (the busy
page) and open for a while (the shop unchecked, every such request logged, then the busy
page)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils import timezone

from events.models import Event
from queueing.models import QueueEntry
from staff.services import event_update
from tests.edge import needs_nginx
from tests.faults import kill_process_group
from tests.gate_rig import RULES_SECONDS, SLUG, TRUSTED_PROXY, GatedShop, gated_shop
from tests.http import request

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    needs_nginx,
]

RULES = [
    {"action": "bypass", "path": ["/static/*"]},
    {"action": "block", "user_agent": ["*badbot*"]},
    {"action": "bypass", "header": {"x-shop-probe": "s3cret"}, "cookie": {"staff": "yes"}},
    {"action": "bypass", "ip": ["2001:db8:77::/48"]},
]
BUSY = "The waiting room cannot be reached just now. Please try again in a moment.\n"


@pytest.fixture
def shop() -> Iterator[GatedShop]:
    with gated_shop() as rig:
        yield rig


def test_traffic_rules_through_nginx(make_event, shop) -> None:
    event = make_event(slug=SLUG, capacity=3, rate_per_minute=0, traffic_rules=RULES)
    fan = shop.fan()

    # A bypass by path: the shop answers without a pass, and nobody joined anything.
    static = fan.request("GET", "/static/app.css?v=2")
    assert static.status == 200, static.body
    assert static.body["path"] == "/static/app.css?v=2"
    assert "set-cookie" not in static.headers
    assert fan.request("GET", "/static/../seats").status == 302  # nginx's /seats
    assert not QueueEntry.objects.exists()

    # Anything else still needs a pass.
    away = fan.request("GET", "/seats")
    assert away.status == 302 and away.headers["location"] == shop.room_location("/seats")

    # A block by user agent: nginx's plain 403 page.
    blocked = fan.request("GET", "/seats", headers={"User-Agent": "Mozilla/5.0 BadBot/2"})
    assert (blocked.status, blocked.body) == (403, "This request is blocked.\n")
    assert blocked.headers["cache-control"] == "private, no-store"

    # A header and a cookie, both needed.
    staff_fan = shop.fan()
    staff_fan.cookies = {"staff": "yes"}
    assert staff_fan.request("GET", "/seats", headers={"X-Shop-Probe": "s3cret"}).status == 200
    assert staff_fan.request("GET", "/seats").status == 302
    assert fan.request("GET", "/seats", headers={"X-Shop-Probe": "s3cret"}).status == 302

    # An IPv6 fan behind the one trusted proxy: its X-Forwarded-For names them.
    proxy = shop.fan(source=TRUSTED_PROXY)
    behind = proxy.request("GET", "/seats", headers={"X-Forwarded-For": "2001:db8:77:1::5"})
    assert behind.status == 200, behind.body
    outside = proxy.request("GET", "/seats", headers={"X-Forwarded-For": "2001:db8:78::5"})
    assert outside.status == 302
    # Only the last entry is the proxy's word; anything left of it is the client's to invent.
    prefixed = proxy.request(
        "GET", "/seats", headers={"X-Forwarded-For": "2001:db8:77::5, 2001:db8:78::5"}
    )
    assert prefixed.status == 302
    # Anyone else writing the same header, or the header nginx sends the room, is ignored.
    for spoof in ("X-Forwarded-For", "X-Original-Remote-Addr"):
        spoofed = fan.request("GET", "/seats", headers={spoof: "2001:db8:77:1::5"})
        assert spoofed.status == 302, spoof
    assert not QueueEntry.objects.exists()

    # The decisions are counted on the room's /metrics.
    metrics = request("GET", f"{shop.room}/metrics").body
    counted = {
        action: float(found.group(1))
        for action in ("bypass", "queue", "block")
        if (
            found := re.search(
                rf'waitingroom_traffic_decisions_total\{{action="{action}",event="{SLUG}"\}} '
                r"([0-9.e+]+)",
                metrics,
            )
        )
    }
    assert counted == {"bypass": 3, "queue": 8, "block": 1}, counted

    # Staff change the rules: applied within the bound (plus one read, and slack for a
    # loaded machine).
    event_update(
        event=Event.objects.get(pk=event.pk),
        actor="test",
        now=timezone.now(),
        changes={"traffic_rules": [{"action": "block", "path": ["/static/*"]}]},
    )
    changed_at = time.monotonic()
    while (answer := fan.request("GET", "/static/app.css")).status == 200:
        assert time.monotonic() - changed_at < RULES_SECONDS + 5, "the change never applied"
        time.sleep(0.05)
    assert answer.status == 403
    assert time.monotonic() - changed_at <= RULES_SECONDS + 1.5


def test_the_closed_policy_lets_nobody_in_while_the_room_cannot_be_asked(make_event, shop) -> None:
    make_event(slug=SLUG, traffic_rules=RULES)
    assert shop.fan().request("GET", "/static/a").status == 200
    kill_process_group(shop.stack.procs["web"])
    for path in ("/static/a", "/seats"):
        down = shop.fan().request("GET", path)
        assert (down.status, down.body, down.headers["retry-after"]) == (503, BUSY, "5")
    assert not (shop.nginx.state_dir / "unchecked.log").exists()


FAIL_OPEN_MINUTES = 0.05  # 3 seconds
NJS = Path("/usr/lib/nginx/modules/ngx_http_js_module.so")


@pytest.mark.skipif(
    not NJS.exists(),
    reason="njs is not installed: scripts/ensure_nginx.sh installs libnginx-mod-http-js",
)
def test_the_open_policy_lets_requests_through_unchecked_for_at_most_n_minutes(
    make_event,
) -> None:
    with gated_shop(unreachable="open", fail_open_minutes=FAIL_OPEN_MINUTES) as shop:
        make_event(slug=SLUG, capacity=1, rate_per_minute=0)
        fan = shop.fan()
        assert fan.request("GET", "/seats").status == 302  # the room answers: checked
        unchecked_log = shop.nginx.state_dir / "unchecked.log"

        kill_process_group(shop.stack.procs["web"])
        down_at = time.monotonic()
        through = 0
        while (answer := fan.request("GET", f"/seats?n={through}")).status == 200:
            assert answer.body["path"] == f"/seats?n={through}"  # the shop, unchecked
            through += 1
            assert time.monotonic() - down_at < FAIL_OPEN_MINUTES * 60 + 5, "never closed"
            time.sleep(0.1)
        closed_after = time.monotonic() - down_at
        assert (answer.status, answer.body, answer.headers["retry-after"]) == (503, BUSY, "5")
        assert through >= 5, through
        assert FAIL_OPEN_MINUTES * 60 - 0.5 <= closed_after <= FAIL_OPEN_MINUTES * 60 + 1.5

        # Counted: one line per unchecked request in a log of its own; the spell's start
        # in the error log.
        assert len(_lines(unchecked_log)) == through
        assert all(f"/seats?n={n} " in line for n, line in enumerate(_lines(unchecked_log)))
        assert "requests go to the shop unchecked for at most 0.05 minutes" in shop.nginx.log()
        # Still the busy page: the spell goes on while checks keep failing.
        time.sleep(0.5)
        assert fan.request("GET", "/seats").status == 503
        assert len(_lines(unchecked_log)) == through


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
