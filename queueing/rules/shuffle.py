"""The pre-queue shuffle: a random order anyone can recompute once the seed is revealed.

The order of the pre-queue cohort is the ticket ids sorted by ``sha256(seed + ":" + ticket_id)``
(hex digests compared as strings). The seed's SHA-256 is published before anyone joins and the
seed itself after the shuffle, so nobody can choose a seed that favours someone.

An on-sale in ``random`` order (``Event.queue_order``) puts its whole line in that hash's order,
not only the pre-queue: each fan's place key is the first 52 bits of their ``shuffle_key`` as an
integer (``place_key``), fixed at the join and kept as the entry's order key, so the index,
admission and a rebuild from PostgreSQL all follow it unchanged. 52 bits: a Redis score (a
double) holds it exactly. Its seed stays secret until the on-sale ends (a fan who knew it could
predict places), then anyone recomputes every place from it.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable


def shuffle_key(seed: str, ticket_id: uuid.UUID | str) -> str:
    return hashlib.sha256(f"{seed}:{ticket_id}".encode()).hexdigest()


def shuffled_order(seed: str, ticket_ids: Iterable[uuid.UUID | str]) -> list[str]:
    """Ticket ids (as strings) in the order the shuffle puts them."""
    return sorted((str(t) for t in ticket_ids), key=lambda t: shuffle_key(seed, t))


# Bits of the hash a place key keeps: a double (a Redis score) holds integers up to 2**53.
PLACE_KEY_BITS = 52


def place_key(seed: str, ticket_id: uuid.UUID | str) -> int:
    """A fan's place in a ``random`` line: the first 52 bits of ``shuffle_key``. Lower goes
    first; the same order as ``shuffled_order`` (which compares the whole digests)."""
    return int(shuffle_key(seed, ticket_id)[: PLACE_KEY_BITS // 4], 16)


def place_rank_estimate(place: int, count: int) -> int:
    """How many of ``count`` places fall below ``place``, expected: places are uniform over
    their range, so a ``place`` at fraction f of it has about f * count below. For a quote
    when the hot index cannot count them (line/joining.py)."""
    return min(count, place * count >> PLACE_KEY_BITS)
