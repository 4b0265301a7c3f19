import logging
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test import Client, RequestFactory, override_settings

from queueing.models import QueueEntry
from queueing.web import callers
from queueing.web.callers import client_ip
from tests.helpers import join

pytestmark = pytest.mark.django_db


@override_settings(WR_JOIN_LIMIT_PER_IP=5, WR_JOIN_LIMIT_PER_IDENTITY=0)
def test_joins_from_one_address_are_limited_with_retry_after(event) -> None:
    statuses = [join(Client(), event.slug).status_code for _ in range(7)]
    assert statuses == [201] * 5 + [429] * 2
    refused = join(Client(), event.slug)
    assert refused.json()["error"] == "rate_limited"
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert QueueEntry.objects.count() == 5
    other = join(Client(REMOTE_ADDR="203.0.113.9"), event.slug)
    assert other.status_code == 201


@override_settings(WR_JOIN_LIMIT_PER_IP=0, WR_JOIN_LIMIT_PER_IDENTITY=3)
def test_one_identity_hammering_join_is_limited(event) -> None:
    fan = Client()
    statuses = [join(fan, event.slug).status_code for _ in range(5)]
    assert statuses == [201, 200, 200, 429, 429]


@pytest.mark.django_db(transaction=True)
@override_settings(WR_JOIN_LIMIT_PER_IP=20, WR_JOIN_LIMIT_PER_IDENTITY=0)
def test_a_parallel_storm_cannot_slip_past_the_limit(make_event) -> None:
    event = make_event(slug="storm")

    def attempt(_):
        try:
            return join(Client(), event.slug).status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=16) as pool:
        statuses = list(pool.map(attempt, range(80)))
    assert statuses.count(201) == 20
    assert statuses.count(429) == 60
    assert QueueEntry.objects.filter(event=event).count() == 20


@pytest.mark.parametrize(
    ("hops", "forwarded", "expected"),
    [
        (0, "198.51.100.7", "10.0.0.1"),  # no trusted proxy: the header is ignored
        (1, "198.51.100.7", "198.51.100.7"),
        (1, "6.6.6.6, 198.51.100.7", "198.51.100.7"),  # a forged left part changes nothing
        (2, "6.6.6.6, 198.51.100.7, 10.0.0.2", "198.51.100.7"),
        (2, "198.51.100.7", "10.0.0.1"),  # fewer hops than proxies: not trusted
        (1, "not-an-ip", "10.0.0.1"),
        (1, "2001:DB8::1", "2001:db8::1"),
    ],
)
def test_the_client_address_behind_trusted_proxies(settings, hops, forwarded, expected) -> None:
    settings.WR_TRUSTED_PROXY_COUNT = hops
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


@pytest.mark.parametrize(
    ("hops", "forwarded"),
    [
        (1, "banana"),
        (1, "1.2.3.4, not-an-ip"),
        (1, ""),
        (1, "198.51.100.7, "),  # the trusted position is empty: not the client's value left of it
        (2, "6.6.6.6, , 10.0.0.2"),
        (1, "198.51.100.7:4711"),
        (1, "[2001:db8::1]"),
        (1, "[2001:db8::1]:4711"),
        (1, "fe80::1%eth0"),
        (1, "198.51.100.7/32"),
        (1, "0x7f.1"),
    ],
)
def test_a_trusted_position_without_an_address_falls_back_to_the_peer_with_a_warning(
    settings, caplog, monkeypatch, hops, forwarded
) -> None:
    monkeypatch.setattr(callers, "_not_an_address_warnings", callers._Sometimes(every_seconds=60))
    settings.WR_TRUSTED_PROXY_COUNT = hops
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    with caplog.at_level(logging.WARNING, logger="queueing.web.callers"):
        assert client_ip(request) == "10.0.0.1"
    (warning,) = caplog.records
    assert "X-Forwarded-For" in warning.getMessage()
    assert "10.0.0.1" in warning.getMessage()


def test_the_warning_is_given_once_a_minute_with_a_count(settings, caplog, monkeypatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(callers.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(callers, "_not_an_address_warnings", callers._Sometimes(every_seconds=60))
    settings.WR_TRUSTED_PROXY_COUNT = 1
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="banana")
    with caplog.at_level(logging.WARNING, logger="queueing.web.callers"):
        for _ in range(5):
            client_ip(request)
        clock[0] += 61
        client_ip(request)
    first, second = (record.getMessage() for record in caplog.records)
    assert "(1 such since the last warning)" in first
    assert "(5 such since the last warning)" in second


@override_settings(WR_TRUSTED_PROXY_COUNT=1, WR_JOIN_LIMIT_PER_IP=2, WR_JOIN_LIMIT_PER_IDENTITY=0)
def test_a_value_that_is_no_address_is_not_a_join_limit_key_of_its_own(event) -> None:
    # Every junk value would otherwise be a fresh budget: they all count against the peer.
    statuses = [
        join(Client(REMOTE_ADDR="10.0.0.1"), event.slug, X_Forwarded_For=junk).status_code
        for junk in ("banana", "198.51.100.7:1", "[2001:db8::1]", "pear")
    ]
    assert statuses == [201, 201, 429, 429]


def test_ipv6_clients_are_limited_per_slash_64() -> None:
    from queueing.web.callers import rate_key_for_ip

    assert rate_key_for_ip("2001:db8:1:2:aaaa::1") == rate_key_for_ip("2001:db8:1:2:ffff::9")
    assert rate_key_for_ip("2001:db8:1:3::1") != rate_key_for_ip("2001:db8:1:2::1")
    assert rate_key_for_ip("::ffff:198.51.100.7") == "198.51.100.7"
    assert rate_key_for_ip("198.51.100.7") == "198.51.100.7"
