"""The gate with a real nginx: deploy/nginx/gate.conf.template, rendered and run by
deploy/nginx/run.sh with Debian's nginx in front of a sample shop (tests/echo_shop.py), asks
the room (real gunicorn) about every request. Without a pass the fan goes to the room; a pass
in the URL becomes the cookie and the URL is asked again without it; with the cookie the shop
answers; a bad pass, or one whose session ended, goes to the room."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.test import override_settings
from django.utils import timezone

from queueing.models import QueueEntry
from queueing.passes.signing import pass_issue
from tests.edge import needs_nginx
from tests.faults import kill_process_group
from tests.gate_rig import SLUG, STATE_SECONDS, GatedShop, gated_shop
from tests.http import pass_complete

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    needs_nginx,
]


@pytest.fixture
def shop() -> Iterator[GatedShop]:
    with gated_shop() as rig:
        yield rig


def test_the_shop_opens_only_to_a_valid_pass_through_nginx(make_event, shop) -> None:
    event = make_event(slug=SLUG, capacity=3, rate_per_minute=0, heartbeat_seconds=600)
    fan = shop.fan()

    # No pass: to the room, with the page asked for to come back to.
    away = fan.request("GET", "/seats/12?row=a")
    assert away.status == 302, away.body
    assert away.headers["location"] == shop.room_location("/seats/12?row=a")
    assert "set-cookie" not in away.headers
    assert (away.headers["cache-control"], away.headers["vary"]) == ("private, no-store", "Cookie")

    # The pass in the URL (the room's redirect_url): the cookie, and the same URL without it.
    token = shop.admitted_pass(event)
    entered = fan.request("GET", f"/seats/12?row=a&wr_pass={token}")
    assert entered.status == 302, entered.body
    assert entered.headers["location"] == f"{shop.nginx.base_url}/seats/12?row=a"
    cookie = entered.headers["set-cookie"]
    assert cookie.startswith(f"wr_pass_{SLUG}={token}; Max-Age=")
    assert cookie.endswith("; Path=/; HttpOnly; SameSite=Lax; Secure")  # the shop is HTTPS
    assert fan.cookies == {f"wr_pass_{SLUG}": token}
    assert entered.headers["cache-control"] == "private, no-store"  # it carries the pass
    assert entered.headers["vary"] == "Cookie"

    # With the cookie, the shop answers the page asked for.
    inside = fan.request("GET", "/seats/12?row=a")
    assert inside.status == 200, inside.body
    assert inside.body["path"] == "/seats/12?row=a"
    assert f"wr_pass_{SLUG}={token}" in inside.body["cookie"]
    assert fan.request("GET", "/basket").body["path"] == "/basket"

    # Whatever is wrong with a pass, in the URL or as the cookie, the fan goes to the room.
    for name, bad in bad_passes(shop, token, make_event).items():
        for path, cookies in ((f"/p?wr_pass={bad}", {}), ("/p", {f"wr_pass_{SLUG}": bad})):
            other = shop.fan()
            other.cookies = dict(cookies)
            refused = other.request("GET", path)
            assert refused.status == 302, (name, path, refused.body)
            assert refused.headers["location"] == shop.room_location("/p"), (name, path)

    # The shop reports the session completed: refused within WR_GATE_STATE_SECONDS (plus
    # one read) by the room, and so by nginx.
    pass_complete(shop.room, event.integration_key, token)
    at = time.monotonic()
    while (answer := fan.request("GET", "/seats/12?row=a")).status == 200:
        assert time.monotonic() - at < STATE_SECONDS + 1.0, "still let in past the bound"
        time.sleep(0.05)
    refused_after = time.monotonic() - at
    assert answer.status == 302 and answer.headers["location"] == shop.room_location(
        "/seats/12?row=a"
    )
    assert refused_after <= STATE_SECONDS + 0.5, refused_after

    # The room cannot be asked: nobody is let in unchecked.
    kill_process_group(shop.stack.procs["web"])
    down = fan.request("GET", "/seats/12?row=a")
    assert (down.status, down.headers["retry-after"]) == (503, "5"), down.body
    assert "cannot be reached" in down.body


def bad_passes(shop: GatedShop, token: str, make_event) -> dict[str, str]:  # type: ignore[no-untyped-def]
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, options={"verify_signature": False})
    entry = QueueEntry.objects.get(public_id=claims["sub"])
    now = timezone.now()
    with override_settings(WR_PUBLIC_URL=shop.room):  # the room's issuer, the room's key
        expired = pass_issue(
            event_slug=SLUG,
            ticket_id=entry.public_id,
            tier="General",
            admitted_at=now - timedelta(hours=1),
            expires_at=now - timedelta(minutes=1),
            now=now,
        )
    other = make_event(slug="other", capacity=1, rate_per_minute=0, heartbeat_seconds=600)
    return {
        "expired": expired,
        "forged": jwt.encode(claims, Ed25519PrivateKey.generate(), "EdDSA", headers=header),
        "another on-sale's": shop.admitted_pass(other),
        "malformed": "garbage",
    }
