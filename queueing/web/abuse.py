"""Join rate limits per client IP and per identity, and the wrong-access-code budget per
client IP and on-sale, kept atomically in Redis (the client's address: client_address.py).

Unlike a read-then-write throttle, a burst of parallel joins cannot slip past the limit: each
call is counted and judged in one script. The identity limit only slows down one client
hammering join (a client chooses its identity); the IP limit is the one that binds bots.

If Redis is down, joins are not refused for it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

from django.conf import settings
from django.http import HttpRequest

from queueing.hot import keys, rate_limits
from queueing.line.joining import JoinRequest, arrival_refusal, tiers_for_access_codes
from queueing.rules.errors import QueueError, RateLimited
from queueing.web.client_address import client_ip, rate_key_for_ip

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60.0


def _refuse(retry_after: float, detail: str = "Too many attempts to join.") -> RateLimited:
    return RateLimited(
        f"{detail} Please wait a moment.", retry_after=max(1, math.ceil(retry_after))
    )


def join_rate_check(*, request: HttpRequest, identity: str) -> None:
    now = time.time()
    budgets = (
        ("ip", rate_key_for_ip(client_ip(request)), settings.WR_JOIN_LIMIT_PER_IP),
        ("id", identity, settings.WR_JOIN_LIMIT_PER_IDENTITY),
    )
    for scope, caller, limit in budgets:
        if not limit:
            continue
        wait = rate_limits.rate_limit_hit(
            keys.join_rate(scope, caller), now=now, window=WINDOW_SECONDS, limit=limit
        )
        if wait is not None:
            raise _refuse(wait)


def _has_code(join: JoinRequest) -> bool:
    return bool(join.access_code and join.access_code.strip())


def wrong_code_gate(joins: Sequence[JoinRequest]) -> list[RateLimited | None]:
    """Each join's refusal by the wrong-code budget (None: it may go on), judged one after
    the other in the order given.

    An address may try ``WR_WRONG_CODES_PER_ADDRESS`` wrong access codes per on-sale in any
    ``WR_WRONG_CODES_WINDOW_SECONDS``. A wrong code is spent from the budget before the join
    is tried, atomically, so a parallel storm of guesses cannot slip past it; a join with a
    right code spends nothing but is refused too while the budget is spent, or a guesser
    would learn the right code from the refusal being different. Joins without a code, and
    joins the on-sale refuses anyway (not open, closed, in maintenance), are not judged: they
    reveal nothing of the codes. Off while Redis is unreachable, like the join limits."""
    refusals: list[RateLimited | None] = [None] * len(joins)
    limit = settings.WR_WRONG_CODES_PER_ADDRESS
    judged: dict[int, list[int]] = {}  # event id -> indexes of joins to judge
    for index, join in enumerate(joins):
        if (
            limit
            and join.address is not None
            and _has_code(join)
            and arrival_refusal(join.event.state_at(join.now), join.event.mode) is None
        ):
            judged.setdefault(join.event.id, []).append(index)
    window = float(settings.WR_WRONG_CODES_WINDOW_SECONDS)
    for indexes in judged.values():
        event = joins[indexes[0]].event
        tiers = tiers_for_access_codes(event, [joins[i].access_code for i in indexes])
        for index in indexes:
            join = joins[index]
            assert join.address is not None
            wrong = isinstance(tiers[join.access_code], QueueError)
            judge = rate_limits.rate_limit_hit if wrong else rate_limits.rate_limit_peek
            wait = judge(
                keys.wrong_codes(event.id, join.address),
                now=time.time(),
                window=window,
                limit=limit,
            )
            if wait is not None:
                refusals[index] = _refuse(wait, "Too many wrong access codes from your network.")
    return refusals
