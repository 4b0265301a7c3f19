import hashlib
import uuid

from queueing.rules.shuffle import place_key, place_rank_estimate, shuffled_order


def test_the_order_is_a_function_of_the_seed_alone() -> None:
    ids = [uuid.uuid4() for _ in range(50)]
    assert shuffled_order("seed", ids) == shuffled_order("seed", list(reversed(ids)))
    assert shuffled_order("seed", ids) != shuffled_order("other", ids)
    assert sorted(shuffled_order("seed", ids)) == sorted(str(i) for i in ids)


def test_the_order_is_recomputable_by_anyone() -> None:
    ids = [str(uuid.uuid4()) for _ in range(5)]
    by_hand = sorted(ids, key=lambda t: hashlib.sha256(f"s3cret:{t}".encode()).hexdigest())
    assert shuffled_order("s3cret", ids) == by_hand


def test_place_key_is_deterministic_and_stable() -> None:
    ticket = uuid.UUID("12345678-1234-5678-1234-567812345678")
    # Pinned: an outsider's recomputation (docs/api.md, "Random order") gives this number.
    expected = int(hashlib.sha256(f"seed:{ticket}".encode()).hexdigest()[:13], 16)
    assert place_key("seed", ticket) == expected
    assert place_key("seed", str(ticket)) == expected
    assert 0 <= expected < 2**52


def test_place_key_depends_on_the_seed() -> None:
    ids = [uuid.uuid4() for _ in range(50)]
    assert [place_key("a", t) for t in ids] != [place_key("b", t) for t in ids]


def test_place_keys_sort_as_the_shuffle_does() -> None:
    ids = [uuid.uuid4() for _ in range(200)]
    by_place = sorted((str(t) for t in ids), key=lambda t: place_key("seed", t))
    assert by_place == shuffled_order("seed", ids)
    # Exact as a Redis score (a double).
    assert all(float(place_key("seed", t)) == place_key("seed", t) for t in ids)


def test_the_expected_fans_below_a_place_is_its_share_of_the_range() -> None:
    assert place_rank_estimate(0, 1000) == 0
    assert place_rank_estimate(2**51, 1000) == 500
    assert place_rank_estimate(2**52 - 1, 1000) == 999
    # Over many tickets, the estimate is close to the count below.
    places = sorted(place_key("seed", uuid.uuid4()) for _ in range(4000))
    for rank in (400, 2000, 3600):
        assert abs(place_rank_estimate(places[rank], len(places)) - rank) < 150
