"""The pre-queue shuffle: a random order anyone can recompute once the seed is revealed.

The order of the pre-queue cohort is the ticket ids sorted by ``sha256(seed + ":" + ticket_id)``
(hex digests compared as strings). The seed's SHA-256 is published before anyone joins and the
seed itself after the shuffle, so nobody can choose a seed that favours someone.
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
