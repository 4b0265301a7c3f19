"""A draw anyone can check (docs/api.md, "The draw"; scripts/verify_draw.py does the same on
its own): the list commitment over the frozen registrations, and who wins.

- **The list.** Each confirmed registration is a leaf ``sha256("leaf:<tier>:<hash>")`` (its
  tier's name and its published hash, 64 lowercase hex digits), the leaves in ascending order of
  the hashes; the commitment is the Merkle root over them (``rules/merkle.py``: a node is
  ``sha256(left + right)`` of the hex digests as text, an odd node goes up unchanged),
  published with the count. An empty list's root is 64 zeros. The leaf names the tier, so no
  registration can be moved to another tier after the list is published.
- **The draw.** Per tier, the registrations sorted by ``sha256(seed + ":" + hash)`` (hex digests
  compared as text; the pre-queue shuffle's key, ``rules/shuffle.py``): the first ``winners``
  win, the next ``waitlist`` wait in that order, the rest lose. The seed is the on-sale's draw
  seed (``Event.draw_seed``), its SHA-256 published at the on-sale's creation, itself revealed
  with the result; never the shuffle's seed, which is still secret when the draw is revealed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from queueing.rules.merkle import ProofStep as ProofStep
from queueing.rules.merkle import merkle_proof, merkle_root_of
from queueing.rules.shuffle import shuffle_key

EMPTY_ROOT = "0" * 64
WON, WAITLISTED, LOST = "won", "waitlisted", "lost"


@dataclass(frozen=True)
class Listed:
    hash: str
    tier: str


def list_leaf(item: Listed) -> str:
    return hashlib.sha256(f"leaf:{item.tier}:{item.hash}".encode()).hexdigest()


def list_order(items: Iterable[Listed]) -> list[Listed]:
    return sorted(items, key=lambda item: item.hash)


def list_root(items: Iterable[Listed]) -> str:
    leaves = [list_leaf(item) for item in list_order(items)]
    return merkle_root_of(leaves) if leaves else EMPTY_ROOT


def list_proof(items: Sequence[Listed], wanted: str) -> list[ProofStep] | None:
    """The inclusion proof of the registration whose published hash is ``wanted``; None if it
    is not listed."""
    ordered = list_order(items)
    index = next((i for i, item in enumerate(ordered) if item.hash == wanted), None)
    if index is None:
        return None
    return merkle_proof([list_leaf(item) for item in ordered], index)


@dataclass
class TierDraw:
    winners: list[str] = field(default_factory=list)
    waitlist: list[str] = field(default_factory=list)
    # Every registration of the tier in the draw's order (1-based rank = index + 1).
    order: list[str] = field(default_factory=list)

    def outcome(self, rank: int) -> str:
        if rank <= len(self.winners):
            return WON
        if rank <= len(self.winners) + len(self.waitlist):
            return WAITLISTED
        return LOST


def draw(seed: str, items: Iterable[Listed], *, winners: int, waitlist: int) -> dict[str, TierDraw]:
    """Each tier's winners, waitlist (in order) and full order."""
    by_tier: dict[str, list[str]] = {}
    for item in items:
        by_tier.setdefault(item.tier, []).append(item.hash)
    result: dict[str, TierDraw] = {}
    for tier, hashes in sorted(by_tier.items()):
        order = sorted(hashes, key=lambda h: shuffle_key(seed, h))
        result[tier] = TierDraw(
            winners=order[:winners], waitlist=order[winners : winners + waitlist], order=order
        )
    return result
