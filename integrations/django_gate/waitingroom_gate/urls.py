"""The URLs the gate sends fans to: the room (with a return URL), or the page they asked for
without the pass in its query string."""

from __future__ import annotations

from urllib.parse import quote, unquote_plus, urlsplit, urlunsplit

# The room adds the pass to the URL it sends an admitted fan back to under this name.
PASS_PARAMETER = "wr_pass"


def query_without_pass(query: str) -> str:
    """``query`` without any ``wr_pass`` field; every other field is kept byte for byte (a
    parse-and-reencode round trip would change how the shop's own parameters are spelled)."""
    fields = [part for part in query.split("&") if part]
    return "&".join(
        part for part in fields if unquote_plus(part.partition("=")[0]) != PASS_PARAMETER
    )


def url_without_pass(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=query_without_pass(parts.query), fragment=""))


def room_entry_url(*, room_url: str, event: str, return_url: str) -> str:
    """The room's page for the on-sale, told where to send the fan once admitted."""
    return f"{room_url}/e/{quote(event, safe='')}/?return={quote(return_url, safe='')}"
