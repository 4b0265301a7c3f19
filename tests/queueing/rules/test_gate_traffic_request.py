"""The request an on-sale's traffic rules judge at the gate (queueing/rules/gate.py): the path
as nginx routes it, every cookie, the address the web server names."""

from __future__ import annotations

import ipaddress

import pytest

from queueing.rules.gate import (
    client_address_read,
    cookies_read,
    gate_bypass,
    rules_path,
    traffic_request,
)


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        (None, "/"),
        ("", "/"),
        ("/", "/"),
        ("/seats/12?row=a&wr_pass=x", "/seats/12"),
        ("/static/app.css#top", "/static/app.css"),
        ("/static/../checkout", "/checkout"),
        ("/static/%2e%2e/checkout", "/checkout"),
        ("/static/..%2fcheckout", "/checkout"),
        ("/a/./b/", "/a/b/"),
        ("/a/b/..", "/a/"),
        ("/a/.", "/a/"),
        ("/../../etc", "/etc"),
        ("//static///a", "/static/a"),
        ("/caf%C3%A9", "/café"),
        ("/%FF", "/\ufffd"),
        ("https://evil.example/static/a", "/"),
        ("*", "/"),
        ("/" + "a" * 9000, "/"),
    ],
)
def test_the_path_is_judged_as_nginx_routes_it(uri: str | None, path: str) -> None:
    assert rules_path(uri) == path


def test_every_cookie_is_read_the_first_of_a_name_kept() -> None:
    assert cookies_read(["a=1; b=two=2;c=", " a=9; =x; junk", "d=4"]) == {
        "a": "1",
        "b": "two=2",
        "c": "",
        "d": "4",
    }


@pytest.mark.parametrize(
    ("raw", "address"),
    [
        ("2001:db8::1", ipaddress.ip_address("2001:db8::1")),
        (" 198.51.100.7 ", ipaddress.ip_address("198.51.100.7")),
        ("fe80::1%eth0", None),
        ("[2001:db8::1]", None),
        ("198.51.100.7:443", None),
        ("", None),
        (None, None),
        ("unknown", None),
    ],
)
def test_the_address_is_a_bare_address_or_none(raw: str | None, address: object) -> None:
    assert client_address_read(raw) == address


def test_the_request_from_the_checks_headers() -> None:
    request = traffic_request(
        headers={"x-original-uri": "/x/../shop?q=1", "user-agent": "UA/1", "x-a": "1,2"},
        cookie_headers=["s=1"],
        address=ipaddress.ip_address("::1"),
    )
    assert (request.path, request.user_agent, request.cookies) == ("/shop", "UA/1", {"s": "1"})
    assert request.headers["x-a"] == "1,2"
    assert traffic_request(headers={}, cookie_headers=[], address=None).user_agent == ""


def test_a_bypass_sets_nothing_and_sends_nowhere() -> None:
    answer = gate_bypass()
    assert answer.status == 204
    assert dict(answer.headers) == {"Cache-Control": "private, no-store", "Vary": "Cookie"}
