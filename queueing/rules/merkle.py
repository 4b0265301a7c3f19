"""The Merkle trees of the room: the root by which one record of an on-sale's root chain
commits to every lane's head (docs/api.md, "Root records"; scripts/verify_trail.py computes the
same, on its own), and a draw's list commitment with each registration's inclusion proof
(docs/api.md, "The draw"; scripts/verify_draw.py).

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
    leaves = [merkle_leaf(head) for head in sorted(heads, key=lambda h: h.lane)]
    if not leaves:
        raise ValueError("a Merkle root needs at least one lane")
    return merkle_root_of(leaves)


def _node(left: str, right: str) -> str:
    return hashlib.sha256((left + right).encode()).hexdigest()


def _up(level: Sequence[str]) -> list[str]:
    paired = [_node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
    if len(level) % 2:
        paired.append(level[-1])  # the odd one goes up as it is
    return paired


def merkle_root_of(leaves: Sequence[str]) -> str:
    """The root over leaf digests in the order given (at least one)."""
    level = list(leaves)
    while len(level) > 1:
        level = _up(level)
    return level[0]


@dataclass(frozen=True)
class ProofStep:
    side: str  # "left" or "right": where the sibling stands
    hash: str


def merkle_levels(leaves: Sequence[str]) -> list[list[str]]:
    """Every level of the tree, the leaves first and the root's last: what proofs are read
    from, each in log n steps, once it is built."""
    levels = [list(leaves)]
    while len(levels[-1]) > 1:
        levels.append(_up(levels[-1]))
    return levels


def merkle_proof_from(levels: Sequence[Sequence[str]], index: int) -> list[ProofStep]:
    """The siblings from the leaf at ``index`` up to the root; a level where the node goes up
    without a partner adds no step."""
    steps: list[ProofStep] = []
    for level in levels[:-1]:
        sibling = index ^ 1
        if sibling < len(level):
            steps.append(ProofStep("left" if sibling < index else "right", level[sibling]))
        index //= 2
    return steps


def merkle_proof(leaves: Sequence[str], index: int) -> list[ProofStep]:
    return merkle_proof_from(merkle_levels(leaves), index)


def merkle_proof_root(leaf: str, steps: Iterable[ProofStep]) -> str:
    """The root a proof leads to from ``leaf``: the proof holds when it is the published one."""
    node = leaf
    for step in steps:
        node = _node(step.hash, node) if step.side == "left" else _node(node, step.hash)
    return node
