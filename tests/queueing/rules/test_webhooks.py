import hashlib
import hmac
import ipaddress

import pytest

from queueing.rules.webhooks import (
    address_refusal,
    retry_delay,
    signature_header,
    types_refusal,
    url_refusal,
    webhook_signature,
)
from tests.webhook_receiver import verify


def test_the_signature_is_the_hmac_of_timestamp_dot_body() -> None:
    body = b'{"id":"x"}'
    expected = hmac.new(b"whsec_abc", b'1700000000.{"id":"x"}', hashlib.sha256).hexdigest()
    assert webhook_signature("whsec_abc", timestamp=1700000000, body=body) == expected
    assert signature_header(["whsec_abc"], timestamp=1700000000, body=body) == f"v1={expected}"


def test_during_a_rotation_either_secret_verifies_and_a_stale_timestamp_does_not() -> None:
    body = b"{}"
    header = signature_header(["new", "old"], timestamp=1700000000, body=body)
    headers = {
        "x-waitingroom-webhook-timestamp": "1700000000",
        "x-waitingroom-webhook-signature": header,
    }
    assert verify("new", headers, body, now=1700000010)
    assert verify("old", headers, body, now=1700000010)
    assert not verify("other", headers, body, now=1700000010)
    assert not verify("new", headers, body + b" ", now=1700000010)
    assert not verify("new", headers, body, now=1700000000 + 301)  # a replay, 5 min later


def test_ten_attempts_spread_over_about_a_day() -> None:
    waits = [retry_delay(n, first_seconds=180) for n in range(1, 10)]
    assert waits[:3] == [180, 360, 720]
    assert 20 * 3600 < sum(waits) < 30 * 3600


@pytest.mark.parametrize(
    ("url", "plain_http", "refused"),
    [
        ("https://hooks.example.com/room", False, False),
        ("https://hooks.example.com:8443/room?x=1", False, False),
        ("http://hooks.example.com/room", False, True),
        ("http://hooks.example.com/room", True, False),
        ("ftp://hooks.example.com/", True, True),
        ("https://user:pw@hooks.example.com/", False, True),
        ("https://hooks.example.com/#frag", False, True),
        ("https:///nohost", False, True),
        ("https://hooks.example.com:99999/", False, True),
    ],
)
def test_endpoint_urls(url: str, plain_http: bool, refused: bool) -> None:
    assert (url_refusal(url, plain_http=plain_http) is not None) == refused


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("93.184.216.34", False),
        ("2606:2800:220:1:248:1893:25c8:1946", False),
        ("127.0.0.1", True),
        ("10.1.2.3", True),
        ("192.168.0.10", True),
        ("169.254.169.254", True),  # the clouds' metadata service
        ("100.64.0.1", True),  # carrier-grade NAT
        ("0.0.0.0", True),
        ("::1", True),
        ("fd00::1", True),
        ("::ffff:127.0.0.1", True),  # loopback in IPv6 clothing
        ("224.0.0.1", True),
    ],
)
def test_only_public_addresses_are_called(address: str, refused: bool) -> None:
    assert (address_refusal(address, allowed=[]) is not None) == refused


def test_an_allowed_network_lets_a_private_address_through() -> None:
    allowed = [ipaddress.ip_network("10.0.0.0/8")]
    assert address_refusal("10.1.2.3", allowed=allowed) is None
    assert address_refusal("192.168.0.1", allowed=allowed) is not None


def test_types() -> None:
    assert types_refusal(["onsale.paused"]) is None
    assert types_refusal([]) is not None
    assert "Unknown type" in (types_refusal(["onsale.exploded"]) or "")
