import hashlib
import uuid

from queueing.rules.shuffle import shuffled_order


def test_the_order_is_a_function_of_the_seed_alone() -> None:
    ids = [uuid.uuid4() for _ in range(50)]
    assert shuffled_order("seed", ids) == shuffled_order("seed", list(reversed(ids)))
    assert shuffled_order("seed", ids) != shuffled_order("other", ids)
    assert sorted(shuffled_order("seed", ids)) == sorted(str(i) for i in ids)


def test_the_order_is_recomputable_by_anyone() -> None:
    ids = [str(uuid.uuid4()) for _ in range(5)]
    by_hand = sorted(ids, key=lambda t: hashlib.sha256(f"s3cret:{t}".encode()).hexdigest())
    assert shuffled_order("s3cret", ids) == by_hand
