"""The gate's pure part (queueing/rules/gate.py): reading the original request a web server
describes, and the headers of its answers. Whatever a client puts in its URL or headers, the
gate never points off the shop's host and never breaks a header."""

from __future__ import annotations

import pytest

from queueing.rules.gate import (
    MAX_CANDIDATES,
    cookie_passes,
    gate_admit,
    gate_refuse,
    original_request_read,
    pass_candidates,
    pass_cookie,
    room_location,
)

ROOM = "https://room.example"


def read(uri: str | None, host: str | None = "shop.example", proto: str | None = "https"):  # type: ignore[no-untyped-def]
    return original_request_read(uri=uri, host=host, proto=proto)


def test_the_original_url_is_rebuilt_without_the_pass_and_keeps_everything_else() -> None:
    original = read("/seats/a%20b?x=1&wr_pass=TOKEN&y=%C3%A9&z")
    assert original.url == "https://shop.example/seats/a%20b?x=1&y=%C3%A9&z"
    assert (original.query_pass, original.had_pass_parameter) == ("TOKEN", True)
    only_pass = read("/?wr_pass=T1&wr_pass=T2")
    assert (only_pass.target, only_pass.query_pass) == ("/", "T2")  # the last one counts
    empty = read("/page?wr_pass=")
    assert (empty.target, empty.query_pass, empty.had_pass_parameter) == ("/page", None, True)
    # The name as a form would spell it is the same parameter.
    assert read("/p?wr%5Fpass=T").query_pass == "T"
    assert read("/p?wr_passport=1").target == "/p?wr_passport=1"


@pytest.mark.parametrize("uri", [None, "", "*", "http://evil.example/x", "x" * 9000])
def test_a_missing_or_unusable_original_uri_is_the_home_page(uri: str | None) -> None:
    assert read(uri).target == "/"


@pytest.mark.parametrize(
    ("uri", "target"),
    [
        ("//evil.example/", "/evil.example/"),
        ("///evil.example/x?y=1", "/evil.example/x?y=1"),
        ("/\\evil.example/", "/%5Cevil.example/"),
        ("/a\r\nSet-Cookie: x=1", "/a%0D%0ASet-Cookie:%20x=1"),
        ('/"><script>', "/%22%3E%3Cscript%3E"),
        ("/caf\xc3\xa9#frag", "/caf%C3%A9%23frag"),  # raw UTF-8 bytes, as Latin-1 text
    ],
)
def test_a_hostile_original_uri_stays_a_path_on_the_shop(uri: str, target: str) -> None:
    original = read(uri)
    assert original.target == target
    assert original.url == f"https://shop.example{target}"
    location = room_location(public_url=ROOM, slug="s", original=original)
    assert location.startswith(f"{ROOM}/e/s/?return=https%3A%2F%2Fshop.example%2F")
    assert all(ch.isalnum() or ch in "%-._~:/?=" for ch in location), location


@pytest.mark.parametrize(
    "host",
    [None, "", "evil.example/x", "evil.example@shop.example", "a b", "shop.example:99999x", "*"],
)
def test_without_a_plain_host_there_is_no_return_url(host: str | None) -> None:
    original = read("/page", host=host)
    assert original.url is None
    assert room_location(public_url=ROOM, slug="s", original=original) == f"{ROOM}/e/s/"


def test_the_host_and_scheme_are_normalised() -> None:
    assert read("/", host="Shop.Example:8443").url == "https://shop.example:8443/"
    # A list (a proxy appended its own): the first is the client's.
    assert read("/", host="shop.example, proxy.internal").host == "shop.example"
    assert read("/", proto="HTTP").scheme == "http"
    for proto in (None, "", "ftp", "javascript"):
        assert read("/", proto=proto).scheme == "https"  # secure unless told otherwise


def test_the_waiting_room_location_percent_encodes_the_whole_return_url() -> None:
    original = read("/seats?x=1&y=a%26b&wr_pass=T", host="shop.example:8443")
    assert room_location(public_url=ROOM, slug="big-sale", original=original) == (
        f"{ROOM}/e/big-sale/?return=https%3A%2F%2Fshop.example%3A8443%2Fseats%3Fx%3D1%26y%3Da%2526b"
    )
    # One the room would not keep (over 2,000 characters) is left out.
    long = read("/" + "a" * 2100)
    assert room_location(public_url=ROOM, slug="s", original=long) == f"{ROOM}/e/s/"


def test_the_cookie_is_host_only_http_only_lax_and_secure_over_https() -> None:
    assert pass_cookie("big-sale", "a.b.c", 600, "https") == (
        "wr_pass_big-sale=a.b.c; Max-Age=600; Path=/; HttpOnly; SameSite=Lax; Secure"
    )
    assert pass_cookie("s", "a.b.c", 1, "http") == (
        "wr_pass_s=a.b.c; Max-Age=1; Path=/; HttpOnly; SameSite=Lax"
    )


def test_only_the_on_sales_own_cookie_is_read() -> None:
    headers = ['other=1; wr_pass_s=A; wr_pass_s2=B; wr_pass_s="C"', "wr_pass_s=; wr_pass_s=D"]
    assert cookie_passes(headers, "s") == ["A", "C", "D"]
    assert cookie_passes([], "s") == []


def test_the_query_pass_is_tried_first_and_the_candidates_are_capped() -> None:
    original = read("/?wr_pass=Q")
    assert (
        pass_candidates(original, ["C1", "C2", "C3"])
        == [
            ("Q", True),
            ("C1", False),
            ("C2", False),
        ][:MAX_CANDIDATES]
    )
    assert pass_candidates(read("/"), ["C1"]) == [("C1", False)]


def test_an_admission_from_the_query_sets_the_cookie_and_asks_for_the_clean_url() -> None:
    original = read("/seats?x=1&wr_pass=T")
    answer = gate_admit(
        original=original, slug="s", token="T", from_query=True, expires_at=1600.9, now=1000.0
    )
    assert (answer.status, dict(answer.headers)) == (
        204,
        {
            "Cache-Control": "private, no-store",
            "Vary": "Cookie",
            "Set-Cookie": "wr_pass_s=T; Max-Age=600; Path=/; HttpOnly; SameSite=Lax; Secure",
            "X-Waiting-Room-Redirect": "https://shop.example/seats?x=1",
        },
    )
    # A cookie admits as it is; a URL that still carried a (useless) wr_pass is cleaned.
    by_cookie = gate_admit(
        original=read("/seats"), slug="s", token="C", from_query=False, expires_at=2e9, now=1.0
    )
    assert dict(by_cookie.headers) == {"Cache-Control": "private, no-store", "Vary": "Cookie"}
    cleaned = gate_admit(
        original=read("/?wr_pass=bad", host=None),
        slug="s",
        token="C",
        from_query=False,
        expires_at=2e9,
        now=1.0,
    )
    assert dict(cleaned.headers)["X-Waiting-Room-Redirect"] == "/"


def test_a_refusal_says_where_the_room_is() -> None:
    answer = gate_refuse(original=read("/p?wr_pass=T"), slug="s", public_url=ROOM)
    assert (answer.status, dict(answer.headers)) == (
        401,
        {
            "Cache-Control": "private, no-store",
            "Vary": "Cookie",
            "X-Waiting-Room-Location": f"{ROOM}/e/s/?return=https%3A%2F%2Fshop.example%2Fp",
        },
    )
