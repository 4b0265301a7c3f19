"""New identities in a laned line: the room draws them in the lane of the batch's newcomers
(queueing/web/callers.py), and the lane is still the keyed hash of the identity; a browser's
identity in a laned on-sale is that on-sale's own, new at its first join there."""

from __future__ import annotations

import hashlib

import pytest
from django.conf import settings
from django.http import HttpResponse
from django.test import RequestFactory

from queueing.rules.lanes import first_in_lane, lane_of
from queueing.web.callers import (
    identity_cookie_name,
    identity_from_request,
    identity_remember,
    newcomers_batch,
    newcomers_lane,
)


def _cookie_identity(token: str) -> str:
    return hashlib.sha256(f"cookie:{token}".encode()).hexdigest()


def test_a_batchs_new_identities_share_one_lane_and_are_theirs_by_the_keyed_hash() -> None:
    factory = RequestFactory()
    with newcomers_batch():
        lane = newcomers_lane(8)
        identities = [
            identity_from_request(factory.post("/"), lanes=8, event_id=7) for _ in range(30)
        ]
    assert len({i.digest for i in identities}) == 30  # all new, all different
    for identity in identities:
        assert identity.new_cookie_token is not None
        assert identity.digest == _cookie_identity(identity.new_cookie_token)
        assert lane_of(identity.digest, lanes=8) == lane


def test_the_newcomers_lane_turns_over_every_lane_batch_by_batch() -> None:
    seen = set()
    for _ in range(8):
        with newcomers_batch():
            seen.add(newcomers_lane(8))
    assert seen == set(range(8))


def test_a_new_identity_comes_back_as_itself_from_its_cookie() -> None:
    factory = RequestFactory()
    new = identity_from_request(factory.post("/"), lanes=16, event_id=7)
    response = HttpResponse()
    identity_remember(response, new)
    again = factory.post("/")
    cookie = identity_cookie_name(7)
    again.COOKIES[cookie] = response.cookies[cookie].value
    known = identity_from_request(again, lanes=16, event_id=7)
    assert (known.digest, known.new_cookie_token) == (new.digest, None)


def test_identities_that_are_not_new_keep_the_lane_their_hash_gives() -> None:
    factory = RequestFactory()
    keys = [f"key-{n}" for n in range(40)]
    with newcomers_batch():
        lanes = {
            lane_of(
                identity_from_request(factory.post("/", HTTP_IDEMPOTENCY_KEY=key), lanes=8).digest,
                lanes=8,
            )
            for key in keys
        }
    assert len(lanes) > 1  # by their hash, not the batch's lane


def test_one_lane_draws_a_plain_token() -> None:
    new = identity_from_request(RequestFactory().post("/"), lanes=1)
    assert new.new_cookie_token is not None and "." not in new.new_cookie_token


@pytest.mark.parametrize("lanes", [2, 8, 64])
def test_first_in_lane_agrees_with_lane_of(lanes: int) -> None:
    identities = [f"fan-{n}" for n in range(400)]
    for lane in (0, lanes - 1):
        found = first_in_lane(identities, lanes=lanes, lane=lane)
        assert lane_of(found, lanes=lanes) == lane
        assert all(lane_of(i, lanes=lanes) != lane for i in identities[: identities.index(found)])


def _browser_back_with(response: HttpResponse, names: list[str]):
    again = RequestFactory().post("/")
    for name in names:
        again.COOKIES[name] = response.cookies[name].value
    return again


def test_a_browser_known_to_the_room_is_new_to_a_laned_on_sale_and_then_known_there() -> None:
    factory = RequestFactory()
    room = identity_from_request(factory.post("/"))
    response = HttpResponse()
    identity_remember(response, room)
    browser = _browser_back_with(response, [settings.WR_IDENTITY_COOKIE])
    assert identity_from_request(browser, lanes=1, event_id=7).digest == room.digest
    with newcomers_batch():
        lane = newcomers_lane(8)
        laned = identity_from_request(browser, lanes=8, event_id=7)
    assert laned.digest != room.digest and laned.new_cookie_token is not None
    assert lane_of(laned.digest, lanes=8) == lane
    identity_remember(response, laned)
    assert identity_cookie_name(7) in response.cookies
    back = _browser_back_with(response, [settings.WR_IDENTITY_COOKIE, identity_cookie_name(7)])
    again = identity_from_request(back, lanes=8, event_id=7)
    assert (again.digest, again.new_cookie_token) == (laned.digest, None)
    other = identity_from_request(back, lanes=8, event_id=8)  # another laned on-sale: new there
    assert other.digest not in (room.digest, laned.digest)
