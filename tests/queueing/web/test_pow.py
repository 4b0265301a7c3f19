import itertools

import pytest
from django.test import Client

from queueing.web.abuse import leading_zero_bits, solves
from tests.helpers import join, new_fan

pytestmark = pytest.mark.django_db


def solve(challenge: str, difficulty: int) -> str:
    return next(str(n) for n in itertools.count() if solves(challenge, str(n), difficulty))


def challenge_for(slug: str) -> dict:
    return Client().get(f"/api/v1/events/{slug}/challenge").json()


def test_leading_zero_bits() -> None:
    assert leading_zero_bits(b"\x00\x00\xff") == 16
    assert leading_zero_bits(b"\x00\x10") == 11
    assert leading_zero_bits(b"\x80") == 0


def test_off_by_default(event) -> None:
    assert join(new_fan(), event.slug).status_code == 201


def test_a_join_needs_a_fresh_solved_challenge(make_event) -> None:
    event = make_event(pow_difficulty=10)
    missing = join(new_fan(), event.slug)
    assert (missing.status_code, missing.json()["error"]) == (400, "pow_required")
    issued = challenge_for(event.slug)
    assert issued["difficulty"] == 10
    nonce = solve(issued["challenge"], 10)
    wrong = next(str(n) for n in itertools.count() if not solves(issued["challenge"], str(n), 10))
    bad = join(new_fan(), event.slug, {"pow": {"challenge": issued["challenge"], "nonce": wrong}})
    assert (bad.status_code, bad.json()["error"]) == (400, "pow_invalid")
    good = join(new_fan(), event.slug, {"pow": {"challenge": issued["challenge"], "nonce": nonce}})
    assert good.status_code == 201
    # Spent: the same solution does not let a second fan in.
    again = join(new_fan(), event.slug, {"pow": {"challenge": issued["challenge"], "nonce": nonce}})
    assert (again.status_code, again.json()["error"]) == (400, "pow_invalid")


def test_challenges_are_bound_to_their_event_and_signed(make_event) -> None:
    one = make_event(slug="one", pow_difficulty=4)
    other = make_event(slug="other", pow_difficulty=4)
    issued = challenge_for(one.slug)
    nonce = solve(issued["challenge"], 4)
    elsewhere = join(
        new_fan(), other.slug, {"pow": {"challenge": issued["challenge"], "nonce": nonce}}
    )
    assert elsewhere.json()["error"] == "pow_invalid"
    forged = issued["challenge"][:-3] + "AAA"
    for proof in ({"challenge": forged, "nonce": solve(forged, 4)}, "x", {"challenge": 1}):
        response = join(new_fan(), one.slug, {"pow": proof})
        assert response.status_code == 400
