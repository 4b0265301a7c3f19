"""How often a waiting page is sent its on-sale's tick, by its distance from the front. Pure:
no I/O.

One tick per on-sale is published every second, and each web process hands it to its pages
(queueing/live/fanout.py). A page far back needs it less often: its place moves slowly, and
what is urgent reaches it anyway (its turn is a personal message; a change of what the line is
doing goes to every page). Sending is what a page costs its web process, so far-back pages
are sent fewer ticks.

The distance is the page's position as the rules compute it, placed from the tick's own
checkpoints (rules/layout.py ``position_from_sketch``, as the page itself places it): the web
process asks Redis nothing per page. The bands, with ``front`` = ``WR_TICKS_FRONT_PLACES``
(10,000 by default):

| position | at least one tick every | the process overloaded |
|---|---|---|
| 1 to front | tick (1 s) | tick |
| front to 10 x front | 5 s | 15 s |
| behind | 10 s | 30 s |

- A page behind the front is never left longer than the line, at its measured pace, needs to
  bring it to the front band: however fast the line moves, the front is told at every tick.
- A page whose place the tick cannot show (just joined, admitted, moved) gets every tick, as
  every page did before: it then asks the server where it is. A pre-queue page, whose place
  is not drawn yet, is far back; the tick that says the line started goes to every page.
- Overloaded: when a tick arrives, more than ``BACKLOG_SHARE`` of the process's pages of the
  on-sale (and at least ``BACKLOG_MIN_PAGES``) are still being sent an earlier one. The
  bands behind the front stretch ``OVERLOAD_FACTOR`` times for ``OVERLOAD_HOLD_SECONDS``.
"""

from __future__ import annotations

import math

NEAR_SECONDS = 5.0
FAR_SECONDS = 10.0
NEAR_BAND_FRONTS = 10  # the near band ends this many front bands from the front

OVERLOAD_FACTOR = 3.0
BACKLOG_SHARE = 0.05
# A few slow phones are not an overload: their relays only skip ticks (fanout.py).
BACKLOG_MIN_PAGES = 100
OVERLOAD_HOLD_SECONDS = 30.0


def tick_spacing(
    position: int | None, *, front: int, fans_per_second: float | None, overloaded: bool = False
) -> float:
    """The longest a page at ``position`` may go without a tick, in seconds (0: every tick).
    ``fans_per_second``: how fast the line moves (the tick's measured pace for the page's
    tier), None when not measured."""
    if position is None or position <= front:
        return 0.0
    spacing = NEAR_SECONDS if position <= NEAR_BAND_FRONTS * front else FAR_SECONDS
    if overloaded:
        spacing *= OVERLOAD_FACTOR
    if fans_per_second is not None and fans_per_second > 0:
        spacing = min(spacing, (position - front) / fans_per_second)
    return spacing


def far_back_from(*, front: int, fans_per_second: float | None, overloaded: bool = False) -> int:
    """The position past which ``tick_spacing`` is the far band's whatever the position: a
    web process places most pages with one comparison (queueing/live/tick_view.py)."""
    far = FAR_SECONDS * (OVERLOAD_FACTOR if overloaded else 1.0)
    paced = front + math.ceil((fans_per_second or 0.0) * far)
    return max(NEAR_BAND_FRONTS * front, paced)


def prequeue_tick_spacing(*, overloaded: bool = False) -> float:
    """A pre-queue page's: far back (the start, which places it, goes to every page)."""
    return FAR_SECONDS * (OVERLOAD_FACTOR if overloaded else 1.0)


# How much later than the longest recent gap the next tick may come, and the page's gap
# still stay within its spacing.
TICK_SLACK_SECONDS = 0.5


def tick_due(*, since_last: float, spacing: float, tick_gap: float) -> bool:
    """Whether a page gets this tick: it does unless the next tick, expected ``tick_gap``
    seconds from now (the longest recent gap), would still reach it within its ``spacing``
    (``since_last``: seconds since its last). So the gaps a page sees stay within its spacing
    as long as ticks come about as often as they have (``TICK_SLACK_SECONDS``)."""
    return spacing <= tick_horizon(now=since_last, tick_gap=tick_gap)


def tick_horizon(*, now: float, tick_gap: float) -> float:
    """``tick_due`` for many pages at once: a page last sent a tick at ``sent_at`` is due the
    tick arriving at ``now`` when ``sent_at + spacing`` is at most this."""
    return now + tick_gap + TICK_SLACK_SECONDS


def backlogged(*, behind: int, pages: int) -> bool:
    """The overload signal: ``behind`` of a process's ``pages`` of an on-sale were still being
    sent an earlier tick when the next one arrived."""
    return behind > max(BACKLOG_MIN_PAGES, BACKLOG_SHARE * pages)
