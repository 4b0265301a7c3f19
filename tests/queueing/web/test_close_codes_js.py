"""The waiting page's script does what docs/api.md says for each WebSocket close code.

queueing/static/queueing/waiting.js hands its pure ``afterClose`` rule over under Node; it is
run here on every code the server sends (queueing/web/consumers.py) and a few it does not.
"""

from __future__ import annotations

from queueing.web import consumers
from tests.waiting_js import run_waiting_js


def after_close(codes: list[int]) -> dict[int, dict]:
    answers = run_waiting_js("return input.map((c) => rules.afterClose(c));", codes)
    return dict(zip(codes, answers, strict=True))


def test_each_close_code_gets_the_documented_reaction() -> None:
    got = after_close(
        [
            consumers.CLOSE_BAD_TICKET,
            consumers.CLOSE_TICKET_GONE,
            consumers.CLOSE_REPLACED,
            consumers.CLOSE_TOO_MANY,
            consumers.CLOSE_TRY_AGAIN,
            consumers.CLOSE_TOO_BIG,
            1006,  # the network dropped
            1001,  # the server went away (a deploy)
        ]
    )
    assert got[4401] == got[4404] == {"action": "reload"}
    # Another page of this ticket took over: say so and never reconnect (that would take the
    # socket back, and the two pages would take turns); the page still polls (stop() in the
    # script), so the place stays alive if the newer page goes away.
    assert got[4409] == {"action": "stop"}
    # Too many sockets from this address: poll, and try a socket again only much later.
    assert got[4429]["action"] == "poll"
    assert got[4429]["reconnectAfter"][0] >= 60
    for code in (1013, 1009, 1006, 1001):
        assert got[code] == {"action": "retry", "reconnectAfter": [5, 10]}


def test_a_poll_refused_because_the_place_moved_reloads_the_page() -> None:
    """Issue 28, item 4: a page whose place moved to another device, polling (no socket),
    is told 410 place_moved; it reloads, and the server's page says the place moved."""
    statuses = [410, 404, 429, 500, 503]
    answers = run_waiting_js("return input.map((s) => rules.afterPollRefused(s));", statuses)
    got = dict(zip(statuses, answers, strict=True))
    assert got[410] == {"action": "reload"}
    for status in (404, 429, 500, 503):
        assert got[status] == {"action": "retry"}
