"""The Merkle root by which one record of an on-sale's root chain commits to every lane's head
(docs/api.md, "Root records"; scripts/verify_trail.py computes the same, on its own).

A leaf is a lane's head: ``sha256("leaf:<lane>:<seq>:<hash>")``, the lane and seq in decimal,
the hash as its 64 lowercase hex digits. The leaves go in ascending lane order; each level
pairs them from the left, a node being ``sha256(left + right)`` of the two hex digests as
text, and a last node without a partner goes up unchanged. The root is the one node left.
Every digest is written as 64 lowercase hex digits. A leaf's text starts with ``leaf:`` and a
node's is 128 hex digits, so no node can pass for a leaf.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LaneHead:
    lane: int
    seq: int
    hash: str


def merkle_leaf(head: LaneHead) -> str:
    return hashlib.sha256(f"leaf:{head.lane}:{head.seq}:{head.hash}".encode()).hexdigest()


def merkle_root(heads: Iterable[LaneHead]) -> str:
    """The root over ``heads`` (at least one), taken in ascending lane order."""
    level: Sequence[str] = [merkle_leaf(head) for head in sorted(heads, key=lambda h: h.lane)]
    if not level:
        raise ValueError("a Merkle root needs at least one lane")
    while len(level) > 1:
        paired = [
            hashlib.sha256((level[i] + level[i + 1]).encode()).hexdigest()
            for i in range(0, len(level) - 1, 2)
        ]
        if len(level) % 2:
            paired.append(level[-1])  # the odd one goes up as it is
        level = paired
    return level[0]
