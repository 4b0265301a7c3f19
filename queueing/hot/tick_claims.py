"""One outstanding tick per event: claimed when the beat sends it, released when it has run.

A claim expires on its own (a worker that died, a message dropped as stale), after which the
beat sends a fresh tick. Without Redis every event counts as unclaimed: the ticks' own expiry
then bounds the backlog, and duplicates are harmless anyway.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from queueing.hot import keys
from queueing.hot.client import client, fails_open, run_script, unavailable_on_redis_error


# Redis away: every event counts as unclaimed; the ticks' own expiry bounds the backlog.
@fails_open(answer_from=lambda event_ids, **_: dict.fromkeys(event_ids, ""))
@unavailable_on_redis_error
def ticks_claim(event_ids: Sequence[int], *, ttl_seconds: float) -> dict[int, str]:
    """Claim the tick of each event that has none outstanding: event id -> claim token.
    One key per event (its own hash slot), sent in one pipeline."""
    if not event_ids:
        return {}
    tokens = {event_id: secrets.token_hex(8) for event_id in event_ids}
    ttl_ms = max(1, int(ttl_seconds * 1000))
    pipe = client().pipeline(transaction=False)
    for event_id, token in tokens.items():
        pipe.set(keys.tick_claim(event_id), token, nx=True, px=ttl_ms)
    won = pipe.execute()
    return {
        event_id: token for (event_id, token), ok in zip(tokens.items(), won, strict=True) if ok
    }


@fails_open(None)  # Redis away: the claim expires by itself
@unavailable_on_redis_error
def tick_release(event_id: int, token: str) -> None:
    """Let the next tick be sent; a claim that expired meanwhile and was taken again by a newer
    tick is left to that tick."""
    run_script("release_lock", keys=[keys.tick_claim(event_id)], args=[token])


@fails_open(True)  # Redis away: there are no claims to keep
@unavailable_on_redis_error
def tick_extend(event_id: int, token: str, *, ttl_seconds: float) -> bool:
    """Keep a long tick's claim (a line ending in bulk) for ``ttl_seconds`` more, so that the
    beat sends no second tick meanwhile; False when it had expired and another tick may be
    running (the long one should then stop and leave the rest to it)."""
    ttl_ms = max(1, int(ttl_seconds * 1000))
    return bool(run_script("extend_lock", keys=[keys.tick_claim(event_id)], args=[token, ttl_ms]))
