"""The draw's public answers (queueing/web/api_draw.py): the seed and list only once drawn,
the list paged in hash order, one registration's proof, bad input in the contract."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from queueing.line.draw import registration_draw
from queueing.rules.draw import Listed, list_leaf
from queueing.rules.merkle import ProofStep, merkle_proof_root
from tests.helpers import registration_window_open, registrations_made

pytestmark = pytest.mark.django_db


def drawn(event, *, by_mail: int = 3, by_shop: int = 4):
    window = registration_window_open(event, winners=2, waitlist=2)
    made = registrations_made(event, by_mail=by_mail, by_shop=by_shop)
    window.closes_at = timezone.now() - timedelta(seconds=1)
    window.save(update_fields=["closes_at"])
    registration_draw(event_id=event.id, now=timezone.now())
    return made


def test_before_the_draw_the_seed_and_list_are_not_published(event) -> None:
    registration_window_open(event)
    answer = Client().get(f"/api/v1/events/{event.slug}/draw").json()
    assert answer["state"] == "registering" and answer["draw_seed"] is None
    assert answer["draw_seed_sha256"] == event.draw_seed_sha256 and answer["list_root"] is None
    listing = Client().get(f"/api/v1/events/{event.slug}/draw/registrations")
    assert listing.status_code == 409 and listing.json()["error"] == "event_not_open"


def test_after_the_draw_everything_is_published_and_paged(event) -> None:
    made = drawn(event)
    answer = Client().get(f"/api/v1/events/{event.slug}/draw").json()
    assert answer["state"] == "drawn" and answer["draw_seed"] == event.draw_seed
    assert answer["count"] == 7 and answer["tiers"]["General"] == {
        "registrations": 7,
        "winners": 2,
        "waitlist": 2,
    }
    rows, url = [], f"/api/v1/events/{event.slug}/draw/registrations?limit=3"
    while url:
        page = Client().get(url).json()
        rows += page["results"]
        url = page["next"]
    assert [r["hash"] for r in rows] == sorted(r.hash for r in made)
    assert {r["outcome"] for r in rows} == {"won", "waitlisted", "lost"}


def test_a_registration_s_proof_reaches_the_published_root(event) -> None:
    made = drawn(event)
    root = Client().get(f"/api/v1/events/{event.slug}/draw").json()["list_root"]
    for registered in made:
        proof = Client().get(f"/api/v1/registrations/{registered.registration.id}/proof").json()
        steps = [ProofStep(s["side"], s["hash"]) for s in proof["proof"]]
        leaf = list_leaf(Listed(hash=proof["hash"], tier=proof["tier"]))
        assert merkle_proof_root(leaf, steps) == root == proof["list_root"]


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/api/v1/events/onsale/draw/registrations?limit=0", 400, "bad_request"),
        ("/api/v1/events/onsale/draw/registrations?limit=x", 400, "bad_request"),
        ("/api/v1/events/onsale/draw/registrations?after=zz", 400, "bad_request"),
        ("/api/v1/registrations/not-a-uuid/proof", 404, "registration_not_found"),
        (
            "/api/v1/registrations/00000000-0000-0000-0000-000000000000/proof",
            404,
            "registration_not_found",
        ),
        ("/api/v1/events/nope/draw", 404, "event_not_found"),
    ],
)
def test_bad_input_is_refused_in_the_contract(event, path, status, code) -> None:
    drawn(event, by_mail=1, by_shop=0)
    answer = Client().get(path)
    assert answer.status_code == status and answer.json()["error"] == code


def test_an_on_sale_without_a_window_has_no_draw(event) -> None:
    assert Client().get(f"/api/v1/events/{event.slug}/draw").status_code == 404
