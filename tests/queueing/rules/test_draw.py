"""The draw's rules (queueing/rules/draw.py): the list commitment, and who wins per tier."""

from __future__ import annotations

import hashlib

from queueing.rules.draw import (
    EMPTY_ROOT,
    Listed,
    draw,
    list_leaf,
    list_proof,
    list_root,
)
from queueing.rules.merkle import merkle_proof_root

SEED = "ab" * 32


def listed(n: int, tier: str = "General") -> list[Listed]:
    return [
        Listed(hash=hashlib.sha256(f"{tier}{i}".encode()).hexdigest(), tier=tier) for i in range(n)
    ]


def test_the_commitment_does_not_depend_on_the_order_given_and_names_the_tier() -> None:
    items = listed(7)
    assert list_root(items) == list_root(list(reversed(items)))
    moved = [Listed(hash=items[0].hash, tier="VIP"), *items[1:]]
    assert list_root(moved) != list_root(items)
    assert list_root([]) == EMPTY_ROOT


def test_each_registration_s_proof_reaches_the_commitment() -> None:
    items = listed(11)
    root = list_root(items)
    for item in items:
        assert merkle_proof_root(list_leaf(item), list_proof(items, item.hash)) == root
    assert list_proof(items, "f" * 64) is None


def test_winners_then_the_waitlist_in_the_order_of_the_seeded_hash_per_tier() -> None:
    items = listed(10) + listed(3, tier="VIP")
    result = draw(SEED, items, winners=4, waitlist=2)
    general = result["General"]
    keyed = sorted(
        (i.hash for i in items if i.tier == "General"),
        key=lambda h: hashlib.sha256(f"{SEED}:{h}".encode()).hexdigest(),
    )
    assert general.order == keyed
    assert (general.winners, general.waitlist) == (keyed[:4], keyed[4:6])
    assert [general.outcome(rank) for rank in (1, 4, 5, 6, 7)] == [
        "won",
        "won",
        "waitlisted",
        "waitlisted",
        "lost",
    ]
    vip = result["VIP"]
    assert (len(vip.winners), len(vip.waitlist)) == (3, 0)


def test_another_seed_draws_another_order() -> None:
    items = listed(20)
    assert (
        draw(SEED, items, winners=5, waitlist=0)["General"].winners
        != draw("cd" * 32, items, winners=5, waitlist=0)["General"].winners
    )
