"""Which lane of an on-sale's line a fan is in. Pure: no I/O.

A line of many lanes spreads over a Redis Cluster's masters, each lane under its own hash tag
(queueing/hot/keys.py). The lane is a keyed hash of the fan's identity, so a fan always lands
in the same lane whatever process takes the join, and nobody without the room's secret key
can pick their lane (or crowd one). The key is derived from ``SECRET_KEY`` by Django's
``salted_hmac`` (HMAC-SHA256) under a salt of its own.
"""

from __future__ import annotations

from django.utils.crypto import salted_hmac

_SALT = "waitingroom.lane"


def lane_of(identity: str, *, lanes: int) -> int:
    """The fan's lane, 0 to ``lanes - 1``; always 0 in a line of one lane."""
    if lanes <= 1:
        return 0
    digest = salted_hmac(_SALT, identity, algorithm="sha256").digest()
    return int.from_bytes(digest[:8], "big") % lanes
