"""Queue-it's own Node connector (@queue-it/connector-javascript 5.0.1 from npm, unmodified) in
a small Node shop (integrations/queueit_node_shop/), configured with only a customer id,
secret key, event id and queue domain pointing at the room, against the real room: gunicorn
behind nginx with TLS (the connector only builds https:// queue URLs), under a certificate the
test makes and its client trusts. The fan waits in the room, comes back with a token the
connector accepts and is kept in by the connector's own cookie; forged, foreign and expired
tokens are refused by the connector itself, and the room acts on its error URLs; the cancel
action frees the slot; the AJAX path; and, with no web process left, nginx's busy page."""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from events.models import Event
from queueing.models import QueueEntry
from queueing.rules.queueit_token import RedirectType, token_mint, token_read
from tests.edge import PRODUCTION, Nginx, needs_nginx, readable_dir
from tests.faults import kill_process_group
from tests.helpers import tick
from tests.processes import Stack, free_port, running_stack, wait_until
from tests.queueit import Hop, TwoSiteBrowser, needs_node_shop, node_shop, page_config, token_of

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    needs_nginx,
    needs_node_shop,
]

CUSTOMER = "acme"
EVENT_ID = "sale-1"
SECRET = "a1b2c3d4-shop-secret-key-0123"
COOKIE = f"QueueITAccepted-SDFrts345E-V3_{EVENT_ID}"


@dataclass
class Rig:
    stack: Stack
    nginx: Nginx
    shop: str

    def fan(self) -> TwoSiteBrowser:
        return TwoSiteBrowser(self.nginx.tls)

    @property
    def room_origin(self) -> str:
        return self.nginx.base_url


@pytest.fixture
def rig() -> Iterator[Rig]:
    web_port = free_port()
    with (
        tempfile.TemporaryDirectory(prefix="wr-queueit-") as tmp,
        running_stack(**PRODUCTION) as stack,
    ):
        readable_dir(Path(tmp))  # nginx's workers (www-data) read its pages under it
        rundir = Path(tmp) / "nginx"
        # The room's pages' static files do not matter here: an empty directory.
        nginx = Nginx(
            rundir,
            web_servers=[f"127.0.0.1:{web_port}"],
            static_root=readable_dir(Path(tmp) / "static"),
        )
        stack.env["WR_PUBLIC_URL"] = nginx.base_url
        stack.web(workers=1, port=web_port)
        nginx.start()
        try:
            with node_shop(
                customer_id=CUSTOMER,
                secret_key=SECRET,
                event_id=EVENT_ID,
                # Exactly what a Queue-it shop sets: host[:port] of the queue.
                queue_domain=f"127.0.0.1:{nginx.https_port}",
                logdir=Path(tmp),
            ) as shop:
                yield Rig(stack=stack, nginx=nginx, shop=shop)
        finally:
            nginx.stop()


def queueit_sale(make_event, rig: Rig, **fields) -> Event:
    fields.setdefault("capacity", 1)
    fields.setdefault("rate_per_minute", 0)
    # Fans go straight in while the shop has room, and queue once it is full.
    fields.setdefault("mode", "safety_net")
    fields.setdefault("heartbeat_seconds", 600)
    return make_event(
        slug=EVENT_ID,
        target_url=f"{rig.shop}/",
        queueit_customer_id=CUSTOMER,
        queueit_secret_key=SECRET,
        **fields,
    )


def into_the_shop(fan: TwoSiteBrowser, hops: list[Hop], rig: Rig) -> Hop:
    """The last hop, asserting that the chain went room → shop with a token → shop's clean URL
    (the connector let the fan in on the token, set its cookie, dropped the token)."""
    *_, with_token, clean = hops
    assert with_token.url.startswith(rig.shop) and "queueittoken=" in with_token.url
    assert with_token.status == 302, with_token
    assert COOKIE in with_token.headers.get("set-cookie", "")
    assert "queueittoken" not in clean.url
    assert clean.status == 200, clean
    return clean


def test_a_fan_waits_in_the_room_and_the_connector_lets_them_in(make_event, rig) -> None:
    event = queueit_sale(make_event, rig)

    # The first fan: the shop sends them to the room, which has space: straight back with a
    # token the connector accepts ("safetynet": they did not wait).
    first = rig.fan()
    hops = first.follow(f"{rig.shop}/products/1?size=9")
    queue_hop = hops[1]
    assert queue_hop.url.startswith(f"{rig.room_origin}/?c={CUSTOMER}&e={EVENT_ID}&")
    inside = into_the_shop(first, hops, rig).json()
    assert inside["path"] == "/products/1?size=9"
    assert inside["redirectType"] == "safetynet"
    first_ticket = uuid.UUID(inside["queueId"])
    assert QueueEntry.objects.get(public_id=first_ticket).status == "admitted"

    # The second fan waits: the shop is full.
    second = rig.fan()
    hops = second.follow(f"{rig.shop}/products/2")
    waiting = hops[-1]
    assert waiting.url.startswith(rig.room_origin) and waiting.status == 200, waiting
    config = page_config(waiting.body)
    assert config["status"] == "waiting" and config["handoverUrl"].startswith("/?c=acme&e=sale-1")
    # Reloading (what the page does without JavaScript) keeps the one place.
    again = second.follow(waiting.url)[-1]
    assert page_config(again.body)["ticket"] == config["ticket"]
    assert QueueEntry.objects.filter(event=event).count() == 2

    # The first fan finishes: the shop's cancel action sends them through the room, which
    # ends their session as completed, and back to the shop's page.
    done = first.follow(f"{rig.shop}/cancel?order=7")
    assert done[1].url.startswith(f"{rig.room_origin}/cancel/multiple/{CUSTOMER}?wrl=")
    assert done[-1].url.startswith(f"{rig.shop}/cancel") and done[-1].json()["cancelled"]
    assert QueueEntry.objects.get(public_id=first_ticket).status == "completed"
    assert COOKIE not in first.jar(rig.shop)

    # The slot is free: the second fan is admitted, and their next load of the room's URL
    # takes them to the page they asked for with a token the connector accepts.
    tick(event)
    hops = wait_until(
        lambda: (
            (h := second.follow(urljoin_room(rig, config["handoverUrl"])))[-1].url.startswith(
                rig.shop
            )
            and h
        ),
        timeout=30,
        what="the second fan to be admitted",
    )
    inside = into_the_shop(second, hops, rig).json()
    assert inside["path"] == "/products/2"
    assert inside["redirectType"] == "queue"
    token = token_read(token_of(hops[-2].url), secret_key=SECRET)
    assert token is not None and str(token.queue_id) == inside["queueId"]
    assert QueueEntry.objects.get(public_id=token.queue_id).status == "admitted"

    # Later requests pass on the connector's cookie alone: the room is not asked again.
    for path in ("/products/2", "/basket"):
        later = second.get(f"{rig.shop}{path}")
        assert later.status == 200, later
        assert later.json()["path"] == path


def urljoin_room(rig: Rig, path: str) -> str:
    return f"{rig.room_origin}{path}"


def admitted_fan(make_event, rig: Rig) -> tuple[TwoSiteBrowser, Hop]:
    queueit_sale(make_event, rig, capacity=5)
    fan = rig.fan()
    hops = fan.follow(f"{rig.shop}/seats")
    return fan, into_the_shop(fan, hops, rig)


def test_forged_foreign_and_expired_tokens_are_refused_by_the_connector(make_event, rig) -> None:
    fan, inside = admitted_fan(make_event, rig)
    queue_id = uuid.UUID(inside.json()["queueId"])
    now = time.time()

    def token(**overrides) -> str:
        fields = {
            "event_id": EVENT_ID,
            "queue_id": queue_id,
            "now": now,
            "redirect_type": RedirectType.QUEUE,
            "secret_key": SECRET,
        }
        fields.update(overrides)
        return token_mint(**fields)

    good = token()
    tampered = good[:-1] + ("0" if good[-1] != "0" else "1")
    cases = [
        ("hash", tampered),  # one hex digit changed
        ("hash", token(secret_key="another-secret-key-0000")),  # signed with another key
        ("eventid", token(event_id="sale-2")),  # another waiting room's, its hash valid
        ("timestamp", token(now=now - 3600)),  # expired an hour ago
    ]
    for code, bad in cases:
        case = (code, bad)
        stranger = rig.fan()  # no connector cookie: the token alone decides
        # Room cookies of the admitted fan, so the timestamp case has a place to re-issue.
        stranger.jars[rig.room_origin] = dict(fan.jar(rig.room_origin))
        refused = stranger.get(f"{rig.shop}/seats?queueittoken={bad}")
        assert refused.status == 302, (case, refused)
        location = refused.location
        assert location.startswith(f"{rig.room_origin}/error/{code}/?c={CUSTOMER}&e={EVENT_ID}&")
        assert COOKIE not in stranger.jar(rig.shop), case
        query = parse_qs(urlsplit(location).query)
        assert query["queueittoken"] == [bad] and unquote(query["t"][0]).endswith("/seats")

        answer = stranger.get(location)
        if code == "timestamp":
            # The admitted fan's place stands: a fresh token at once, which the connector takes.
            assert answer.status == 302, answer
            assert answer.location.startswith(f"{rig.shop}/seats?queueittoken=e_{EVENT_ID}~")
            hops = stranger.follow(answer.location)
            assert hops[-1].status == 200 and hops[-1].json()["queueId"] == str(queue_id)
        else:
            # The shop's key or event id is not the room's: a page, and no token.
            assert answer.status == 403, (case, answer)
            assert "location" not in answer.headers
            # (The page's language switcher keeps its URL, the refused token included.)
            assert "~h_" not in answer.body.replace(bad, ""), case
            assert "The shop could not check your pass." in answer.body


def test_the_ajax_path_gives_a_queue_url_the_room_serves(make_event, rig) -> None:
    queueit_sale(make_event, rig)
    fan = rig.fan()
    page = f"{rig.shop}/products/3"
    reply = fan.get(
        f"{rig.shop}/api/basket", headers={"x-queueit-ajaxpageurl": page.replace(":", "%3A")}
    )
    assert reply.status == 200
    assert reply.headers["access-control-expose-headers"] == "x-queueit-redirect"
    queue_url = unquote(reply.headers["x-queueit-redirect"])
    assert queue_url.startswith(f"{rig.room_origin}/?c={CUSTOMER}&e={EVENT_ID}&")
    hops = fan.follow(queue_url)
    # The page, not the XHR, is where the fan comes back to.
    assert into_the_shop(fan, hops, rig).json()["path"] == "/products/3"


def test_enqueue_tokens_do_not_break_the_journey(make_event, rig, tmp_path) -> None:
    """A shop whose connector adds Queue-it's enqueue token (DefaultEnqueueTokenProvider) to
    the queue URL: the room takes the URL as any other and the connector lets the fan in."""
    with node_shop(
        customer_id=CUSTOMER,
        secret_key=SECRET,
        event_id=EVENT_ID,
        queue_domain=f"127.0.0.1:{rig.nginx.https_port}",
        logdir=tmp_path,
        enqueue_tokens=True,
    ) as shop:
        queueit_sale(make_event, rig, allowed_return_hosts=[urlsplit(shop).netloc])
        fan = rig.fan()
        hops = fan.follow(f"{shop}/products/5")
        queue_url = urlsplit(hops[1].url)
        assert hops[1].url.startswith(rig.room_origin)
        # A QT1 token: header.payload.hash, the header naming this customer and event.
        (enqueue_token,) = parse_qs(queue_url.query)["enqueuetoken"]
        assert enqueue_token.count(".") == 2
        *_, with_token, clean = hops
        assert with_token.url.startswith(shop) and "queueittoken=" in with_token.url
        assert COOKIE in with_token.headers.get("set-cookie", "")
        assert clean.status == 200 and clean.json()["path"] == "/products/5"
        assert clean.json()["redirectType"] == "safetynet"


def test_with_no_web_process_the_queue_url_gets_nginx_busy_page(make_event, rig) -> None:
    """The connector has no fallback: without the room it still sends fans to the queue
    domain. There nginx answers its busy page (503, retried by itself), and a fan's place and
    the shop's cookies are untouched (docs/queueit.md, "When the room cannot be reached")."""
    queueit_sale(make_event, rig, capacity=0, mode="queue")
    fan = rig.fan()
    queue_url = fan.get(f"{rig.shop}/products/4").location
    kill_process_group(rig.stack.procs["web"])
    busy = fan.get(queue_url)
    assert busy.status == 503, busy
    assert busy.headers["retry-after"] == "5"
    assert '<meta http-equiv="refresh" content="5">' in busy.body
    # The shop keeps sending fans to the room: its connector has no other answer.
    assert fan.get(f"{rig.shop}/products/4").location == queue_url
