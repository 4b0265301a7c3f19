"""Where an admitted fan is sent (queueing/rules/gate.py): back to the page first asked
for when its host is the shop's, never anywhere else."""

from __future__ import annotations

import pytest

from events.validation import return_host_normalise
from queueing.rules.gate import (
    admitted_destination,
    destination_sources,
    return_url_clean,
)

TARGET = "https://shop.example/checkout"


def destination(return_url: str, hosts: tuple[str, ...] = ()) -> str:
    return admitted_destination(return_url=return_url, target_url=TARGET, allowed_hosts=hosts)


def test_a_page_on_the_target_host_is_where_the_fan_goes_back_to() -> None:
    url = "https://shop.example/products/42?colour=red#size"
    assert destination(url) == url


def test_an_allowed_host_is_accepted_with_its_port() -> None:
    assert destination("https://m.shop.example/p", ("m.shop.example",)) == (
        "https://m.shop.example/p"
    )
    assert destination("http://127.0.0.1:8080/p", ("127.0.0.1:8080",)) == "http://127.0.0.1:8080/p"
    # The same host on another port is another site.
    assert destination("http://127.0.0.1:9090/p", ("127.0.0.1:8080",)) == TARGET


@pytest.mark.parametrize(
    "url",
    [
        "",
        "https://evil.example/",
        "https://shop.example.evil.example/",
        "https://evil.example/?next=https://shop.example/",
        "https://shop.example@evil.example/",
        "https://user:pw@shop.example/",
        "javascript:alert(1)",
        "//evil.example/",
        "/relative/path",
        "ftp://shop.example/",
        "https://[::1/",
    ],
)
def test_anything_else_falls_back_to_the_target_url(url: str) -> None:
    assert destination(url) == TARGET


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        ("https://shop.example/p?q=1", "https://shop.example/p?q=1"),
        ("  https://shop.example/p  ", "https://shop.example/p"),
        ("https://shop.example/\r\nSet-Cookie: x", ""),
        ("https://shop.example/" + "a" * 2000, ""),
        ("not a url", ""),
        (42, ""),
        (None, ""),
    ],
)
def test_a_return_url_is_kept_only_when_it_is_an_absolute_web_address(raw, kept) -> None:
    assert return_url_clean(raw) == kept


@pytest.mark.parametrize(
    "inside",
    ["\x00", "\ud800", "\udfff", "\x01", "\x1b", "\x7f", "\x85", "\t", "\\"],
    ids=["nul", "high-surrogate", "low-surrogate", "soh", "esc", "del", "nel", "tab", "backslash"],
)
def test_a_return_url_with_a_control_character_or_lone_surrogate_is_dropped(inside: str) -> None:
    # PostgreSQL can store neither NUL nor a lone surrogate: kept, either failed the join.
    for where in ("https://shop.example/a{}b", "https://shop.example/?q={}x", "https://sh{}op.ex/"):
        assert return_url_clean(where.format(inside)) == ""


def test_a_return_url_with_other_unicode_is_kept() -> None:
    url = "https://shop.example/caf\u00e9/\U0001f600?q=\u2603"
    assert return_url_clean(url) == url


@pytest.mark.parametrize(
    ("raw", "host"),
    [
        ("Shop.Example", "shop.example"),
        ("shop.example.", "shop.example"),
        ("127.0.0.1:8080", "127.0.0.1:8080"),
        ("https://shop.example", None),
        ("shop.example/x", None),
        ("*.shop.example", None),
        ("shop example", None),
        ("", None),
    ],
)
def test_allowed_hosts_are_plain_host_names(raw: str, host: str | None) -> None:
    assert return_host_normalise(raw) == host


def test_every_destination_is_a_form_target_of_the_rooms_pages() -> None:
    """The room's pages allow their forms (CSP form-action) the origins a join may end on:
    exactly the hosts admitted_destination accepts, over either scheme."""
    sources = destination_sources(
        target_url="https://Shop.example/checkout?x=1",
        allowed_hosts=["127.0.0.1:8443", "shop.example", "m.shop.example"],
    )
    assert sources == [
        "https://shop.example",
        "http://shop.example",
        "https://127.0.0.1:8443",
        "http://127.0.0.1:8443",
        "https://m.shop.example",
        "http://m.shop.example",
    ]
    # Nothing that is not a plain host reaches the header.
    assert destination_sources(target_url="https://[::1]:8443/", allowed_hosts=[]) == []
    assert destination_sources(target_url="ftp://shop.example/", allowed_hosts=["a b;"]) == []
