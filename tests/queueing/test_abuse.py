from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test import Client, RequestFactory, override_settings

from queueing.models import QueueEntry
from queueing.web.abuse import client_ip
from tests.conftest import join

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
    ],
)
def test_the_client_address_behind_trusted_proxies(settings, hops, forwarded, expected) -> None:
    settings.WR_TRUSTED_PROXY_COUNT = hops
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


def test_ipv6_clients_are_limited_per_slash_64() -> None:
    from queueing.web.abuse import rate_key_for_ip

    assert rate_key_for_ip("2001:db8:1:2:aaaa::1") == rate_key_for_ip("2001:db8:1:2:ffff::9")
    assert rate_key_for_ip("2001:db8:1:3::1") != rate_key_for_ip("2001:db8:1:2::1")
    assert rate_key_for_ip("::ffff:198.51.100.7") == "198.51.100.7"
    assert rate_key_for_ip("198.51.100.7") == "198.51.100.7"
