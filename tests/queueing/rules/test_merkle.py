"""The room's Merkle trees (queueing/rules/merkle.py): roots, and inclusion proofs that lead
every leaf, and no other, to its root."""

from __future__ import annotations

import hashlib

import pytest

from queueing.rules.merkle import (
    LaneHead,
    ProofStep,
    merkle_leaf,
    merkle_proof,
    merkle_proof_root,
    merkle_root,
    merkle_root_of,
)


def leaves(n: int) -> list[str]:
    return [hashlib.sha256(str(i).encode()).hexdigest() for i in range(n)]


def test_the_lanes_root_is_the_root_of_their_leaves_in_lane_order() -> None:
    heads = [LaneHead(lane=1, seq=4, hash="b" * 64), LaneHead(lane=0, seq=2, hash="a" * 64)]
    ordered = [merkle_leaf(heads[1]), merkle_leaf(heads[0])]
    assert merkle_root(heads) == merkle_root_of(ordered)
    assert merkle_root_of(ordered) == hashlib.sha256("".join(ordered).encode()).hexdigest()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 33])
def test_every_leaf_s_proof_leads_to_the_root(n: int) -> None:
    items = leaves(n)
    root = merkle_root_of(items)
    for index, item in enumerate(items):
        proof = merkle_proof(items, index)
        assert merkle_proof_root(item, proof) == root
        assert len(proof) <= max(1, (n - 1).bit_length())


def test_a_proof_holds_for_its_leaf_only() -> None:
    items = leaves(6)
    root = merkle_root_of(items)
    proof = merkle_proof(items, 2)
    assert merkle_proof_root(items[3], proof) != root
    flipped = [ProofStep("right" if s.side == "left" else "left", s.hash) for s in proof]
    assert merkle_proof_root(items[2], flipped) != root
